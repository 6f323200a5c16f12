/* anon.c - see anon.h. runs on: core thread.
 *
 * Local state: held (id -> local subscriber count), addrs (address key -> new ids taken) and
 * reads (id -> end of its status-read lease; such an id counts one subscriber in held while
 * its lease lasts, checked every ANON_EXPIRE_MS).
 * Redis, through store/watches.h (which splits ids by partition and answers once):
 * watches_hold (first subscriber, and the refresh of every held id each third of the lease),
 * watches_release (last subscriber gone), watches_hold_expire (every second, any process:
 * holders of dead processes), watches_miss (a 404 answer). What ended is counted and logged
 * as one summary line at most every ANON_LOG_MS. */
#include "relay/ingest/anon.h"
#include "relay/core.h"
#include "protocol/forwarded.h"
#include "protocol/proto.h"
#include "relay/common/idmap.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/ingest/upstream.h"
#include "relay/ingest/watch.h"
#include "store/store.h"
#include "store/watches.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANON_TICK_MS 250
/* The refresh of every held id is spread over the ticks of one refresh period, at least
 * ANON_BATCH ids a tick: all at once, 10,000 held ids were 20 back-to-back script calls that
 * kept Redis busy for tens of ms, and every event waited behind them. */
#define ANON_EXPIRE_MS 1000
#define ANON_EXPIRE_BATCH 500
#define ANON_BATCH 500 /* ids per refresh script call */
#define ANON_LOG_MS 10000
#define ANON_READ_UNIT_MS 100 /* read leases end in these units since the map's start */

struct anon {
    struct core *c;
    struct idmap *held;  /* id -> subscribers in this process */
    struct idmap *addrs; /* address key -> new ids taken by its anonymous subscriptions */
    struct idmap *reads; /* id -> end of its status-read lease (ANON_READ_UNIT_MS since t0) */
    int64_t t0;          /* mono ms */
    struct event *tick_ev;
    int64_t next_refresh, next_expire, next_log, next_reads; /* mono ms */
    char **round;            /* the refresh round under way: copies of the held ids */
    size_t round_n, round_i; /* its size, and how many were sent */
    int expiring, stopped;
    anon_gone_cb *gone_cb;
    void *gone_arg;
    uint64_t started, released, expired, not_found; /* since the last summary line */
};

static void read_end_now(struct anon *a, const char *id);

/* ---- hold and refresh ---------------------------------------------------------------------- */

static void on_held(void *arg, const char *err, long long started, const char *const *unknown,
                    size_t n)
{
    struct anon *a = arg;
    if (started > 0) {
        a->started += (uint64_t)started;
        watch_kick(a->c->watch); /* the holder subscribes it upstream */
    }
    for (size_t i = 0; i < n; i++) {
        read_end_now(a, unknown[i]); /* a read lease of an id the upstream does not know */
        if (idmap_get(a->held, unknown[i], NULL) && a->gone_cb != NULL)
            a->gone_cb(a->gone_arg, unknown[i]);
    }
}

/* Hold ids[0..n) (start: 0 the refresh, 1 a first hold that may start a watch polled at
 * once, else the same with its first poll at that wall ms). */
static void hold_ids(struct anon *a, const char *const *ids, size_t n, int64_t start)
{
    if (n == 0 || !store_ready(a->c->store))
        return; /* the next refresh holds them */
    struct watches_windows w;
    watch_windows(a->c, &w);
    struct watches_hold h = {.holder = a->c->instance_id,
                             .lease_ms = a->c->cfg->ws_anon_lease_ms,
                             .start = start};
    watches_hold(a->c->store, &w, &h, ids, n, on_held, a);
}

struct collect {
    const char **ids;
    size_t n;
};

static void collect_one(void *arg, const char *id, uint32_t *value)
{
    struct collect *cl = arg;
    cl->ids[cl->n++] = id; /* borrowed from the map: used before it changes */
}

static void round_end(struct anon *a)
{
    for (size_t i = 0; i < a->round_n; i++)
        free(a->round[i]);
    free(a->round);
    a->round = NULL;
    a->round_n = a->round_i = 0;
}

/* A new refresh round: every id held now (copied: the map changes between ticks; an id
 * released meanwhile is skipped when its turn comes). */
static void round_start(struct anon *a)
{
    round_end(a);
    size_t n = idmap_count(a->held);
    if (n == 0)
        return;
    struct collect cl = {xcalloc(n, sizeof(char *)), 0};
    idmap_each(a->held, collect_one, &cl);
    a->round = xcalloc(cl.n, sizeof(char *));
    for (size_t i = 0; i < cl.n; i++)
        a->round[i] = xstrdup(cl.ids[i]);
    a->round_n = cl.n;
    free(cl.ids);
}

