/* upstream.c - see upstream.h. runs on: core thread.
 *
 * The ws thread reports READY/FRAME/DOWN with a connection generation; we only act on the
 * current generation, so frames or acks from a dead connection can never confuse the state
 * of the new one. Subscription state per tracked id lives in an idmap: SUB_ACKED once the
 * upstream acknowledged the subscribe on the current connection.
 *
 * Losing the websocket: DOWN_GRACE_MS after the connection went down (or after the lease was
 * taken) without a ready greeting, every watched request becomes due for polling at once
 * (poller_ws_lost): the requests it had confirmed were on the 30 s safety schedule. A
 * reconnect within the grace only repairs the gap (on_gap).
 *
 * Frames to Redis: at most APPLY_WINDOW websocket observations are being applied at once
 * (like the 64 POSTs in flight of a busy upstream webhook); the frames behind them wait here,
 * unparsed, in arrival order (u->wait_*), and go on as applies complete (pump_ev). Without
 * the window every frame of a burst went to Redis at once: thousands of commands queued on
 * the one connection, and every delivery step and poll waited behind them. A frame being
 * applied is kept (its slot) until its apply completes: if Redis went away meanwhile, it is
 * read again and handed to ingest's own queue (retried once Redis is back), as before. */
#include "relay/ingest/upstream.h"
#include "relay/core.h"
#include "relay/ingest/ingest.h"
#include "relay/ingest/poller.h"
#include "relay/common/idmap.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/edge/xq.h"
#include "protocol/normalize.h"
#include "store/leader.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUB_ACKED 1u
#define SUB_STALE 2u /* not in the watched set of a full sync in progress */
#define DOWN_GRACE_MS 3000 /* websocket down this long: every watched request is polled now */
#define APPLY_WINDOW 64    /* websocket observations being applied at once */

enum up_state { UP_IDLE = 0, UP_CONNECTING, UP_READY, UP_STANDBY };

struct upstream;
struct apply_slot { /* one websocket observation being applied */
    struct upstream *u;
    struct xmsg *m;    /* owned: the frame, until its apply completes */
    struct apply_slot *next_free;
};

struct upstream {
    struct core *c;
    enum up_state state;
    uint64_t gen;
    struct idmap *subs;
    int64_t down_since_mono, down_since_wall;
    int64_t lagging_until; /* mono ms: fast polling after a lagging report */
    upstream_gap_cb *on_gap; /* told when the websocket is back after a gap (poller) */
    void *on_gap_arg;
    int started;
    uint64_t rejected_logged;
    /* leader lease: exactly one process holds the upstream websocket (store/leader.h) */
    struct event *lease_ev;
    struct event *down_ev;  /* DOWN_GRACE_MS after a loss: poller_ws_lost */
    int held;               /* we hold the lease */
    int renewing;
    int64_t last_renew_ok;  /* mono ms */
    int remote_ws_ok;       /* the holder (maybe us) reports a healthy websocket */
    /* frames to Redis (see the top of the file) */
    struct apply_slot slots[APPLY_WINDOW];
    struct apply_slot *free_slots;
    unsigned applying;      /* slots in use */
    struct xmsg *wait_head, *wait_tail; /* owned: frames waiting for a slot, oldest first */
    size_t waiting;
    struct event *pump_ev;  /* a slot came free: submit waiting frames */
};

static void on_lease_tick(evutil_socket_t fd, short what, void *arg);
static void on_pump(evutil_socket_t fd, short what, void *arg);

/* The websocket stayed down for the grace: poll every watched request now. */
static void on_down_grace(evutil_socket_t fd, short what, void *arg)
{
    struct upstream *u = arg;
    if (!u->held || u->state == UP_READY || u->c->poller == NULL)
        return;
    log_warn("upstream websocket still down: every watched request is polled now",
             "down_ms=%lld subscriptions=%zu", (long long)(mono_ms() - u->down_since_mono),
             idmap_count(u->subs));
    poller_ws_lost(u->c->poller);
}

static void arm_down_grace(struct upstream *u)
{
    struct timeval tv = {DOWN_GRACE_MS / 1000, (DOWN_GRACE_MS % 1000) * 1000};
    evtimer_add(u->down_ev, &tv);
}
static void clear_ack(void *arg, const char *id, uint32_t *value);

static void send_frame(struct upstream *u, const char *type, const char *id)
{
    if (u->state != UP_READY)
        return;
    char buf[PROTO_MAX_ID + 128];
    int n = snprintf(buf, sizeof(buf),
                     "{\"type\":\"%s\",\"event\":\"request.status.updated\","
                     "\"filters\":{\"id\":\"%s\"}}",
                     type, id);
    struct xmsg *m = xmsg_new(XMSG_UP_SEND, 0, buf, (size_t)n);
    m->gen = u->gen;
    xq_push(u->c->to_ws, m);
}

