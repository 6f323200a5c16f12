/* hub.c - see hub.h: the owner of the dashboard hub. Creates and frees it, wires the follower
 * to the core (timers, the ingest and store listeners), and holds what every activity uses:
 * the op each Redis command carries, frames to the ws thread, and the stats frames. The
 * activities: sessions and client messages (sess.c), snapshots and history (history.c), the
 * stream follower and resume (follow.c); shared state in internal.h.
 * runs on: core thread. */
#include "relay/dash/hub.h"
#include "relay/dash/internal.h"
#include "protocol/addr.h"
#include "protocol/event.h"
#include "relay/common/idmap.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/edge/ws_server.h"
#include "relay/edge/ws_thread.h"
#include "relay/ingest/ingest.h"
#include "relay/ingest/upstream.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers --------------------------------------------------------------------- */

int dash_enter(struct hub *h)
{
    h->pending--;
    if (!h->closing)
        return 0;
    if (h->pending == 0) {
        dash_parts_free(h);
        free(h->pos);
        idmap_free(h->live_ids);
        idmap_free(h->sess_ids);
        free(h->waiters);
        free(h->tab);
        free(h);
    }
    return 1;
}

const char *dash_reply_field(const redisReply *fields, const char *name, size_t *len)
{
    if (fields == NULL || fields->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < fields->elements; i += 2)
        if (fields->element[i]->str && strcmp(fields->element[i]->str, name) == 0) {
            if (len)
                *len = fields->element[i + 1]->len;
            return fields->element[i + 1]->str;
        }
    return NULL;
}

void dash_str_set(char **dst, const char *s)
{
    size_t n = strlen(s);
    if (*dst != NULL && strlen(*dst) >= n) {
        memcpy(*dst, s, n + 1);
        return;
    }
    free(*dst);
    *dst = xstrdup(s);
}

/* ---- ops: what every Redis command carries --------------------------------------------- */

struct op *dash_op_new(struct hub *h, uint64_t sess, uint32_t no, const char *id)
{
    struct op *op = xcalloc(1, sizeof(*op));
    op->h = h;
    op->sess = sess;
    op->no = no;
    if (id != NULL)
        snprintf(op->id, sizeof(op->id), "%s", id);
    return op;
}

struct hsub *dash_op_sub(struct op *op, struct hsess **xp)
{
    struct hsess *x = dash_sess_find(op->h, op->sess);
    *xp = x;
    return x != NULL && !x->closing ? dash_sub_find(x, op->no) : NULL;
}

struct hsub *dash_op_finish(struct op *op, struct hsess **xp)
{
    struct hub *h = op->h;
    struct hsub *u = dash_enter(h) ? NULL : dash_op_sub(op, xp);
    free(op);
    return u;
}

/* ---- frames to the ws thread ------------------------------------------------------------ */

void dash_send_text(struct hub *h, uint64_t sess, const char *key, const char *text,
                    size_t len)
{
    struct xmsg *m = xmsg_new(XMSG_DASH_SEND, sess, text, len);
    if (key != NULL)
        snprintf(m->key, sizeof(m->key), "%s", key);
    xq_push(h->c->to_ws, m);
}

void dash_send_json(struct hub *h, uint64_t sess, const char *key, json_t *j)
{
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (t != NULL)
        dash_send_text(h, sess, key, t, strlen(t));
    free(t);
    json_decref(j);
}

void dash_filter_op(struct hub *h, uint64_t sess, enum dash_op op, const char *key,
                    uint64_t gen, const char *data)
{
    struct xmsg *m = xmsg_new(XMSG_DASH_ACCEPT_SUB, sess, data, data ? strlen(data) : 0);
    m->code = op;
    m->gen = gen;
    if (key != NULL)
        snprintf(m->key, sizeof(m->key), "%s", key);
    xq_push(h->c->to_ws, m);
}

static json_t *sub_filters_json(const struct hsub *u)
{
    if (u->kind == SUB_ID)
        return json_pack("{s:s}", "id", u->id);
    return dash_broad_to_json(&u->f);
}

