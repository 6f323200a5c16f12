/* watches.h - the watch of requests as typed C calls: tracking (store/track.lua,
 * untrack.lua), the watched set's change feed, expiry, gauges and start-up conversions
 * (watch_{sync,expire,stats,migrate,fallback}.lua) and anonymous holds (anon_{hold,release,
 * expire,miss}.lua). This module is the only C code that knows their keys, argument order and
 * reply positions; relay/ingest/ (track.c, watch.c, anon.c) speaks only these types.
 *
 * Partitions (docs/partitions.md) are this module's business: a call about some ids sends one
 * command per partition holding some of them, a call about the whole watch one command per
 * partition, and the caller hears once, after the last answer (summed, or the first error).
 * One partition is the degenerate case: one command.
 *
 * Every call with a callback returns 0 when a command went out (cb runs exactly once, later)
 * or -1 when the store is not ready (cb not called). Callbacks get err: NULL,
 * store_err_disconnected, store_err_server or watches_err_reply (an answer of another shape);
 * with several partitions results are those of the partitions that answered. Results are
 * borrowed for the callback only. The clock (wall ms) is read here, at each command.
 * runs on: core thread only. */
#ifndef STORE_WATCHES_H
#define STORE_WATCHES_H

#include <stddef.h>
#include <stdint.h>

struct store;

/* An answer whose shape is not the script's. */
extern const char watches_err_reply[];

/* The windows every watch-moving script takes (store/watch_lib.lua), ms: waiting TTL
 * (STATUSRELAY_WAITING_TTL), settled watch, failure tail. stream_maxlen: the event stream's
 * MAXLEN (STATUSRELAY_EVENT_RETENTION) for the typed events the watch scripts write
 * (request.watch.ended, request.stuck: protocol/event.h); 0 counts as 100000. */
struct watches_windows {
    int64_t waiting_ttl_ms, settled_ms, failure_tail_ms;
    int64_t stream_maxlen;
};

/* ---- tracking ----------------------------------------------------------------------------- */

/* Track ids[0..n), n >= 1 (n = 0: -1) (track.lua; metadata: compact JSON object text or NULL, see
 * relay/ingest/track.h). created: how many were not tracked before, summed over the
 * partitions that answered (also when err is set: some may have been tracked). */
typedef void watches_track_cb(void *arg, const char *err, size_t created);
int watches_track(struct store *s, const struct watches_windows *w, const char *const *ids,
                  size_t n, const char *metadata, watches_track_cb *cb, void *arg);
/* Stop tracking id (untrack.lua): its watch ends (a request.watch.ended event "untracked"
 * when it was watched). found = 0 when the id is unknown (or the answer had another shape:
 * err stays NULL then, as the REST answer is a 404 either way). */
typedef void watches_untrack_cb(void *arg, const char *err, int found);
int watches_untrack(struct store *s, const struct watches_windows *w, const char *id,
                    watches_untrack_cb *cb, void *arg);

/* ---- the watched set's change feed (watch_sync.lua) ------------------------------------- */

/* Each partition has its own watched set and change version; the feed remembers, per
 * partition, the last version handed out (none at first: the first read is a full one). */
struct watches_feed;

struct watches_change {
    const char *id;
    int watched; /* 1 watched now, 0 no longer */
};
struct watches_batch {
    unsigned part, nparts; /* the partition read, of nparts (for logs: watches_batch_covers) */
    int full;              /* v is that partition's whole watched set (every watched = 1): its
                            * ids missing from v are no longer watched */
    long long version;     /* the partition's change version after this batch */
    int more;              /* the batch may have been cut: read again at once */
    const struct watches_change *v;
    size_t n;
};
/* 1 when id belongs to the part of the watched set b is about (its partition). */
int watches_batch_covers(const struct watches_batch *b, const char *id);
/* One partition's answer (err set: nothing to apply; the next read asks again). */
typedef void watches_feed_cb(void *arg, const char *err, const struct watches_batch *b);

/* A feed over every partition of s, at most max changes a batch; cb gets every answer. */
struct watches_feed *watches_feed_new(struct store *s, int max, watches_feed_cb *cb, void *arg);
/* on: this process deflates records (STATUSRELAY_COMPRESS_RECORDS, store/rec.h); its reads
 * then keep {P}:rzon alive, which makes every process's trim of {P}:unwatch (watch_sync.lua)
 * keep what the record pass has not read. Off at first. */
void watches_feed_rec_pass(struct watches_feed *f, int on);
/* NULL-safe. Answers still pending must not arrive after (free the store first). */
void watches_feed_free(struct watches_feed *f);
/* Every partition's next read is a full one (after a reconnect: anything may have changed). */
void watches_feed_reset(struct watches_feed *f);
/* Read every partition that has no read in flight (nothing when the store is not ready). */
void watches_feed_read(struct watches_feed *f);

