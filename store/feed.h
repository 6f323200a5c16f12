/* feed.h - the changes feed's shared state as typed C calls (store/feed_{lease,seen,commit,
 * mark}.lua and the backfill progress hashes): the lease (one reader per deployment), the
 * cursor (the newest updatedAt applied, ms), the seen set of the overlap, the health flag the
 * poll claims read, and the mark of requests the feed sees. Deployment keys ({P}:feedl, feedc,
 * feeds, feedok, bf:<id>) except the mark, which is on the request's own hash. This module is
 * the only C code that knows these keys, arguments and replies (relay/ingest/feed.c speaks
 * only these types).
 *
 * Every call with a callback returns 0 when the command went out (cb runs exactly once,
 * later) or -1 when the store is not ready (cb not called). err: NULL, store_err_* or
 * feed_err_reply. Results are borrowed for the callback only.
 * runs on: core thread only. */
#ifndef STORE_FEED_H
#define STORE_FEED_H

#include <stddef.h>
#include <stdint.h>

struct store;

extern const char feed_err_reply[];

/* held: holder holds the lease now; healthy: a page was read within the health window;
 * cursor_ms: -1 when no cursor yet. take = 0: only look (never takes the lease). */
typedef void feed_lease_cb(void *arg, const char *err, int held, int healthy, int64_t cursor_ms);
int feed_lease(struct store *s, const char *holder, int64_t lease_ms, int take, feed_lease_cb *cb,
               void *arg);
/* Give the lease up if holder holds it (shutdown). No answer. */
int feed_release(struct store *s, const char *holder);

/* An item of a page: its member in the seen set is "<id>:<updatedAt ms>". */
struct feed_item {
    const char *id;
    int64_t updated_ms;
};
/* seen[i] = 1 when items[i] was applied by an earlier page (NULL when err). */
typedef void feed_seen_cb(void *arg, const char *err, const unsigned char *seen, size_t n);
int feed_seen(struct store *s, const struct feed_item *items, size_t n, feed_seen_cb *cb,
              void *arg);
/* The end of a page: cursor to max(cursor, top_ms), items into the seen set (members older
 * than trim_ms leave it), healthy for health_ms; only while holder holds the lease (ok = 0:
 * not held, nothing written). */
typedef void feed_commit_cb(void *arg, const char *err, int ok);
struct feed_commit {
    const char *holder;
    int64_t top_ms, trim_ms, health_ms;
    const struct feed_item *items;
    size_t n;
};
int feed_commit(struct store *s, const struct feed_commit *q, feed_commit_cb *cb, void *arg);
/* Mark request id as one the feed sees (no answer); a watched one leaves its poll tier while
 * the feed is healthy (store/feed_mark.lua). */
int feed_mark(struct store *s, const char *id);
/* While the feed is not healthy ({P}:feedok absent), give the watched feed-covered requests
 * of up to max watch entries their poll tier back, due at due_active_ms (tier active_tier:
 * 'u' while the upstream websocket cannot confirm them, else 'a') or due_settled_ms (tier s)
 * (store/feed_restore.lua; no answer). One partition only: with several, feed-covered
 * requests keep their tiers. */
int feed_restore(struct store *s, int64_t now_ms, int max, int64_t due_active_ms,
                 int64_t due_settled_ms, char active_tier);

/* ---- backfill progress: {P}:bf:<id>, a hash kept ttl_ms after its last write -------------- */

struct feed_backfill {
    int64_t since_ms, until_ms; /* until: -1 = none (open end: now at the start) */
    int64_t created_ms;
    int64_t pages, items, applied;
    int done;
    const char *error; /* NULL or "" = none */
};
/* Write every field of b. No answer (cb may be NULL: 0 sent / -1 not ready). */
int feed_backfill_put(struct store *s, const char *id, const struct feed_backfill *b,
                      int64_t ttl_ms);
/* b is NULL when the backfill is unknown (or err). */
typedef void feed_backfill_cb(void *arg, const char *err, const struct feed_backfill *b);
int feed_backfill_get(struct store *s, const char *id, feed_backfill_cb *cb, void *arg);

#endif