/* This tick's share of the round: enough that the round ends within its period. */
static void round_step(struct anon *a)
{
    if (a->round_i >= a->round_n)
        return;
    int64_t period = a->c->cfg->ws_anon_lease_ms / 3, ticks = period / (2 * ANON_TICK_MS);
    size_t share = ticks > 1 ? (size_t)((int64_t)a->round_n / ticks) + 1 : a->round_n;
    if (share < ANON_BATCH)
        share = ANON_BATCH;
    size_t end = a->round_i + share < a->round_n ? a->round_i + share : a->round_n;
    const char *batch[ANON_BATCH];
    size_t nb = 0;
    for (; a->round_i < end; a->round_i++) {
        if (!idmap_get(a->held, a->round[a->round_i], NULL))
            continue; /* released since the round started */
        batch[nb++] = a->round[a->round_i];
        if (nb == ANON_BATCH) {
            hold_ids(a, batch, nb, 0);
            nb = 0;
        }
    }
    hold_ids(a, batch, nb, 0); /* nothing when nb is 0 */
    if (a->round_i >= a->round_n)
        round_end(a);
}

/* One more local holder of id; the first one holds it in Redis (start: see hold_part). */
static void hold_one(struct anon *a, const char *id, int64_t start)
{
    if (a->stopped)
        return;
    uint32_t n = 0;
    idmap_get(a->held, id, &n);
    idmap_put(a->held, id, n + 1);
    if (n == 0) {
        const char *ids[1] = {id};
        hold_ids(a, ids, 1, start);
    }
}

void anon_hold(struct anon *a, const char *id)
{
    hold_one(a, id, 1);
}

/* ---- status-read leases ------------------------------------------------------------------- */

static uint32_t read_end(const struct anon *a)
{
    return (uint32_t)((mono_ms() - a->t0 + a->c->cfg->ws_anon_lease_ms) / ANON_READ_UNIT_MS);
}

void anon_read(struct anon *a, const char *id)
{
    if (a->stopped)
        return;
    if (idmap_get(a->reads, id, NULL)) {
        idmap_put(a->reads, id, read_end(a)); /* renewed */
        return;
    }
    if (idmap_count(a->reads) >= ANON_READS_MAX)
        return;
    idmap_put(a->reads, id, read_end(a));
    hold_one(a, id, wall_ms() + a->c->cfg->poll_interval_ms);
}

/* The read lease of id ends now (expired, or the upstream does not know the id). */
static void read_end_now(struct anon *a, const char *id)
{
    if (idmap_del(a->reads, id))
        anon_release(a, id);
}

struct expired_reads {
    uint32_t now;
    char **ids;
    size_t n, cap;
};

static void collect_expired(void *arg, const char *id, uint32_t *value)
{
    struct expired_reads *e = arg;
    if (*value > e->now)
        return;
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 64;
        e->ids = xrealloc(e->ids, e->cap * sizeof(*e->ids));
    }
    e->ids[e->n++] = xstrdup(id); /* the map changes before they are used */
}

/* Release the holds of the reads whose lease passed. */
static void reads_expire(struct anon *a)
{
    if (idmap_count(a->reads) == 0)
        return;
    struct expired_reads e = {(uint32_t)((mono_ms() - a->t0) / ANON_READ_UNIT_MS), NULL, 0, 0};
    idmap_each(a->reads, collect_expired, &e);
    for (size_t i = 0; i < e.n; i++) {
        read_end_now(a, e.ids[i]);
        free(e.ids[i]);
    }
    free(e.ids);
}

static void on_released(void *arg, const char *err, long long ended)
{
    struct anon *a = arg;
    if (ended > 0) {
        a->released += (uint64_t)ended;
        watch_kick(a->c->watch); /* unsubscribed upstream through the sync */
    }
}

/* Release ids[0..n) held by this process. */
static void release_ids(struct anon *a, const char *const *ids, size_t n)
{
    if (n == 0 || !store_ready(a->c->store))
        return; /* the lease expires instead */
    watches_release(a->c->store, a->c->instance_id, ids, n, on_released, a);
}

void anon_release(struct anon *a, const char *id)
{
    uint32_t n = 0;
    if (!idmap_get(a->held, id, &n))
        return;
    if (n > 1) {
        idmap_put(a->held, id, n - 1);
        return;
    }
    idmap_del(a->held, id);
    const char *ids[1] = {id};
    release_ids(a, ids, 1);
}

void anon_shutdown(struct anon *a)
{
    if (a == NULL || a->stopped)
        return;
    a->stopped = 1;
    size_t n = idmap_count(a->held);
    if (n > 0) {
        struct collect cl = {xcalloc(n, sizeof(char *)), 0};
        idmap_each(a->held, collect_one, &cl);
        for (size_t i = 0; i < cl.n; i += ANON_BATCH)
            release_ids(a, cl.ids + i, cl.n - i < ANON_BATCH ? cl.n - i : ANON_BATCH);
        free(cl.ids);
    }
    idmap_free(a->held); /* later unsubscribes find nothing to release */
    a->held = idmap_new();
    idmap_free(a->reads); /* their holds went with held */
    a->reads = idmap_new();
}