static void on_store_state(void *arg, int up)
{
    struct upstream *u = arg;
    if (up && u->started && !u->renewing)
        on_lease_tick(-1, 0, u); /* compete for the lease as soon as Redis answers */
}

struct upstream *upstream_new(struct core *c)
{
    struct upstream *u = xcalloc(1, sizeof(*u));
    u->c = c;
    u->subs = idmap_new();
    u->down_since_mono = mono_ms();
    u->down_since_wall = wall_ms();
    store_on_state(c->store, on_store_state, u);
    u->lease_ev = event_new(c->base, -1, EV_PERSIST, on_lease_tick, u);
    u->down_ev = evtimer_new(c->base, on_down_grace, u);
    u->pump_ev = event_new(c->base, -1, 0, on_pump, u);
    for (int i = APPLY_WINDOW - 1; i >= 0; i--) {
        u->slots[i].u = u;
        u->slots[i].next_free = u->free_slots;
        u->free_slots = &u->slots[i];
    }
    return u;
}

void upstream_free(struct upstream *u)
{
    if (u == NULL)
        return;
    idmap_free(u->subs);
    if (u->lease_ev)
        event_free(u->lease_ev);
    if (u->down_ev)
        event_free(u->down_ev);
    if (u->pump_ev)
        event_free(u->pump_ev);
    for (struct xmsg *m = u->wait_head, *n; m != NULL; m = n) {
        n = m->next;
        xmsg_free(m);
    }
    for (int i = 0; i < APPLY_WINDOW; i++) /* applies still out: their frames go unread */
        xmsg_free(u->slots[i].m);
    free(u);
}

static void take_lead(struct upstream *u)
{
    u->held = 1;
    u->state = UP_CONNECTING;
    u->c->metrics.upstream_ws_state = 1;
    u->down_since_mono = mono_ms();
    u->down_since_wall = wall_ms();
    log_info("upstream websocket lease taken", "instance=%s", u->c->instance_id);
    arm_down_grace(u); /* the previous holder's confirmed requests are on safety polls */
    xq_push(u->c->to_ws, xmsg_new(XMSG_UP_START, 0, NULL, 0));
}

static void lose_lead(struct upstream *u, const char *why)
{
    if (!u->held)
        return;
    u->held = 0;
    u->state = UP_STANDBY;
    u->c->metrics.upstream_ws_state = 0;
    idmap_each(u->subs, clear_ack, u);
    evtimer_del(u->down_ev); /* the new holder polls what its websocket misses */
    log_warn("upstream websocket lease lost", "reason=%s", why);
    xq_push(u->c->to_ws, xmsg_new(XMSG_UP_STOP, 0, NULL, 0));
}

static void on_lease(void *arg, const char *err, int held, int ws_ok)
{
    struct upstream *u = arg;
    u->renewing = 0;
    if (err != NULL)
        return; /* keep our view; the expiry check in on_lease_tick decides */
    u->last_renew_ok = mono_ms();
    u->remote_ws_ok = ws_ok;
    if (held && !u->held && !u->c->shutting_down)
        take_lead(u);
    else if (!held && u->held)
        lose_lead(u, "taken");
}

static void on_lease_tick(evutil_socket_t fd, short what, void *arg)
{
    struct upstream *u = arg;
    int64_t lease = u->c->cfg->leader_lease_ms;
    /* could not renew for a whole lease: someone else may hold it now */
    if (u->held && mono_ms() - u->last_renew_ok > lease)
        lose_lead(u, "not renewed");
    if (u->renewing || u->c->shutting_down)
        return;
    if (leader_renew(u->c->store, u->c->instance_id, lease, u->held && u->state == UP_READY,
                     on_lease, u) == 0)
        u->renewing = 1;
}

void upstream_start(struct upstream *u)
{
    u->started = 1;
    u->state = UP_STANDBY;
    int64_t period = u->c->cfg->leader_lease_ms / 4;
    struct timeval tv = {period / 1000, (period % 1000) * 1000};
    evtimer_add(u->lease_ev, &tv);
    on_lease_tick(-1, 0, u);
}

void upstream_shutdown(struct upstream *u)
{
    if (!u->held)
        return;
    leader_release(u->c->store, u->c->instance_id);
    u->held = 0;
    xq_push(u->c->to_ws, xmsg_new(XMSG_UP_STOP, 0, NULL, 0));
}

void upstream_on_gap(struct upstream *u, upstream_gap_cb *fn, void *arg)
{
    u->on_gap = fn;
    u->on_gap_arg = arg;
}

static void clear_ack(void *arg, const char *id, uint32_t *value)
{
    *value &= ~SUB_ACKED;
}