json_t *dash_sub_data(const struct hsub *u)
{
    return json_pack("{s:s,s:o}", "event", u->kind == SUB_STATS ? STATS_EVENT : EVENT_NAME,
                     "filters", sub_filters_json(u));
}

char *dash_encode_frame(struct hub *h, const char *rec, size_t rlen, int snapshot,
                        const char *sid, struct status_event *ev, size_t *len)
{
    struct proto_err pe;
    memset(&pe, 0, sizeof(pe));
    if (proto_event_from_record(rec, rlen, ev, &pe) != 0) {
        if (h->frame_errors++ == 0)
            log_warn("event record unreadable, not sent to dashboards", "stream_id=%s",
                     sid ? sid : "");
        return NULL;
    }
    size_t flen = 0;
    char *f = proto_event_ws_frame(ev, snapshot, wall_ms(), &flen);
    if (f == NULL || flen < 2 || sid == NULL || sid[0] == '\0') {
        *len = flen;
        return f;
    }
    /* the frame ends with the statusrelay object's "}" and the envelope's "}" */
    size_t sl = strlen(sid);
    char *out = xmalloc(flen + sl + 16);
    memcpy(out, f, flen - 2);
    size_t n = flen - 2;
    memcpy(out + n, ",\"streamId\":\"", 13);
    n += 13;
    memcpy(out + n, sid, sl);
    n += sl;
    memcpy(out + n, "\"}}", 4);
    n += 3;
    free(f);
    *len = n;
    return out;
}

/* ---- stats ---------------------------------------------------------------------------------- */

static json_t *stats_json(struct hub *h)
{
    struct core *c = h->c;
    const struct metrics *m = &c->metrics;
    int64_t now = mono_ms();
    /* events/s over the last few ticks (every process's events: we follow the stream) */
    double rate = 0;
    for (int k = 1; k <= 6; k++) { /* the oldest sample there is (the first seconds too) */
        int i = (h->rate_i + k) % 6;
        if (h->rate_ms[i] > 0 && now - h->rate_ms[i] >= 500) {
            rate = (double)(h->events_seen - h->rate_seen[i]) * 1000.0 /
                   (double)(now - h->rate_ms[i]);
            break;
        }
    }
    json_t *by_status = json_object();
    for (int i = 0; i < METRICS_STATUSES; i++)
        if (m->requests_by_status[i] >= 0)
            json_object_set_new(by_status, metrics_statuses[i],
                                json_integer(m->requests_by_status[i]));
    struct ws_thread_stats ws;
    memset(&ws, 0, sizeof(ws));
    if (c->ws != NULL)
        ws_thread_stats(c->ws, &ws);
    uint64_t failed = m->wh_attempts > m->wh_delivered ? m->wh_attempts - m->wh_delivered : 0;
    return json_pack(
        "{s:s,s:{s:I,s:s,s:{s:f,s:I},s:{s:I,s:I,s:I,s:I,s:I,s:I},s:{s:s,s:I,s:I,s:I},"
        "s:{s:I,s:o},s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I},s:{s:I,s:I}}}",
        "type", "stats", "data", "at", (json_int_t)wall_ms(), "instance", c->instance_id,
        "events", "perSecond", rate, "total", (json_int_t)h->events_seen, "deliveries", "ok",
        (json_int_t)m->wh_delivered, "failed", (json_int_t)failed, "retries",
        (json_int_t)m->wh_retries, "dead", (json_int_t)(m->q_dead >= 0 ? m->q_dead : 0),
        "deadHere", (json_int_t)m->wh_dead, "inflight",
        (json_int_t)(m->q_inflight >= 0 ? m->q_inflight : 0), "upstream", "state",
        c->upstream ? upstream_state_name(c->upstream) : "down", "subscriptions",
        (json_int_t)(c->upstream ? upstream_subscriptions(c->upstream) : 0), "reconnects",
        (json_int_t)m->upstream_ws_reconnects, "lagging", (json_int_t)m->upstream_ws_lagging,
        "requests", "tracked", (json_int_t)(m->tracked_polled >= 0 ? m->tracked_polled : 0),
        "byStatus", by_status, "dashboard", "sessions", (json_int_t)ws.dash.sessions,
        "deliveries", (json_int_t)ws.dash.deliveries, "queued", (json_int_t)ws.dash.queued,
        "conflated", (json_int_t)ws.dash.conflated, "slowClosed",
        (json_int_t)ws.dash.slow_closed, "deadPeers", (json_int_t)ws.dash.dead_peers,
        "eventsIn", (json_int_t)ws.dash.events_in, "routeNs", (json_int_t)ws.dash.route_ns,
        "framesOut", (json_int_t)ws.dash.frames_out, "watch", "stuckAfterMs",
        (json_int_t)c->cfg->stuck_after_ms, "stuck",
        (json_int_t)(m->requests_stuck >= 0 ? m->requests_stuck : 0));
}

