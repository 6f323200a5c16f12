/* stats.c - see stats.h: the stats frames of the dashboard.
 * runs on: core thread. */
#include "relay/dash/stats.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/dash/frames.h"
#include "relay/edge/ws_server.h"
#include "relay/edge/ws_thread.h"
#include "relay/ingest/upstream.h"

#include <stdlib.h>
#include <string.h>

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
        "s:{s:I,s:o},s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I},s:{s:I,s:I}}}",
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
        "framesOut", (json_int_t)ws.dash.frames_out, "frameWrites",
        (json_int_t)ws.dash.frame_writes, "watch", "stuckAfterMs",
        (json_int_t)c->cfg->stuck_after_ms, "stuck",
        (json_int_t)(m->requests_stuck >= 0 ? m->requests_stuck : 0));
}

void dash_stats_frame_to(struct hub *h, uint64_t sess)
{
    dash_send_json(h, sess, WS_SERVER_STATS_KEY, stats_json(h));
}

void dash_on_stats_tick(evutil_socket_t fd, short what, void *arg)
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

