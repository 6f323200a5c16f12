/* watch.c - see watch.h. runs on: core thread.
 *
 * Sync: the change feed of store/watches.h remembers the last change version of the watched
 * set this process applied (one per partition); each tick asks it for the changes after it
 * (or the whole set, after a start, a Redis reconnect, or when the unwatch log no longer
 * reaches back that far) and tracks or untracks the ids in the upstream module. Only the lease
 * holder turns those into frames; the others just keep the set, so a takeover starts from a
 * complete copy. Expiry, gauges and the start-up conversions are store/watches.h calls too:
 * the store sends one command per partition and answers once. */
#include "relay/ingest/watch.h"
#include "relay/core.h"
#include "relay/common/log.h"
#include "relay/ingest/upstream.h"
#include "relay/common/util.h"
#include "store/store.h"
#include "store/watches.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_SYNC_MS 250
#define WATCH_SYNC_BATCH 5000
#define WATCH_EXPIRE_MS 1000
#define WATCH_EXPIRE_BATCH 500
#define WATCH_STATS_MS 5000
#define WATCH_STATS_CAP 10000
#define MIGRATE_BATCH 1000

struct watch {
    struct core *c;
    struct event *tick_ev;
    struct watches_feed *feed; /* owned */
    int expiring, stats_busy, migrated, migrating; /* expiring, stats_busy: calls in flight */
    int sticking; /* a watch_stuck.lua call in flight */
    /* start-up: settle the fallback watches an earlier version kept active, partition by
     * partition (store/watch_fallback.lua) */
    struct watches_cursor fb_at;
    int fb_done, fb_busy;
    struct watches_cursor mig_at;
    int64_t next_expire, next_stats; /* mono ms */
};

void watch_windows(const struct core *c, struct watches_windows *out)
{
    out->waiting_ttl_ms = c->cfg->waiting_ttl_ms;
    out->settled_ms = c->cfg->settled_watch_ms;
    out->failure_tail_ms = c->cfg->failure_tail_ms;
    out->stream_maxlen = c->cfg->event_retention;
}

/* ---- sync -------------------------------------------------------------------------------- */

/* An upstream_scope_fn: is id in the part of the watched set batch b is about? */
static int batch_covers(const void *b, const char *id)
{
    return watches_batch_covers(b, id);
}

/* One partition's batch of changes (the feed's callback). */
static void on_sync(void *arg, const char *err, const struct watches_batch *b)
{
    struct watch *w = arg;
    if (err != NULL)
        return; /* try again next tick */
    struct upstream *u = w->c->upstream;
    if (b->full)
        upstream_sync_begin(u, batch_covers, b);
    for (size_t i = 0; i < b->n; i++) {
        if (b->v[i].watched)
            upstream_track(u, b->v[i].id);
        else
            upstream_untrack(u, b->v[i].id);
    }
    if (b->full) {
        upstream_sync_end(u);
        log_info("watched requests loaded", "count=%llu version=%lld partition=%u",
                 (unsigned long long)upstream_subscriptions(u), b->version, b->part);
    }
    if (b->more)
        watch_kick(w); /* a batch may have been cut: read on at once */
}

static void sync_now(struct watch *w)
{
    if (w->c->upstream != NULL)
        watches_feed_read(w->feed);
}

void watch_kick(struct watch *w)
{
    if (w != NULL)
        sync_now(w);
}

/* ---- expiry -------------------------------------------------------------------------------- */

static void on_expired(void *arg, const char *err, const char *const *ended, size_t n)
{
    struct watch *w = arg;
    w->expiring = 0;
    for (size_t i = 0; i < n; i++)
        log_info("watch ended", "request=%s", ended[i]);
    if (n > 0) {
        w->next_expire = 0; /* a full batch: there may be more */
        sync_now(w);
    }
}

static void on_stuck(void *arg, const char *err, long long n)
{
    struct watch *w = arg;
    w->sticking = 0;
    if (err == NULL && n > 0)
        log_info("requests became stuck", "count=%lld", n); /* each a request.stuck event */
    if (err == NULL && n >= WATCH_EXPIRE_BATCH)
        w->next_expire = 0; /* a full batch: there may be more */
}

static void expire_now(struct watch *w)
{
    struct watches_windows win;
    watch_windows(w->c, &win);
    if (watches_expire(w->c->store, &win, WATCH_EXPIRE_BATCH, on_expired, w) == 0)
        w->expiring = 1;
    /* request.stuck events: decided in Redis (store/watch_stuck.lua), once per episode */
    int64_t cutoff = wall_ms() - w->c->cfg->stuck_after_ms;
    if (!w->sticking &&
        watches_stuck(w->c->store, &win, cutoff, WATCH_EXPIRE_BATCH, on_stuck, w) == 0)
        w->sticking = 1;
}

/* ---- gauges -------------------------------------------------------------------------------- */

