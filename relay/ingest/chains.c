/* chains.c - see chains.h. runs on: core thread.
 *
 * One tick per refresh/4 (at most 5 s): polls_chains_look (store/polls.h) says whether a
 * refresh is due and ours (it took the lease), and returns the cached body when its fetch time
 * differs from the one this process last handed to the ws thread. A due refresh goes through
 * poller_get (one call from the shared budget); its end goes to polls_chains_put, which stores
 * a good body and releases or keeps the lease (the retry delay). */
#include "relay/ingest/chains.h"
#include "relay/core.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/edge/xq.h"
#include "relay/ingest/poller.h"
#include "protocol/facts.h"
#include "store/polls.h"
#include "store/store.h"

#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEASE_MS 30000              /* a fetch holds the lease this long at most */
#define TICK_MIN_MS 250
#define TICK_MAX_MS 5000
#define MAX_BODY (16 * 1024 * 1024) /* the upstream list is large (tokens per chain) */

struct chains {
    struct core *c;
    struct event *tick_ev;
    char known_at[24]; /* fetch time of the list last handed to the ws thread ("" = none) */
    int looking;       /* a polls_chains_look in flight */
    int fetching;      /* a refresh in flight (poller_get .. polls_chains_put) */
    struct proto_explorers ex; /* explorer links of the list last seen (request facts) */
};

static const char *const slim_keys[] = {
    "id", "name", "displayName", "vmType", "iconUrl", "logoUrl", "brandColor", "explorerUrl",
    "explorerName", "explorerPaths", "explorerQueryParams", "disabled",
    "blockProductionLagging", "depositEnabled",
};

char *chains_slim(const char *body, size_t len, size_t *out_len)
{
    json_t *in = json_loadb(body, len, 0, NULL), *out = NULL, *list = NULL;
    char *text = NULL;
    json_t *chains = json_object_get(in, "chains");
    if (!json_is_object(in) || !json_is_array(chains))
        goto out;
    if ((out = json_object()) == NULL || (list = json_array()) == NULL ||
        json_object_set(out, "chains", list) != 0)
        goto out;
    size_t i;
    json_t *c;
    json_array_foreach(chains, i, c) {
        if (!json_is_object(c))
            continue;
        json_t *o = json_object();
        if (o == NULL || json_array_append_new(list, o) != 0)
            goto out;
        for (size_t k = 0; k < ARRAY_LEN(slim_keys); k++) {
            json_t *v = json_object_get(c, slim_keys[k]);
            if (v != NULL && json_object_set(o, slim_keys[k], v) != 0)
                goto out;
        }
    }
    text = json_dumps(out, JSON_COMPACT);
    if (text != NULL)
        *out_len = strlen(text);
out:
    json_decref(list);
    json_decref(out);
    json_decref(in);
    return text;
}

/* ---- the end of a refresh ------------------------------------------------------------------ */

static void on_put(void *arg, const char *err, int stored)
{
    struct chains *ch = arg;
    ch->fetching = 0;
    if (stored)
        event_active(ch->tick_ev, EV_TIMEOUT, 0); /* hand the new list over now */
}

/* Store body (NULL: the refresh failed or never started) and release the lease, or keep it
 * hold_ms. ends_fetch: this is the end of the refresh in flight (ch->fetching). */
static void put(struct chains *ch, const char *body, size_t len, int64_t hold_ms,
                int ends_fetch)
{
    if (polls_chains_put(ch->c->store, ch->c->instance_id, body, len, hold_ms,
                         ends_fetch ? on_put : NULL, ch) != 0 && ends_fetch)
        ch->fetching = 0; /* Redis is gone: the lease expires by itself */
}

static int valid_list(const char *body, size_t len)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    int ok = json_is_object(j) && json_is_array(json_object_get(j, "chains"));
    json_decref(j);
    return ok;
}