/* ---- expiry and gauges -------------------------------------------------------------------- */

/* End the watches whose window passed, at most max per partition (watch_expire.lua), each
 * with its request.watch.ended event. ended: their ids (n > 0: there may be more). */
typedef void watches_expire_cb(void *arg, const char *err, const char *const *ended, size_t n);
int watches_expire(struct store *s, const struct watches_windows *w, int max,
                   watches_expire_cb *cb, void *arg);

struct watches_status_count {
    const char *status; /* a status name, or "other" beyond the cap */
    int64_t n;
};
struct watches_stats {
    int64_t oldest_ms; /* first seen (ms) of the oldest unsettled request, -1 none */
    int64_t stuck;     /* active (not waiting) requests unchanged since the cutoff */
    const struct watches_status_count *by_status; /* stuck ones by status, summed */
    size_t n;
};
/* The gauges of every partition summed (watch_stats.lua): stuck = last status change before
 * cutoff_ms; at most cap stuck ids of a partition are counted by status. res is NULL when err
 * is set (some partition did not answer: keep the previous gauges). */
typedef void watches_stats_cb(void *arg, const char *err, const struct watches_stats *res);
int watches_stats(struct store *s, int64_t cutoff_ms, int cap, watches_stats_cb *cb, void *arg);

/* Write a request.stuck event for each request that became stuck (last status change before
 * cutoff_ms, active, not waiting) and was not reported for that change yet, at most max per
 * partition (watch_stuck.lua). n: the events written, summed (n >= max: there may be more). */
typedef void watches_stuck_cb(void *arg, const char *err, long long n);
int watches_stuck(struct store *s, const struct watches_windows *w, int64_t cutoff_ms, int max,
                  watches_stuck_cb *cb, void *arg);

/* ---- start-up conversions ----------------------------------------------------------------- */

/* A walk over a set in batches. Start at {0, 0}. */
struct watches_cursor {
    unsigned part;
    long long pos;
};
/* One batch of a walk: next is where to go on; done = 1 when the walk is over. count: the
 * requests converted by this batch (part: the partition it walked). */
typedef void watches_step_cb(void *arg, const char *err, const struct watches_cursor *next,
                             int done, long long count);
/* 1 when requests tracked by a version without watches may exist (that version had one
 * partition: with several there is nothing to give). */
int watches_migrate_wanted(const struct store *s);
/* Give a watch to requests tracked by a version without watches (watch_migrate.lua), a batch
 * of at most max from `at`. */
int watches_migrate(struct store *s, const struct watches_windows *w,
                    const struct watches_cursor *at, int max, watches_step_cb *cb, void *arg);
/* Settle the fallback watches an earlier version kept active (watch_fallback.lua), partition
 * by partition: a batch of at most max from `at`. */
int watches_fallback(struct store *s, const struct watches_windows *w,
                     const struct watches_cursor *at, int max, watches_step_cb *cb, void *arg);

/* ---- anonymous holds (store/anon_lib.lua) ------------------------------------------------- */

struct watches_hold {
    const char *holder; /* this process (instance id) */
    int64_t lease_ms;   /* STATUSRELAY_WS_ANON_LEASE */
    int64_t start;      /* 0: the refresh (only holds); 1: a request nobody watches starts an
                         * anonymous watch, polled at once; a larger number: the same, its
                         * first poll due at that wall ms */
};
/* Hold ids[0..n) (anon_hold.lua). started: anonymous watches started; unknown: ids the
 * upstream does not know (the negative cache), not held. */
typedef void watches_hold_cb(void *arg, const char *err, long long started,
                             const char *const *unknown, size_t n);
int watches_hold(struct store *s, const struct watches_windows *w, const struct watches_hold *h,
                 const char *const *ids, size_t n, watches_hold_cb *cb, void *arg);
/* ended: the anonymous watches that ended (release, expiry) or 1/0 (miss). */
typedef void watches_count_cb(void *arg, const char *err, long long ended);
/* The last local subscriber of ids[0..n) left: drop holder's holds (anon_release.lua). */
int watches_release(struct store *s, const char *holder, const char *const *ids, size_t n,
                    watches_count_cb *cb, void *arg);
/* Drop holders whose lease passed, at most max per partition (anon_expire.lua). */
int watches_hold_expire(struct store *s, int max, watches_count_cb *cb, void *arg);
/* The upstream answered 404 to a poll of id (anon_miss.lua): after tries of them an anonymous
 * watch ends (ended = 1) and id stays unknown for ttl_ms (at most cap ids). */
int watches_miss(struct store *s, const char *id, int tries, int64_t ttl_ms, int64_t cap,
                 watches_count_cb *cb, void *arg);

#endif