static int status_index(const char *st)
{
    for (int i = 0; i < METRICS_STATUSES; i++)
        if (strcmp(st, metrics_statuses[i]) == 0)
            return i;
    return METRICS_STATUSES;
}

/* Every partition's answer summed; a round with a failed answer keeps the previous gauges. */
static void on_stats(void *arg, const char *err, const struct watches_stats *r)
{
    struct watch *w = arg;
    w->stats_busy = 0;
    if (err != NULL)
        return;
    struct metrics *m = &w->c->metrics;
    m->oldest_unsettled_ms = r->oldest_ms;
    m->requests_stuck = r->stuck;
    for (int i = 0; i <= METRICS_STATUSES; i++)
        m->stuck_by_status[i] = 0;
    for (size_t i = 0; i < r->n; i++)
        m->stuck_by_status[status_index(r->by_status[i].status)] += r->by_status[i].n;
}

static void stats_now(struct watch *w)
{
    int64_t cutoff = wall_ms() - w->c->cfg->stuck_after_ms;
    if (watches_stats(w->c->store, cutoff, WATCH_STATS_CAP, on_stats, w) == 0)
        w->stats_busy = 1;
}

/* ---- migration of requests tracked before watches existed ------------------------------------ */

static void migrate_step(struct watch *w);

static void on_migrated(void *arg, const char *err, const struct watches_cursor *next, int done,
                        long long count)
{
    struct watch *w = arg;
    w->migrating = 0;
    if (err != NULL)
        return; /* tried again on the next tick */
    if (count > 0)
        log_info("watches given to requests tracked by an earlier version", "count=%lld", count);
    w->mig_at = *next;
    if (done) {
        w->migrated = 1;
        sync_now(w);
    } else {
        migrate_step(w);
    }
}

static void migrate_step(struct watch *w)
{
    struct watches_windows win;
    watch_windows(w->c, &win);
    if (watches_migrate(w->c->store, &win, &w->mig_at, MIGRATE_BATCH, on_migrated, w) == 0)
        w->migrating = 1;
}

/* ---- fallback watches kept active by an earlier version ------------------------------------ */

static void fallback_step(struct watch *w);

static void on_fallback(void *arg, const char *err, const struct watches_cursor *next, int done,
                        long long count)
{
    struct watch *w = arg;
    w->fb_busy = 0;
    if (err != NULL)
        return; /* tried again on the next tick */
    if (count > 0)
        log_info("fallback watches settled (kept active by an earlier version)",
                 "count=%lld partition=%u", count, w->fb_at.part);
    w->fb_at = *next;
    w->fb_done = done;
    if (!done)
        fallback_step(w);
}

static void fallback_step(struct watch *w)
{
    struct watches_windows win;
    watch_windows(w->c, &win);
    if (watches_fallback(w->c->store, &win, &w->fb_at, MIGRATE_BATCH, on_fallback, w) == 0)
        w->fb_busy = 1;
}

/* ---- timer --------------------------------------------------------------------------------- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct watch *w = arg;
    if (!store_ready(w->c->store) || w->c->shutting_down)
        return;
    if (!w->migrated && !watches_migrate_wanted(w->c->store))
        w->migrated = 1; /* nothing an earlier version could have left */
    if (!w->migrated) {
        if (!w->migrating)
            migrate_step(w);
        return;
    }
    if (!w->fb_done && !w->fb_busy)
        fallback_step(w);
    sync_now(w);
    int64_t now = mono_ms();
    if (!w->expiring && now >= w->next_expire) {
        w->next_expire = now + WATCH_EXPIRE_MS;
        expire_now(w);
    }
    if (!w->stats_busy && now >= w->next_stats) {
        w->next_stats = now + WATCH_STATS_MS;
        stats_now(w);
    }
}

/* After a reconnect the set may have changed in any way meanwhile: read it whole. */
static void on_store_state(void *arg, int up)
{
    struct watch *w = arg;
    if (up) {
        watches_feed_reset(w->feed);
        w->next_stats = 0;
    }
}

struct watch *watch_new(struct core *c)
{
    struct watch *w = xcalloc(1, sizeof(*w));
    w->c = c;
    w->feed = watches_feed_new(c->store, WATCH_SYNC_BATCH, on_sync, w);
    watches_feed_rec_pass(w->feed, c->cfg->compress_records);
    store_on_state(c->store, on_store_state, w);
    w->tick_ev = event_new(c->base, -1, EV_PERSIST, on_tick, w);
    return w;
}

void watch_start(struct watch *w)
{
    struct timeval tv = {0, WATCH_SYNC_MS * 1000};
    evtimer_add(w->tick_ev, &tv);
    on_tick(-1, 0, w);
}

void watch_free(struct watch *w)
{
    if (w == NULL)
        return;
    if (w->tick_ev)
        event_free(w->tick_ev);
    watches_feed_free(w->feed);
    free(w);
}