void dash_stats_frame_to(struct hub *h, uint64_t sess)
{
    dash_send_json(h, sess, WS_SERVER_STATS_KEY, stats_json(h));
}

static void on_stats_tick(evutil_socket_t fd, short what, void *arg)
{
    struct hub *h = arg;
    h->rate_i = (h->rate_i + 1) % 6;
    h->rate_seen[h->rate_i] = h->events_seen;
    h->rate_ms[h->rate_i] = mono_ms();
    if (h->nstats == 0)
        return;
    json_t *j = stats_json(h);
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (t == NULL)
        return;
    size_t len = strlen(t);
    for (size_t i = 0; i < h->tab_size; i++)
        for (struct hsess *x = h->tab[i]; x != NULL; x = x->hnext)
            if (x->stats > 0 && !x->closing)
                dash_send_text(h, x->id, WS_SERVER_STATS_KEY, t, len);
    free(t);
}

/* ---- module --------------------------------------------------------------------------------- */

struct hub *hub_new(struct core *c)
{
    struct hub *h = xcalloc(1, sizeof(*h));
    h->c = c;
    h->tab_size = 64;
    h->tab = xcalloc(h->tab_size, sizeof(*h->tab));
    h->live_ids = idmap_new();
    h->sess_ids = idmap_new();
    h->loopback_listen = proto_listen_is_loopback(c->cfg->ws_listen);
    h->np = store_partitions(c->store);
    if (h->np > 1)
        h->pos = xcalloc(h->np, sizeof(*h->pos));
    key_build(h->k_events, sizeof(h->k_events), store_tag(c->store), "events", NULL, NULL);
    h->poll_ev = event_new(c->base, -1, EV_PERSIST, dash_on_poll, h);
    h->kick_ev = event_new(c->base, -1, 0, dash_on_poll, h);
    h->stats_ev = event_new(c->base, -1, EV_PERSIST, on_stats_tick, h);
    h->rate_ms[0] = mono_ms();
    struct timeval pt = {0, HUB_POLL_MS * 1000}, st = {HUB_STATS_MS / 1000,
                                                       (HUB_STATS_MS % 1000) * 1000};
    event_add(h->poll_ev, &pt);
    event_add(h->stats_ev, &st);
    if (c->ingest)
        ingest_on_event(c->ingest, dash_on_ingest_event, h);
    store_on_state(c->store, dash_on_store_state, h);
    char cfg[64];
    snprintf(cfg, sizeof(cfg), "%lld %lld", (long long)c->cfg->ws_ping_interval_ms,
             (long long)c->cfg->ws_ping_timeout_ms);
    dash_filter_op(h, 0, DASH_OP_CONFIG, NULL, 0, cfg);
    return h;
}

void hub_free(struct hub *h)
{
    if (h == NULL)
        return;
    h->closing = 1;
    event_free(h->poll_ev);
    event_free(h->kick_ev);
    event_free(h->stats_ev);
    for (size_t i = 0; i < h->tab_size; i++)
        for (struct hsess *x = h->tab[i], *next; x != NULL; x = next) {
            next = x->hnext;
            while (x->subs != NULL)
                dash_sub_remove(h, x, x->subs, 0);
            free(x);
        }
    memset(h->tab, 0, h->tab_size * sizeof(*h->tab));
    h->count = 0;
    /* The ingest and store listeners cannot be removed: they check closing. ingest and the
     * store never call them after the loop stopped (core_free order, as for fanout.c). */
    h->pending++;
    dash_enter(h); /* frees now unless commands are in flight */
}
