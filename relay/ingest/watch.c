/* watch.c - see watch.h. runs on: core thread.
 *
 * Sync: this process remembers the last change version of the watched set it applied; each
 * tick asks store/watch_sync.lua for the changes after it (or the whole set, after a start,
 * a Redis reconnect, or when the unwatch log no longer reaches back that far) and tracks or
 * untracks the ids in the upstream module. Only the lease holder turns those into frames;
 * the others just keep the set, so a takeover starts from a complete copy. */
#include "relay/ingest/watch.h"
#include "relay/core.h"
#include "relay/common/log.h"
#include "relay/ingest/upstream.h"
#include "relay/common/util.h"
#include "store/keys.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_SYNC_MS 250
#define WATCH_SYNC_BATCH "5000"
#define WATCH_EXPIRE_MS 1000
#define WATCH_EXPIRE_BATCH "500"
#define WATCH_STATS_MS 5000
#define WATCH_STATS_CAP "10000"
#define MIGRATE_BATCH "1000"

/* One partition's sync state (docs/partitions.md: each partition has its own watch set and
 * version counter); the callback argument of its calls. */
struct wpart {
    struct watch *w;
    unsigned k;
    long long version; /* last change version applied; -1 = none (full sync next) */
    int syncing;
};

struct watch {
    struct core *c;
    struct event *tick_ev;
    struct store_script sync_sc, expire_sc, stats_sc, migrate_sc, fallback_sc;
    unsigned np;          /* partitions */
    struct wpart *parts;  /* np of them */
    int expiring, stats_busy, migrated, migrating; /* expiring, stats_busy: calls in flight */
    int expire_full;      /* an expiry batch came back full: expire again at once */
    /* start-up: settle the fallback watches an earlier version kept active, partition by
     * partition (store/watch_fallback.lua) */
    unsigned fb_part;     /* partition being walked; np = done */
    long long fb_cursor;
    int fb_busy;
    int64_t next_expire, next_stats; /* mono ms */
    /* the gauges being summed over the partitions' watch_stats.lua answers */
    int64_t acc_oldest, acc_stuck, acc_by_status[METRICS_STATUSES + 1];
};

void watch_args_get(const struct core *c, struct watch_args *out)
{
    snprintf(out->wttl, sizeof(out->wttl), "%lld", (long long)c->cfg->waiting_ttl_ms);
    snprintf(out->settled, sizeof(out->settled), "%lld", (long long)c->cfg->settled_watch_ms);
    snprintf(out->ftail, sizeof(out->ftail), "%lld", (long long)c->cfg->failure_tail_ms);
}

/* ---- sync -------------------------------------------------------------------------------- */

static void on_sync(void *arg, const char *err, redisReply *r)
{
    struct wpart *wp = arg;
    struct watch *w = wp->w;
    wp->syncing = 0;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER)
        return; /* try again next tick */
    struct upstream *u = w->c->upstream;
    int full = r->element[1]->integer == 1;
    if (full)
        upstream_sync_begin(u, wp->k, w->np);
    for (size_t i = 2; i + 1 < r->elements; i += 2) {
        const redisReply *id = r->element[i], *on = r->element[i + 1];
        if (id->type != REDIS_REPLY_STRING || on->type != REDIS_REPLY_INTEGER)
            continue;
        if (on->integer == 1)
            upstream_track(u, id->str);
        else
            upstream_untrack(u, id->str);
    }
    if (full) {
        upstream_sync_end(u);
        if (w->np <= 1)
            log_info("watched requests loaded", "count=%llu version=%lld",
                     (unsigned long long)upstream_subscriptions(u), r->element[0]->integer);
        else
            log_info("watched requests loaded", "count=%llu version=%lld partition=%u",
                     (unsigned long long)upstream_subscriptions(u), r->element[0]->integer,
                     wp->k);
    }
    long long prev = wp->version;
    wp->version = r->element[0]->integer;
    if (!full && wp->version > prev && r->elements > 2)
        watch_kick(w); /* a batch may have been cut: read on at once */
}

