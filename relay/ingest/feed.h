/* feed.h - the changes feed and backfill (DESIGN data flow source (c), "Discovery and
 * backfill"): with an API key and STATUSRELAY_DISCOVER, one process at a time (a lease in
 * Redis, taken over when the holder dies) reads GET /requests/v3 sorted by updatedAt from the
 * deployment's cursor in Redis, scoped to the key (apiKey=), following continuation, and
 * applies every item as an observation of its request (tracked if new). A sweep every
 * STATUSRELAY_DISCOVER_INTERVAL; after a restart, a takeover or an outage it resumes from the
 * cursor, at most STATUSRELAY_DISCOVER_LOOKBACK back; a first start reads that window. Every
 * page draws one call from the shared budget (poller_get).
 *
 * While the feed is healthy (a page read within 2 intervals without error, shared through
 * Redis; every process with an API key reads it, whether it reads the feed or not) the poll
 * claims pass over the requests the feed has returned (store/feed.h feed_mark): their changes
 * come through the feed. When it stops being healthy every tier is made due again.
 *
 * A backfill reads a window [since, until] of the feed again (same pages, same budget) in the
 * process that accepted it, its progress in Redis ({P}:bf:<id>, 24 h) so that any process
 * answers GET /v1/backfill/{id}.
 * runs on: core thread. */
#ifndef RELAY_INGEST_FEED_H
#define RELAY_INGEST_FEED_H

#include <stddef.h>
#include <stdint.h>

struct core;
struct feed;

struct feed *feed_new(struct core *c);
void feed_start(struct feed *f);
/* Give the lease up (graceful shutdown: another process takes over at once). */
void feed_shutdown(struct feed *f);
void feed_free(struct feed *f);

/* 1 while the feed is healthy (as this process last heard from Redis). NULL-safe: 0. */
int feed_healthy(const struct feed *f);

/* Start a backfill of [since_ms, until_ms] (until_ms < 0: up to now). id (at least
 * FEED_BACKFILL_ID_MAX bytes) gets its id. Returns 0, or -1 when there is no API key or the
 * store is not ready (nothing started). */
#define FEED_BACKFILL_ID_MAX 40
int feed_backfill_start(struct feed *f, int64_t since_ms, int64_t until_ms, char *id);

#endif