static void on_fetched(void *arg, const struct httpc_resp *r)
{
    struct chains *ch = arg;
    int64_t period = ch->c->cfg->chains_refresh_ms;
    if (r->err == poller_err_not_sent) {
        log_debug("chain list refresh deferred: upstream budget spent", "");
        put(ch, NULL, 0, 0, 1);
    } else if (r->err != NULL || r->status == 429 || r->status >= 500) {
        log_warn("upstream chain list read failed", "status=%ld err=%s retry_ms=%d", r->status,
                 r->err ? r->err : "none", LEASE_MS);
        put(ch, NULL, 0, LEASE_MS, 1);
    } else if (r->status != 200 || !valid_list(r->body, r->body_len)) {
        log_warn("upstream chain list refused or not a list", "status=%ld body=\"%.120s\" "
                 "retry_ms=%lld", r->status, r->body, (long long)period);
        put(ch, NULL, 0, period, 1);
    } else {
        log_info("upstream chain list fetched", "bytes=%zu", r->body_len);
        put(ch, r->body, r->body_len, 0, 1);
    }
}

/* ---- the periodic look ------------------------------------------------------------------- */

static void hand_to_ws(struct chains *ch, const char *body, size_t body_len)
{
    size_t len = 0;
    char *slim = chains_slim(body, body_len, &len);
    if (slim == NULL) {
        log_warn("cached chain list unreadable: not handed to the dashboard port", "");
        return;
    }
    struct xmsg *m = xmsg_new(XMSG_DASH_ACCEPT_SUB, 0, slim, len);
    m->code = DASH_OP_CHAINS;
    xq_push(ch->c->to_ws, m);
    free(slim);
}

static void on_look(void *arg, const char *err, const struct polls_chains_seen *r)
{
    struct chains *ch = arg;
    ch->looking = 0;
    if (err != NULL)
        return; /* next tick */
    if (r->body != NULL) {
        hand_to_ws(ch, r->body, r->body_len);
        struct proto_explorers ex;
        struct proto_err perr;
        if (proto_explorers_from_chains(r->body, r->body_len, &ex, &perr) == 0) {
            proto_explorers_cleanup(&ch->ex);
            ch->ex = ex;
        }
        snprintf(ch->known_at, sizeof(ch->known_at), "%s", r->at);
    }
    if (!r->fetch)
        return;
    if (ch->fetching || ch->c->shutting_down) {
        put(ch, NULL, 0, 0, 0);
        return;
    }
    ch->fetching = 1;
    if (poller_get(ch->c->poller, "/chains", MAX_BODY, on_fetched, ch) != 0) {
        ch->fetching = 0;
        put(ch, NULL, 0, 0, 0); /* polling paused or Redis gone: a later look tries again */
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct chains *ch = arg;
    if (ch->looking || ch->c->shutting_down || !store_ready(ch->c->store))
        return;
    struct polls_chains_look q = {.period_ms = ch->c->cfg->chains_refresh_ms,
                                  .lease_ms = LEASE_MS,
                                  .holder = ch->c->instance_id,
                                  .known_at = ch->known_at};
    ch->looking = 1;
    if (polls_chains_look(ch->c->store, &q, on_look, ch) != 0)
        ch->looking = 0;
}

static void on_store_state(void *arg, int up)
{
    struct chains *ch = arg;
    if (up)
        event_active(ch->tick_ev, EV_TIMEOUT, 0);
}

struct chains *chains_new(struct core *c)
{
    struct chains *ch = xcalloc(1, sizeof(*ch));
    ch->c = c;
    ch->tick_ev = event_new(c->base, -1, EV_PERSIST, on_tick, ch);
    store_on_state(c->store, on_store_state, ch);
    return ch;
}

void chains_start(struct chains *ch)
{
    int64_t ms = ch->c->cfg->chains_refresh_ms / 4;
    ms = ms < TICK_MIN_MS ? TICK_MIN_MS : ms > TICK_MAX_MS ? TICK_MAX_MS : ms;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    evtimer_add(ch->tick_ev, &tv);
    if (store_ready(ch->c->store))
        event_active(ch->tick_ev, EV_TIMEOUT, 0);
}

const struct proto_explorers *chains_explorers(const struct chains *ch)
{
    return ch != NULL && ch->ex.n > 0 ? &ch->ex : NULL;
}

void chains_free(struct chains *ch)
{
    if (ch == NULL)
        return;
    proto_explorers_cleanup(&ch->ex);
    if (ch->tick_ev)
        event_free(ch->tick_ev);
    free(ch);
}
