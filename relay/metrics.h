/* metrics.h - counters of the daemon, written by every module; relay/api/metrics.c renders
 * them at GET /metrics (this file reads no module).
 * Plain integers: every writer is the core thread; ws-thread counters live in their own
 * modules as atomics and are read at render time.
 * runs on: core thread. */
#ifndef RELAY_METRICS_H
#define RELAY_METRICS_H

#include "protocol/event.h"

#include <stdint.h>

enum metrics_outcome { MO_ACCEPTED = 0, MO_DUPLICATE, MO_STALE, MO_REJECTED, MO_COUNT };
/* why an observation was rejected (statusrelay_events_rejected_total{source,reason}) */
enum metrics_reject { MR_MALFORMED = 0, MR_FUTURE, MR_COUNT };
extern const char *const metrics_reject_names[MR_COUNT];

/* delivery latency histogram bounds (ms); a last +Inf bucket is implied by the count */
#define METRICS_LAT_BUCKETS 11
extern const int64_t metrics_lat_bounds_ms[METRICS_LAT_BUCKETS];
/* statuses counted by the requests_by_status gauge */
#define METRICS_STATUSES 10
extern const char *const metrics_statuses[METRICS_STATUSES];
/* refundFailReason values counted by statusrelay_refund_failures_total (others: "other") */
#define METRICS_REFUND_REASONS 7
extern const char *const metrics_refund_reasons[METRICS_REFUND_REASONS];
/* Record one delivered attempt's latency in the histogram. */
struct metrics;
void metrics_observe_delivery(struct metrics *m, int64_t latency_ms);

#define METRICS_HTTP_PATHS 3 /* status_v3, requests_v3, other */
#define METRICS_HTTP_CLASSES 6 /* 2xx 3xx 4xx 429 5xx error */
#define METRICS_API_CLASSES 5  /* REST answers: 1xx 2xx 3xx 4xx 5xx */

struct metrics {
    uint64_t events[PROTO_SRC_COUNT][MO_COUNT];
    uint64_t events_rejected[PROTO_SRC_COUNT][MR_COUNT]; /* the rejected ones, by reason */
    uint64_t upstream_ws_reconnects;
    int upstream_ws_state;             /* 0 down, 1 connecting, 2 ready */
    uint64_t upstream_ws_lagging;      /* safety polls that found a change ws never sent */
    uint64_t upstream_http[METRICS_HTTP_PATHS][METRICS_HTTP_CLASSES];
    uint64_t budget_used;              /* calls this process spent */
    uint64_t budget_denied;            /* polls deferred because the budget was empty */
    uint64_t upstream_auth_failures;   /* keyed upstream calls answered 401/403 */
    uint64_t feed_pages;               /* changes feed pages read (sweeps and backfills) */
    uint64_t feed_items[3];            /* feed items: applied (an event), unchanged, skipped
                                        * (seen again in the overlap) */
    int feed_healthy, feed_held;       /* the changes feed as this process last heard */
    uint64_t ingest_pending;           /* observations waiting for Redis */
    uint64_t ingest_dropped;           /* observations dropped (pending queue full) */
    uint64_t webhook_ingest[4];        /* ok, bad signature, stale, malformed */
    /* webhook deliveries (relay/delivery/fanout.c, relay/delivery/dispatch.c) */
    uint64_t wh_fanout_events;         /* events read from the stream by this process */
    uint64_t wh_fanout_typed[PROTO_EV_COUNT]; /* of those, by type (protocol/event.h): the
                                                 relay's own types ([0] unused) */
    uint64_t wh_deliveries_created;    /* deliveries created by fan-out */
    uint64_t wh_attempts;              /* HTTP attempts completed */
    uint64_t wh_delivered;             /* attempts answered 2xx */
    uint64_t wh_retries;               /* attempts scheduled for a retry */
    uint64_t wh_dead;                  /* deliveries dead-lettered */
    uint64_t wh_forbidden;             /* attempts refused by the SSRF guard */
    uint64_t wh_endpoints_disabled;    /* endpoints disabled (410, failing) */
    uint64_t wh_leases_reaped;         /* expired leases returned to the queue */
    uint64_t wh_local_failures;        /* attempts that failed locally (EMFILE...): requeued */
    uint64_t wh_rate_limited;          /* rate-limit takes answered "full": due sends waited */
    uint64_t wh_latency_ms_sum;        /* sum of latencies of delivered attempts */
    uint64_t wh_latency_buckets[METRICS_LAT_BUCKETS]; /* delivered attempts, latency <= le */
    /* gauges refreshed from Redis every 2 s by core.c (-1 until the first read) */
    int64_t q_due, q_inflight, q_dead;  /* deliveries by queue */
    int64_t tracked_polled;             /* active watches on safety polls (the poll set) */
    int64_t requests_by_status[METRICS_STATUSES];
    uint64_t api_responses[METRICS_API_CLASSES]; /* REST answers by class: 1xx..5xx */
    uint64_t api_forwarded_malformed; /* requests of a trusted proxy with an unreadable
                                       * X-Forwarded-For/Forwarded (its own address used) */
    uint64_t api_reserve_busy;        /* heads on a reserve connection answered 503 */
    uint64_t dash_holds_expired;      /* dashboard subscribes that went ahead before the
                                       * follower caught up (relay/dash/follow.c "the hold") */
    /* watch gauges refreshed from Redis every 5 s by relay/ingest/watch.c (-1 until the first read) */
    int64_t poll_urgent, watch_settled;    /* poll tiers: urgent (+ tracked_polled = active
                                              watches), settled (settled watches) */
    int64_t watch_anon;                    /* the anonymous poll tier (anonymous watches) */
    int64_t requests_stuck;                /* active, not waiting, unchanged STUCK_AFTER */
    int64_t stuck_by_status[METRICS_STATUSES + 1]; /* + "other" (unknown statuses) */
    int64_t oldest_unsettled_ms;           /* first-seen ms of the oldest one, -1 = none */
    /* accepted events whose refundFailReason became set: user funds that need a human */
    uint64_t refund_failures[METRICS_REFUND_REASONS + 1]; /* + "other" */
};

/* Count an accepted event whose refundFailReason became reason. */
void metrics_refund_failure(struct metrics *m, const char *reason);

const char *metrics_outcome_name(enum metrics_outcome o);

#endif
