/* janitor.h - the periodic upkeep that keeps Redis bounded, and the write probe of readiness.
 *
 * Every process runs one (each step is idempotent and bounded, so several processes only
 * share the work). A sweep step (store/wh_gc.lua) deletes dead and skipped deliveries older
 * than the dead retention with their index entries, purges the deliveries of deleted
 * endpoints in batches, and trims events older than the event retention age from the event
 * stream; while a step finds a full batch the next follows at once, otherwise one runs every
 * JANITOR_TICK_MAX_MS at most (sooner for short retentions). The request retention sweep
 * (store/req_gc.lua) deletes the records of requests idle past the request retention whose
 * watch ended, partition by partition, at the same pace but on its own timer (scanning
 * {P}:ct; after the process starts it first walks an older version's {P}:all once per
 * partition). The probe writes one small key
 * ({P}:probe, PX) every JANITOR_PROBE_MS so a Redis that refuses writes is noticed even
 * without traffic (store_write_refused); a successful probe clears the refusal. The record
 * pass (store/rec.h) deflates the records of ended watches and serves the typed events that
 * wait for a deflated one, on its own timer.
 * runs on: core thread. */
#ifndef STORE_JANITOR_H
#define STORE_JANITOR_H

#include <stdint.h>

struct event_base;
struct store;
struct janitor;

#define JANITOR_TICK_MAX_MS 5000
#define JANITOR_PROBE_MS 1000
#define JANITOR_BATCH 500          /* records deleted per sweep step at most */
#define JANITOR_GONE_GRACE_MS 60000 /* a deleted endpoint is swept again this long */

struct janitor_opts {
    int64_t dead_retention_ms; /* dead and skipped deliveries are deleted after this (> 0) */
    int64_t event_age_ms;      /* events older are trimmed from the stream; 0: no age bound */
    int64_t request_retention_ms; /* requests idle this long lose their record (req_gc.lua);
                                   * 0: kept */
    int compress_records;      /* deflate the records of ended watches (store/rec.h) */
    long long stream_maxlen;   /* the event stream's MAXLEN (typed events the pass writes) */
};

/* Timers start at once; steps run only while the store is ready. */
struct janitor *janitor_new(struct event_base *base, struct store *s,
                            const struct janitor_opts *o);
/* NULL-safe. A step in flight completes into a detached request. */
void janitor_free(struct janitor *j);

#endif
