/* core.c - see core.h. runs on: core thread.
 *
 * Owns the event_base and every module. The ws thread talks to us only through to_core
 * (drained on wake_ev, activated from the ws thread with event_active, which is safe because
 * evthread_use_pthreads() ran before event_base_new()). */
#include "relay/core.h"
#include "relay/depth.h"
#include "relay/delivery/delivery.h"
#include "relay/api/server.h"
#include "relay/common/httpc.h"
#include "relay/dash/hub.h"
#include "relay/ingest/ingest.h"
#include "relay/common/log.h"
#include "relay/ingest/anon.h"
#include "relay/ingest/poller.h"
#include "relay/ingest/feed.h"
#include "relay/ingest/chains.h"
#include "relay/ingest/upstream.h"
#include "relay/common/util.h"
#include "relay/ingest/watch.h"
#include "relay/edge/ws_thread.h"
#include "relay/edge/xq.h"
#include "store/apply.h"
#include "store/janitor.h"
#include "store/store.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct core_priv {
    struct core c; /* first: struct core * and struct core_priv * are interchangeable */
    struct event *sig_term, *sig_int, *sig_hup, *stop_ev;
    struct depth *depth; /* the depth gauges of /metrics (relay/depth.c) */
    int64_t stop_deadline; /* mono ms */
    int exit_status;
};

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct core *c = arg;
    for (struct xmsg *m = xq_take_all(c->to_core), *next; m != NULL; m = next) {
        next = m->next;
        switch (m->type) {
        case XMSG_UP_READY:
        case XMSG_UP_FRAME:
        case XMSG_UP_DOWN:
            if (c->upstream && upstream_on_msg(c->upstream, m))
                continue; /* kept: a frame stays with its apply */
            break;
        case XMSG_DASH_OPEN:
        case XMSG_DASH_MSG:
        case XMSG_DASH_GONE:
            hub_on_msg(c->hub, m);
            break;
        default:
            break;
        }
        xmsg_free(m);
    }
}

static void wake_core(void *arg)
{
    struct core *c = arg;
    event_active(c->wake_ev, EV_READ, 0);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct core *c = arg;
    if (sig == SIGHUP) {
        if (log_reopen() != 0)
            log_err("log file reopen failed", "path=%s", c->cfg->log_file);
        else
            log_info("log file reopened", "");
        return;
    }
    log_info("shutting down", "signal=%d", (int)sig);
    core_stop(c);
}

static void on_refund_failure(void *arg, const char *request_id, const char *reason)
{
    struct core *c = arg;
    metrics_refund_failure(&c->metrics, reason);
    log_warn("refund failed: user funds need a human", "request=%s reason=%s", request_id,
             reason);
}

/* A Redis setting we refuse to run with (allkeys eviction) stops the daemon at once. */
static void on_store_state(void *arg, int up)
{
    struct core_priv *cp = arg;
    const char *fatal = store_fatal(cp->c.store);
    if (!up && fatal != NULL && !cp->c.shutting_down) {
        log_err("refusing to run", "reason=\"%s\"", fatal);
        cp->exit_status = 1;
        core_stop(&cp->c);
    }
}