static void sync_part(struct wpart *wp)
{
    struct watch *w = wp->w;
    const char *tag = store_part_tag(w->c->store, wp->k);
    char k1[KEY_MAX], k2[KEY_MAX], k3[KEY_MAX], k4[KEY_MAX], ver[24];
    key_build(k1, sizeof(k1), tag, "watch", NULL, NULL);
    key_build(k2, sizeof(k2), tag, "unwatch", NULL, NULL);
    key_build(k3, sizeof(k3), tag, "wver", NULL, NULL);
    key_build(k4, sizeof(k4), tag, "wlow", NULL, NULL);
    snprintf(ver, sizeof(ver), "%lld", wp->version);
    const char *argv[] = {k1, k2, k3, k4, ver, WATCH_SYNC_BATCH};
    if (store_eval(w->c->store, &w->sync_sc, on_sync, wp, 4, 6, argv, NULL) == 0)
        wp->syncing = 1;
}

static void sync_now(struct watch *w)
{
    if (!store_ready(w->c->store) || w->c->upstream == NULL)
        return;
    for (unsigned k = 0; k < w->np; k++)
        if (!w->parts[k].syncing)
            sync_part(&w->parts[k]);
}

void watch_kick(struct watch *w)
{
    if (w != NULL)
        sync_now(w);
}

/* ---- expiry -------------------------------------------------------------------------------- */

static void on_expired(void *arg, const char *err, redisReply *r)
{
    struct watch *w = arg;
    w->expiring--; /* one call per partition */
    if (err == NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
        for (size_t i = 0; i < r->elements; i++)
            if (r->element[i]->type == REDIS_REPLY_STRING)
                log_info("watch ended", "request=%s", r->element[i]->str);
        w->expire_full = 1;
    }
    if (w->expiring == 0 && w->expire_full) {
        w->expire_full = 0;
        w->next_expire = 0; /* a full batch: there may be more */
        sync_now(w);
    }
}

static void expire_now(struct watch *w)
{
    char k[KEY_MAX], now[24];
    struct watch_args wa;
    watch_args_get(w->c, &wa);
    snprintf(now, sizeof(now), "%lld", (long long)wall_ms());
    for (unsigned p = 0; p < w->np; p++) {
        const char *tag = store_part_tag(w->c->store, p);
        key_build(k, sizeof(k), tag, "wend", NULL, NULL);
        const char *argv[] = {k, now, WATCH_EXPIRE_BATCH, tag, wa.wttl, wa.settled, wa.ftail};
        if (store_eval(w->c->store, &w->expire_sc, on_expired, w, 1, 7, argv, NULL) == 0)
            w->expiring++;
    }
}

/* ---- gauges -------------------------------------------------------------------------------- */

static int status_index(const char *st)
{
    for (int i = 0; i < METRICS_STATUSES; i++)
        if (strcmp(st, metrics_statuses[i]) == 0)
            return i;
    return METRICS_STATUSES;
}

/* One partition's answer, summed into acc_*; the gauges change once every partition
 * answered (a round with a failed answer keeps the previous gauges). */
static void on_stats(void *arg, const char *err, redisReply *r)
{
    struct watch *w = arg;
    w->stats_busy--;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        w->acc_stuck = -1; /* this round is incomplete */
    } else if (w->acc_stuck >= 0) {
        long long oldest = r->element[0]->integer;
        if (oldest >= 0 && (w->acc_oldest < 0 || oldest < w->acc_oldest))
            w->acc_oldest = oldest;
        w->acc_stuck += r->element[1]->integer;
        for (size_t i = 2; i + 1 < r->elements; i += 2)
            if (r->element[i]->type == REDIS_REPLY_STRING &&
                r->element[i + 1]->type == REDIS_REPLY_INTEGER)
                w->acc_by_status[status_index(r->element[i]->str)] +=
                    r->element[i + 1]->integer;
    }
    if (w->stats_busy > 0 || w->acc_stuck < 0)
        return;
    struct metrics *m = &w->c->metrics;
    m->oldest_unsettled_ms = w->acc_oldest;
    m->requests_stuck = w->acc_stuck;
    for (int i = 0; i <= METRICS_STATUSES; i++)
        m->stuck_by_status[i] = w->acc_by_status[i];
}

static void stats_now(struct watch *w)
{
    char k1[KEY_MAX], k2[KEY_MAX], cutoff[24];
    snprintf(cutoff, sizeof(cutoff), "%lld", (long long)(wall_ms() - w->c->cfg->stuck_after_ms));
    w->acc_oldest = -1;
    w->acc_stuck = 0;
    for (int i = 0; i <= METRICS_STATUSES; i++)
        w->acc_by_status[i] = 0;
    for (unsigned p = 0; p < w->np; p++) {
        const char *tag = store_part_tag(w->c->store, p);
        key_build(k1, sizeof(k1), tag, "act", NULL, NULL);
        key_build(k2, sizeof(k2), tag, "unset", NULL, NULL);
        const char *argv[] = {k1, k2, cutoff, tag, WATCH_STATS_CAP};
        if (store_eval(w->c->store, &w->stats_sc, on_stats, w, 2, 5, argv, NULL) == 0)
            w->stats_busy++;
        else
            w->acc_stuck = -1; /* not every partition asked: keep the gauges */
    }
}

