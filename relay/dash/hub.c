/* hub.c - see hub.h: the owner of the dashboard hub. Creates and frees it, wires the follower
 * and the stats to the core (timers, the ingest and store listeners), and hands the ws
 * thread's messages to client.c. The objects it owns are the folder's other files (map in
 * hub.h); shared state in internal.h.
 * runs on: core thread. */
#include "relay/dash/hub.h"
#include "protocol/addr.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/dash/client.h"
#include "relay/dash/follow.h"
#include "relay/dash/frames.h"
#include "relay/dash/internal.h"
#include "relay/dash/limits.h"
#include "relay/dash/ops.h"
#include "relay/dash/stats.h"
#include "relay/dash/table.h"
#include "relay/ingest/ingest.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>

struct hub *hub_new(struct core *c)
{
    struct hub *h = xcalloc(1, sizeof(*h));
    h->c = c;
    dash_table_init(h);
    dash_follow_init(h);
    h->loopback_listen = proto_listen_is_loopback(c->cfg->ws_listen);
    h->poll_ev = event_new(c->base, -1, EV_PERSIST, dash_on_poll, h);
    h->kick_ev = event_new(c->base, -1, 0, dash_on_poll, h);
    h->stats_ev = event_new(c->base, -1, EV_PERSIST, dash_on_stats_tick, h);
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

void hub_on_msg(struct hub *h, const struct xmsg *m)
{
    if (h == NULL || h->closing)
        return;
    struct hsess *x;
    switch (m->type) {
    case XMSG_DASH_OPEN:
        dash_client_open(h, m);
        break;
    case XMSG_DASH_MSG:
        if ((x = dash_sess_find(h, m->session)) != NULL)
            dash_client_msg(h, x, m);
        break;
    case XMSG_DASH_GONE:
        dash_client_gone(h, m->session);
        break;
    default:
        break;
    }
}

void hub_anon_gone(void *hub, const char *id)
{
    struct hub *h = hub;
    if (h == NULL || h->closing)
        return;
    dash_client_anon_gone(h, id);
}

void hub_free(struct hub *h)
{
    if (h == NULL)
        return;
    h->closing = 1;
    event_free(h->poll_ev);
    event_free(h->kick_ev);
    event_free(h->stats_ev);
    dash_sess_remove_all(h);
    /* The ingest and store listeners cannot be removed: they check closing. ingest and the
     * store never call them after the loop stopped (core_free order, as for fanout.c). */
    h->pending++;
    dash_enter(h); /* frees now unless commands are in flight */
}