struct core *core_new(const struct config *cfg)
{
    struct core_priv *cp = xcalloc(1, sizeof(*cp));
    struct core *c = &cp->c;
    c->cfg = cfg;
    c->started_ms = wall_ms();
    unsigned char rnd[8];
    os_random(rnd, sizeof(rnd));
    snprintf(c->instance_id, sizeof(c->instance_id), "%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
             rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    evthread_use_pthreads();
    /* the changelist saves two epoll_ctl calls per keep-alive request in httpc */
    struct event_config *ecfg = event_config_new();
    event_config_set_flag(ecfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    c->base = event_base_new_with_config(ecfg);
    event_config_free(ecfg);
    if (c->base == NULL) {
        log_err("event_base_new failed", "");
        free(cp);
        return NULL;
    }
    struct store_opts so = {.url = cfg->redis_url, .prefix = cfg->redis_prefix, .fatal_checks = 1,
                            .partitions = (int)cfg->partitions};
    if ((c->store = store_new(c->base, &so)) == NULL) {
        core_free(c);
        return NULL;
    }
    store_on_state(c->store, on_store_state, cp);
    struct httpc_opts ho = {.max_total_conns = 256, .max_host_conns = 64,
                            .user_agent = "statusrelay/0.1"};
    c->httpc = httpc_new(c->base, &ho);
    c->wake_ev = event_new(c->base, -1, EV_PERSIST, on_wake, c);
    c->to_core = xq_new(wake_core, c);
    c->to_ws = xq_new(NULL, NULL);
    c->ingest = ingest_new(c);
    c->poller = poller_new(c);
    c->feed = feed_new(c);
    c->applier = applier_new(c->store, cfg->event_retention, poller_next_poll, c->poller);
    applier_set_watch(c->applier, cfg->waiting_ttl_ms, cfg->settled_watch_ms,
                      cfg->failure_tail_ms);
    applier_on_refund_failure(c->applier, on_refund_failure, c);
    struct janitor_opts jo = {.dead_retention_ms = cfg->dead_retention_ms,
                              .event_age_ms = cfg->event_retention_age_ms,
                              .request_retention_ms = cfg->request_retention_ms,
                              .compress_records = cfg->compress_records,
                              .stream_maxlen = cfg->event_retention};
    c->janitor = janitor_new(c->base, c->store, &jo); /* steps wait for the store */
    c->upstream = upstream_new(c);
    upstream_on_gap(c->upstream, poller_gap, c->poller);
    c->watch = watch_new(c);
    c->anon = anon_new(c);
    c->chains = chains_new(c);
    c->api = api_new(c);
    c->hub = hub_new(c);
    anon_on_gone(c->anon, hub_anon_gone, c->hub);
    cp->sig_term = evsignal_new(c->base, SIGTERM, on_signal, c);
    cp->sig_int = evsignal_new(c->base, SIGINT, on_signal, c);
    cp->sig_hup = evsignal_new(c->base, SIGHUP, on_signal, c);
    event_add(cp->sig_term, NULL);
    event_add(cp->sig_int, NULL);
    event_add(cp->sig_hup, NULL);
    signal(SIGPIPE, SIG_IGN);
    c->metrics.requests_stuck = -1;
    c->metrics.oldest_unsettled_ms = -1;
    cp->depth = depth_new(c->base, c->store, &c->metrics);
    return c;
}

int core_start(struct core *c)
{
    const struct config *cfg = c->cfg;
    struct ws_thread_opts wo = {
        .listen = cfg->ws_listen,
        .upstream_url = cfg->upstream_ws_url,
        .api_key = cfg->upstream_api_key,
        .ping_interval_ms = cfg->upstream_ping_interval_ms,
        .ping_timeout_ms = cfg->upstream_ping_timeout_ms,
        .dash_queue_max = cfg->ws_queue_max,
        .dash_queue_bytes = cfg->ws_queue_bytes,
        .dash_max_connections = cfg->ws_max_connections,
        .dash_cors_origins = cfg->cors_origins,
        /* DNS rebinding: without a stream token the Host must name us (README) */
        .dash_host_check = cfg->stream_token == NULL || cfg->stream_token[0] == '\0',
        .dash_allowed_hosts = cfg->allowed_hosts,
        .dash_max_per_address = cfg->ws_max_connections_per_address,
        .trusted = &cfg->trusted,
        .to_ws = c->to_ws,
        .to_core = c->to_core,
    };
    if ((c->ws = ws_thread_start(&wo)) == NULL)
        return -1;
    if (api_start(c->api) != 0)
        return -1;
    store_start(c->store);
    delivery_start(c);
    poller_start(c->poller);
    feed_start(c->feed);
    upstream_start(c->upstream);
    watch_start(c->watch);
    anon_start(c->anon);
    chains_start(c->chains);
    log_info("statusrelay started", "http=%s ws=%s upstream=%s instance=%s", cfg->http_listen,
             cfg->ws_listen, cfg->upstream_ws_url, c->instance_id);
    return 0;
}

/* Shutdown: wait (up to STATUSRELAY_SHUTDOWN_GRACE) until no delivery is in flight and
 * every outcome is recorded, then leave the loop; core_free closes the rest. */
static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct core_priv *cp = arg;
    struct core *c = &cp->c;
    int busy = delivery_busy(c) && store_ready(c->store);
    if (busy && mono_ms() < cp->stop_deadline) {
        struct timeval tv = {0, 50 * 1000};
        evtimer_add(cp->stop_ev, &tv);
        return;
    }
    if (busy)
        log_warn("shutdown grace over, deliveries in flight return to the queue when their "
                 "lease expires", "");
    event_base_loopexit(c->base, NULL);
}

void core_stop(struct core *c)
{
    struct core_priv *cp = (struct core_priv *)c;
    if (c->shutting_down)
        return;
    c->shutting_down = 1;
    if (c->api)
        api_stop_accepting(c->api);
    if (c->upstream)
        upstream_shutdown(c->upstream); /* hand the upstream websocket to another process */
    feed_shutdown(c->feed);             /* and the changes feed */
    anon_shutdown(c->anon); /* anonymous watches end with their connections */
    cp->stop_deadline = mono_ms() + c->cfg->shutdown_grace_ms;
    cp->stop_ev = evtimer_new(c->base, on_stop, cp);
    struct timeval tv = {0, 50 * 1000};
    evtimer_add(cp->stop_ev, &tv);
}

int core_run(struct core *c)
{
    struct core_priv *cp = (struct core_priv *)c;
    event_base_dispatch(c->base);
    return cp->exit_status;
}

void core_free(struct core *c)
{
    if (c == NULL)
        return;
    struct core_priv *cp = (struct core_priv *)c;
    if (c->ws) {
        xq_push(c->to_ws, xmsg_new(XMSG_SHUTDOWN, 0, NULL, 0));
        ws_thread_stop(c->ws);
    }
    /* Completions first, while every module they call back into is alive: httpc and store
     * finish their in-flight work with "shutdown"/"disconnected" errors. */
    anon_on_gone(c->anon, NULL, NULL);
    hub_free(c->hub);
    delivery_stop(c);
    httpc_free(c->httpc);
    janitor_free(c->janitor); /* before the store: its in-flight steps detach */
    store_free(c->store);
    api_free(c->api);
    watch_free(c->watch);
    upstream_free(c->upstream);
    poller_free(c->poller);
    feed_free(c->feed); /* after httpc and store: their completions call it */
    chains_free(c->chains); /* after httpc and store: their completions call it */
    anon_free(c->anon);     /* likewise */
    applier_free(c->applier);
    ingest_free(c->ingest);
    xq_free(c->to_core);
    xq_free(c->to_ws);
    if (c->wake_ev)
        event_free(c->wake_ev);
    depth_free(cp->depth);
    struct event *evs[] = {cp->sig_term, cp->sig_int, cp->sig_hup, cp->stop_ev};
    for (size_t i = 0; i < ARRAY_LEN(evs); i++)
        if (evs[i])
            event_free(evs[i]);
    if (c->base)
        event_base_free(c->base);
    free(cp);
}
