/* health.c (api) - the operational routes: GET /healthz (alive), GET /readyz (ready to serve)
 * and GET /metrics (the page itself is metrics.c). runs on: core thread. */
#include "relay/api/internal.h"
#include "relay/api/metrics.h"
#include "relay/core.h"
#include "relay/common/util.h"
#include "relay/ingest/poller.h"
#include "relay/ingest/upstream.h"
#include "store/probe.h"
#include "store/store.h"

#include <event2/buffer.h>
#include <string.h>

#define CT_PROM "text/plain; version=0.0.4; charset=utf-8"

/* ---- GET /healthz, /readyz, /metrics --------------------------------------------------------- */

void api_h_healthz(struct ctx *x)
{
    api_reply_json(x, 200, json_pack("{s:s}", "status", "ok"));
}

/* Redis paused or hung (CLIENT PAUSE, DEBUG SLEEP, a stalled host) keeps the connection up
 * and the store "ready" until its command timeout (5 s) drops it. So readiness sends its own
 * cheap read (EXISTS on a key of the deployment's tag: routed like any command, cluster
 * included) whenever none is in flight, and a probe unanswered for READY_REDIS_BOUND_MS means
 * Redis does not answer: not ready. One probe per process (probe_t0 is the core thread's). */
#define READY_REDIS_BOUND_MS 1000
static int64_t probe_t0; /* mono ms the probe in flight was sent; 0: none */

static void on_probe(void *arg, const char *err)
{
    probe_t0 = 0; /* answered, or its connection went away (then the store is down) */
}

/* How long Redis has left the readiness probe unanswered (0: answered, or just sent). */
static int64_t redis_unanswered_ms(struct store *st)
{
    int64_t now = mono_ms();
    if (probe_t0 == 0) {
        probe_t0 = now; /* before the call: a callback run at once must clear it */
        if (store_probe(st, on_probe, NULL) != 0)
            probe_t0 = 0;
        return 0;
    }
    return now - probe_t0;
}

/* Ready = Redis answers and the settings are valid (they are: config_load refused to start
 * otherwise; a Redis setting we refuse shows as store_fatal). A Redis that answers but refuses
 * writes (OOM at maxmemory, READONLY replica, MISCONF after a failed save: seen on any command
 * or the janitor's write probe in the last few seconds) does not answer usefully: not ready,
 * "redis": "refusing_writes" with Redis' own words in "reason". Nor does one that leaves the
 * readiness probe unanswered over 1 s: "redis": "not_answering", "redisUnansweredMs". Not
 * ready while shutting down. The upstream websocket, the lease and the API key as the upstream
 * judged it ("upstreamAuth": ok | rejected | unknown, relay/ingest/poller.h) are reported,
 * never required. */
void api_h_readyz(struct ctx *x)
{
    struct core *c = x->api->c;
    int redis = store_ready(c->store);
    const char *refused = redis ? store_write_refused(c->store) : NULL;
    int64_t silent = redis ? redis_unanswered_ms(c->store) : 0;
    int hung = silent > READY_REDIS_BOUND_MS; /* "redis": "not_answering" */
    int ready = redis && refused == NULL && !hung && store_fatal(c->store) == NULL &&
                !c->shutting_down;
    const char *ws = c->upstream != NULL ? upstream_state_name(c->upstream) : "down";
    json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "status", ready ? "ready" : "not_ready", "redis",
                          !redis ? "down" : refused ? "refusing_writes" : hung ? "not_answering" : "up",
                          "upstreamWebsocket", ws, "lease",
                          strcmp(ws, "standby") == 0 ? "standby" : "held");
    if (o != NULL && refused != NULL)
        json_object_set_new(o, "reason", json_string(refused));
    if (o != NULL)
        json_object_set_new(o, "upstreamAuth", json_string(poller_auth_name(c->poller)));
    if (o != NULL && hung)
        json_object_set_new(o, "redisUnansweredMs", json_integer(silent));
    api_reply_json(x, ready ? 200 : 503, o);
}

void api_h_metrics(struct ctx *x)
{
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) {
        api_reply_oom(x);
        return;
    }
    metrics_render(x->api->c, b);
    api_send_evbuffer(x, 200, CT_PROM, b);
    evbuffer_free(b);
}
