/* metrics.h - counters of the daemon, rendered as Prometheus text at GET /metrics.
 * Plain integers: every writer is the core thread; ws-thread counters live in their own
 * modules as atomics and are read at render time.
 * runs on: core thread. */
#ifndef RELAY_METRICS_H
#define RELAY_METRICS_H

#include "protocol/event.h"

#include <stdint.h>

enum metrics_outcome { MO_ACCEPTED = 0, MO_DUPLICATE, MO_STALE, MO_REJECTED, MO_COUNT };

/* delivery latency histogram bounds (ms); a last +Inf bucket is implied by the count */
#define METRICS_LAT_BUCKETS 11
extern const int64_t metrics_lat_bounds_ms[METRICS_LAT_BUCKETS];
/* statuses counted by the requests_by_status gauge */
#define METRICS_STATUSES 10
extern const char *const metrics_statuses[METRICS_STATUSES];
/* Record one delivered attempt's latency in the histogram. */
struct metrics;
void metrics_observe_delivery(struct metrics *m, int64_t latency_ms);

#define METRICS_HTTP_PATHS 3 /* status_v3, requests_v3, other */
#define METRICS_HTTP_CLASSES 6 /* 2xx 3xx 4xx 429 5xx error */
#define METRICS_API_CLASSES 5  /* REST answers: 1xx 2xx 3xx 4xx 5xx */

struct metrics {
    uint64_t events[PROTO_SRC_COUNT][MO_COUNT];
    uint64_t upstream_ws_reconnects;
    int upstream_ws_state;             /* 0 down, 1 connecting, 2 ready */
    uint64_t upstream_ws_lagging;      /* safety polls that found a change ws never sent */
    uint64_t upstream_http[METRICS_HTTP_PATHS][METRICS_HTTP_CLASSES];
    uint64_t budget_used;              /* calls this process spent */
    uint64_t budget_denied;            /* polls deferred because the budget was empty */
    uint64_t ingest_pending;           /* observations waiting for Redis */
    uint64_t ingest_dropped;           /* observations dropped (pending queue full) */
    uint64_t webhook_ingest[4];        /* ok, bad signature, stale, malformed */
    /* webhook deliveries (relay/fanout.c, relay/dispatch.c) */
    uint64_t wh_fanout_events;         /* events read from the stream by this process */
    uint64_t wh_deliveries_created;    /* deliveries created by fan-out */
    uint64_t wh_attempts;              /* HTTP attempts completed */
    uint64_t wh_delivered;             /* attempts answered 2xx */
    uint64_t wh_retries;               /* attempts scheduled for a retry */
    uint64_t wh_dead;                  /* deliveries dead-lettered */
    uint64_t wh_forbidden;             /* attempts refused by the SSRF guard */
    uint64_t wh_endpoints_disabled;    /* endpoints disabled (410, failing) */
    uint64_t wh_leases_reaped;         /* expired leases returned to the queue */
    uint64_t wh_latency_ms_sum;        /* sum of latencies of delivered attempts */
    uint64_t wh_latency_buckets[METRICS_LAT_BUCKETS]; /* delivered attempts, latency <= le */
    /* gauges refreshed from Redis every 2 s by core.c (-1 until the first read) */
    int64_t q_due, q_inflight, q_dead;  /* deliveries by queue */
    int64_t tracked_polled;             /* tracked, unfinished requests (the poll set) */
    int64_t requests_by_status[METRICS_STATUSES];
    uint64_t api_responses[METRICS_API_CLASSES]; /* REST answers by class: 1xx..5xx */
};

const char *metrics_outcome_name(enum metrics_outcome o);

struct core;
struct evbuffer;
/* Append every counter and gauge of c (struct metrics, store stats, upstream state) to out
 * as Prometheus text exposition format 0.0.4: HELP and TYPE lines, names prefixed
 * "statusrelay_", counters suffixed "_total". GET /metrics answers this. */
void metrics_render(struct core *c, struct evbuffer *out);

#endif