/* ---- migration of requests tracked before watches existed ------------------------------------ */

static void migrate_step(struct watch *w, long long cursor);

static void on_migrated(void *arg, const char *err, redisReply *r)
{
    struct watch *w = arg;
    w->migrating = 0;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return; /* tried again on the next tick */
    if (r->element[1]->integer > 0)
        log_info("watches given to requests tracked by an earlier version", "count=%lld",
                 r->element[1]->integer);
    if (r->element[0]->integer == 0) {
        w->migrated = 1;
        sync_now(w);
    } else {
        migrate_step(w, r->element[0]->integer);
    }
}

static void migrate_step(struct watch *w, long long cursor)
{
    const char *tag = store_tag(w->c->store);
    char k[KEY_MAX], now[24], cur[24];
    struct watch_args wa;
    watch_args_get(w->c, &wa);
    key_build(k, sizeof(k), tag, "poll", NULL, NULL);
    snprintf(now, sizeof(now), "%lld", (long long)wall_ms());
    snprintf(cur, sizeof(cur), "%lld", cursor);
    const char *argv[] = {k, now, MIGRATE_BATCH, tag, wa.wttl, wa.settled, wa.ftail, cur};
    if (store_eval(w->c->store, &w->migrate_sc, on_migrated, w, 1, 8, argv, NULL) == 0)
        w->migrating = 1;
}

/* ---- fallback watches kept active by an earlier version ------------------------------------ */

static void fallback_step(struct watch *w);

static void on_fallback(void *arg, const char *err, redisReply *r)
{
    struct watch *w = arg;
    w->fb_busy = 0;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return; /* tried again on the next tick */
    if (r->element[1]->integer > 0)
        log_info("fallback watches settled (kept active by an earlier version)",
                 "count=%lld partition=%u", r->element[1]->integer, w->fb_part);
    w->fb_cursor = r->element[0]->integer;
    if (w->fb_cursor == 0)
        w->fb_part++;
    if (w->fb_part < w->np)
        fallback_step(w);
}

static void fallback_step(struct watch *w)
{
    const char *tag = store_part_tag(w->c->store, w->fb_part);
    char k[KEY_MAX], now[24], cur[24];
    struct watch_args wa;
    watch_args_get(w->c, &wa);
    key_build(k, sizeof(k), tag, "act", NULL, NULL);
    snprintf(now, sizeof(now), "%lld", (long long)wall_ms());
    snprintf(cur, sizeof(cur), "%lld", w->fb_cursor);
    const char *argv[] = {k, now, MIGRATE_BATCH, tag, wa.wttl, wa.settled, wa.ftail, cur};
    if (store_eval(w->c->store, &w->fallback_sc, on_fallback, w, 1, 8, argv, NULL) == 0)
        w->fb_busy = 1;
}

/* ---- timer --------------------------------------------------------------------------------- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct watch *w = arg;
    if (!store_ready(w->c->store) || w->c->shutting_down)
        return;
    if (!w->migrated && w->np > 1)
        w->migrated = 1; /* a version without watches had one partition: nothing to give */
    if (!w->migrated) {
        if (!w->migrating)
            migrate_step(w, 0);
        return;
    }
    if (w->fb_part < w->np && !w->fb_busy)
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
        for (unsigned k = 0; k < w->np; k++)
            w->parts[k].version = -1;
        w->next_stats = 0;
    }
}

struct watch *watch_new(struct core *c)
{
    struct watch *w = xcalloc(1, sizeof(*w));
    w->c = c;
    w->np = store_partitions(c->store);
    w->parts = xcalloc(w->np, sizeof(*w->parts));
    for (unsigned k = 0; k < w->np; k++)
        w->parts[k] = (struct wpart){.w = w, .k = k, .version = -1};
    store_script_init(&w->sync_sc, "watch_sync");
    store_script_init(&w->expire_sc, "watch_expire");
    store_script_init(&w->stats_sc, "watch_stats");
    store_script_init(&w->migrate_sc, "watch_migrate");
    store_script_init(&w->fallback_sc, "watch_fallback");
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
    free(w->parts);
    free(w);
}