int anon_watched(const struct anon *a, const char *id)
{
    return idmap_get(a->held, id, NULL) ||
           (a->c->upstream != NULL && upstream_tracked(a->c->upstream, id));
}

/* ---- 404 answers ---------------------------------------------------------------------------- */

struct miss_op {
    struct anon *a;
    char id[PROTO_MAX_ID + 1];
};

static void on_miss(void *arg, const char *err, long long ended)
{
    struct miss_op *op = arg;
    struct anon *a = op->a;
    if (ended == 1) {
        a->not_found++;
        log_debug("anonymous watch ended: the upstream does not know the id", "request=%s",
                  op->id);
        watch_kick(a->c->watch);
        read_end_now(a, op->id);
        if (a->gone_cb != NULL && idmap_get(a->held, op->id, NULL))
            a->gone_cb(a->gone_arg, op->id);
    }
    free(op);
}

void anon_upstream_404(struct anon *a, const char *id)
{
    if (a == NULL || !store_ready(a->c->store))
        return;
    struct miss_op *op = xcalloc(1, sizeof(*op));
    op->a = a;
    snprintf(op->id, sizeof(op->id), "%s", id);
    if (watches_miss(a->c->store, id, ANON_TRIES, ANON_NOT_FOUND_MS, ANON_NOT_FOUND_CAP, on_miss,
                     op) != 0)
        free(op);
}

/* ---- expiry and the timer ------------------------------------------------------------------ */

static void on_expired(void *arg, const char *err, long long ended)
{
    struct anon *a = arg;
    a->expiring = 0;
    if (ended > 0) {
        a->expired += (uint64_t)ended;
        watch_kick(a->c->watch);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct anon *a = arg;
    if (!store_ready(a->c->store) || a->c->shutting_down)
        return;
    int64_t now = mono_ms();
    if (now >= a->next_refresh) {
        a->next_refresh = now + a->c->cfg->ws_anon_lease_ms / 3;
        round_start(a);
    }
    round_step(a);
    if (now >= a->next_reads) {
        a->next_reads = now + ANON_EXPIRE_MS;
        reads_expire(a);
    }
    if (now >= a->next_expire && !a->expiring) {
        a->next_expire = now + ANON_EXPIRE_MS;
        if (watches_hold_expire(a->c->store, ANON_EXPIRE_BATCH, on_expired, a) == 0)
            a->expiring = 1;
    }
    if (now >= a->next_log) {
        a->next_log = now + ANON_LOG_MS;
        if (a->started + a->released + a->expired + a->not_found > 0)
            log_info("anonymous watches", "started=%llu released=%llu expired=%llu "
                     "not_found=%llu held_here=%zu",
                     (unsigned long long)a->started, (unsigned long long)a->released,
                     (unsigned long long)a->expired, (unsigned long long)a->not_found,
                     idmap_count(a->held));
        a->started = a->released = a->expired = a->not_found = 0;
    }
}

/* ---- addresses ------------------------------------------------------------------------------ */

void anon_addr_key(const char *peer, char *out, size_t n)
{
    struct proto_ip ip; /* the one key rule of every per-address limit (protocol/forwarded.h) */
    if (proto_ip_parse(peer, strlen(peer), &ip) == 0 && n >= PROTO_IP_KEY_MAX)
        proto_ip_key(&ip, out, n);
    else
        snprintf(out, n, "%s", peer);
}

int anon_addr_take(struct anon *a, const char *addr)
{
    uint32_t n = 0;
    idmap_get(a->addrs, addr, &n);
    if ((int64_t)n >= a->c->cfg->ws_anon_ids_per_address)
        return -1;
    idmap_put(a->addrs, addr, n + 1);
    return 0;
}

void anon_addr_put(struct anon *a, const char *addr)
{
    uint32_t n = 0;
    if (!idmap_get(a->addrs, addr, &n))
        return;
    if (n <= 1)
        idmap_del(a->addrs, addr);
    else
        idmap_put(a->addrs, addr, n - 1);
}

/* ---- life ----------------------------------------------------------------------------------- */

void anon_on_gone(struct anon *a, anon_gone_cb *cb, void *arg)
{
    a->gone_cb = cb;
    a->gone_arg = arg;
}

struct anon *anon_new(struct core *c)
{
    struct anon *a = xcalloc(1, sizeof(*a));
    a->c = c;
    a->held = idmap_new();
    a->addrs = idmap_new();
    a->reads = idmap_new();
    a->t0 = mono_ms();
    a->tick_ev = event_new(c->base, -1, EV_PERSIST, on_tick, a);
    return a;
}

void anon_start(struct anon *a)
{
    struct timeval tv = {0, ANON_TICK_MS * 1000};
    a->next_log = mono_ms() + ANON_LOG_MS;
    evtimer_add(a->tick_ev, &tv);
}

void anon_free(struct anon *a)
{
    if (a == NULL)
        return;
    event_free(a->tick_ev);
    round_end(a);
    idmap_free(a->held);
    idmap_free(a->addrs);
    idmap_free(a->reads);
    free(a);
}