static void resubscribe(void *arg, const char *id, uint32_t *value)
{
    send_frame(arg, "subscribe", id);
}

/* Read a frame: 0 and the event in ev (PROTO_WS_EVENT), 1 when it was something else (handled
 * here: a subscribe ack) or rejected (counted). ev is initialised in every case. */
static int read_frame(struct upstream *u, const struct xmsg *m, struct status_event *ev)
{
    struct proto_ws_msg msg;
    struct proto_err err;
    int rc = proto_normalize_ws((const char *)m->data, m->len, wall_ms(), &msg, ev, &err);
    if (rc != 0) {
        ingest_rejected(u->c->ingest, PROTO_SRC_WS);
        /* malformed frames are counted; log the first ones and then every 1000th */
        if (u->rejected_logged++ % 1000 == 0)
            log_warn("upstream frame rejected", "err=%s field=%s msg=\"%s\" count=%llu",
                     proto_strerror(rc), err.field, err.msg,
                     (unsigned long long)u->rejected_logged);
        return 1;
    }
    if (msg.kind == PROTO_WS_EVENT)
        return 0;
    if (msg.kind == PROTO_WS_SUB_ACK && msg.ctl_id[0] != '\0') {
        uint32_t v;
        if (idmap_get(u->subs, msg.ctl_id, &v))
            idmap_put(u->subs, msg.ctl_id, v | SUB_ACKED);
    }
    return 1;
}

/* The apply of a slot's observation completed (maybe synchronously, inside ingest_submit). */
static void on_applied(void *arg, const char *err, enum proto_verdict v,
                       const struct status_event *applied)
{
    struct apply_slot *sl = arg;
    struct upstream *u = sl->u;
    if (err == store_err_disconnected) { /* Redis went away: ingest's queue retries it */
        struct status_event ev;
        if (read_frame(u, sl->m, &ev) == 0)
            ingest_submit_take(u->c->ingest, &ev, 0, NULL, NULL);
        status_event_cleanup(&ev);
    } else if (err != NULL) {
        log_err("observation not applied", "source=ws err=%s", err);
    }
    xmsg_free(sl->m);
    sl->m = NULL;
    sl->next_free = u->free_slots;
    u->free_slots = sl;
    u->applying--;
    if (u->waiting > 0)
        event_active(u->pump_ev, EV_TIMEOUT, 0); /* never from inside ingest_submit */
}

/* Apply one frame; takes m. */
static void submit_frame(struct upstream *u, struct xmsg *m)
{
    struct status_event ev;
    if (read_frame(u, m, &ev) != 0) {
        status_event_cleanup(&ev);
        xmsg_free(m);
        return;
    }
    if (!store_ready(u->c->store) || u->c->metrics.ingest_pending > 0) {
        /* Redis down, or ingest's queue still holds older observations: behind them */
        ingest_submit_take(u->c->ingest, &ev, 0, NULL, NULL);
        status_event_cleanup(&ev);
        xmsg_free(m);
        return;
    }
    struct apply_slot *sl = u->free_slots;
    u->free_slots = sl->next_free;
    sl->m = m;
    u->applying++;
    ingest_submit_take(u->c->ingest, &ev, 0, on_applied, sl);
    status_event_cleanup(&ev);
}

/* Submit waiting frames while slots are free. */
static void on_pump(evutil_socket_t fd, short what, void *arg)
{
    struct upstream *u = arg;
    while (u->wait_head != NULL && u->free_slots != NULL) {
        struct xmsg *m = u->wait_head;
        u->wait_head = m->next;
        if (u->wait_head == NULL)
            u->wait_tail = NULL;
        u->waiting--;
        m->next = NULL;
        submit_frame(u, m);
    }
}

/* A frame of the current connection; takes m. */
static void on_frame(struct upstream *u, struct xmsg *m)
{
    if (u->wait_head == NULL && u->free_slots != NULL) {
        submit_frame(u, m);
        return;
    }
    m->next = NULL; /* wait for a slot, behind the frames already waiting */
    if (u->wait_tail)
        u->wait_tail->next = m;
    else
        u->wait_head = m;
    u->wait_tail = m;
    u->waiting++;
}

int upstream_on_msg(struct upstream *u, struct xmsg *m)
{
    if (!u->held)
        return 0; /* late messages of a connection we gave up */
    switch (m->type) {
    case XMSG_UP_READY:
        u->gen = m->gen;
        u->state = UP_READY;
        u->c->metrics.upstream_ws_state = 2;
        log_info("upstream websocket ready", "gen=%llu socket=%s subscriptions=%zu",
                 (unsigned long long)m->gen, (const char *)m->data, idmap_count(u->subs));
        evtimer_del(u->down_ev);
        idmap_each(u->subs, clear_ack, u);
        idmap_each(u->subs, resubscribe, u);
        if (u->down_since_wall && u->on_gap != NULL)
            u->on_gap(u->on_gap_arg, u->down_since_wall);
        u->down_since_mono = u->down_since_wall = 0;
        break;
    case XMSG_UP_FRAME:
        if (m->gen == u->gen && u->state == UP_READY) {
            on_frame(u, m);
            return 1;
        }
        break;
    case XMSG_UP_DOWN:
        if (m->gen != u->gen && u->state != UP_READY)
            break;
        if (u->state == UP_READY) {
            u->down_since_mono = mono_ms();
            u->down_since_wall = wall_ms();
            u->c->metrics.upstream_ws_reconnects++;
            log_warn("upstream websocket down", "gen=%llu code=%d reason=\"%s\"",
                     (unsigned long long)m->gen, m->code, (const char *)m->data);
            arm_down_grace(u);
        }
        u->state = UP_CONNECTING;
        u->c->metrics.upstream_ws_state = 1;
        idmap_each(u->subs, clear_ack, u);
        break;
    default:
        break;
    }
    return 0;
}

void upstream_track(struct upstream *u, const char *id)
{
    uint32_t v;
    if (idmap_get(u->subs, id, &v)) {
        if (v & SUB_STALE)
            idmap_put(u->subs, id, v & ~SUB_STALE);
        return;
    }
    idmap_put(u->subs, id, 0);
    send_frame(u, "subscribe", id);
}

struct stale_mark {
    upstream_scope_fn *in_scope;
    const void *scope;
};

static void mark_stale(void *arg, const char *id, uint32_t *value)
{
    const struct stale_mark *m = arg;
    if (m->in_scope(m->scope, id))
        *value |= SUB_STALE;
}

void upstream_sync_begin(struct upstream *u, upstream_scope_fn *in_scope, const void *scope)
{
    struct stale_mark m = {in_scope, scope};
    idmap_each(u->subs, mark_stale, &m);
}

struct stale_list {
    char **ids;
    size_t n, cap;
};

static void collect_stale(void *arg, const char *id, uint32_t *value)
{
    struct stale_list *l = arg;
    if (!(*value & SUB_STALE))
        return;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->ids = xrealloc(l->ids, l->cap * sizeof(*l->ids));
    }
    l->ids[l->n++] = xstrdup(id);
}

void upstream_sync_end(struct upstream *u)
{
    struct stale_list l = {0};
    idmap_each(u->subs, collect_stale, &l);
    for (size_t i = 0; i < l.n; i++) {
        upstream_untrack(u, l.ids[i]);
        free(l.ids[i]);
    }
    free(l.ids);
}

void upstream_untrack(struct upstream *u, const char *id)
{
    if (idmap_del(u->subs, id))
        send_frame(u, "unsubscribe", id);
}

int upstream_confirmed(const struct upstream *u, const char *id)
{
    uint32_t v;
    if (mono_ms() < u->lagging_until)
        return 0;
    if (!u->held) /* standby: trust the holder's health report */
        return u->remote_ws_ok;
    if (u->state != UP_READY)
        return 0;
    return idmap_get(u->subs, id, &v) && (v & SUB_ACKED);
}

int upstream_healthy(const struct upstream *u)
{
    if (mono_ms() < u->lagging_until)
        return 0;
    return u->held ? u->state == UP_READY : u->remote_ws_ok;
}

const char *upstream_state_name(const struct upstream *u)
{
    static const char *const names[] = {"down", "connecting", "ready", "standby"};
    return names[u->state];
}

void upstream_lagging(struct upstream *u)
{
    u->c->metrics.upstream_ws_lagging++;
    if (mono_ms() >= u->lagging_until) {
        /* A silent connection may be half-dead: start afresh. Not while frames of it are
         * still waiting here or being applied: then it is not silent, we are behind, and a
         * reconnect would only lose what it has sent and not yet reached us. */
        size_t behind = u->waiting + u->applying;
        int reconnect = u->state == UP_READY && behind == 0;
        if (reconnect)
            xq_push(u->c->to_ws, xmsg_new(XMSG_UP_RECONNECT, 0, NULL, 0));
        log_warn("upstream websocket lagging: a safety poll found a change it never sent; "
                 "fast polling for 60s",
                 "reconnect=%d frames_behind=%zu", reconnect, behind);
    }
    u->lagging_until = mono_ms() + 60000;
}

uint64_t upstream_subscriptions(const struct upstream *u)
{
    return idmap_count(u->subs);
}

int upstream_tracked(const struct upstream *u, const char *id)
{
    return idmap_get(u->subs, id, NULL);
}
