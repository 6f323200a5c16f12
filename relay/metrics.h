/* metrics.h - counters of the daemon, rendered as Prometheus text at GET /metrics.
 * Plain integers: every writer is the core thread; ws-thread counters live in their own
 * modules as atomics and are read at render time.
 * runs on: core thread. */
#ifndef RELAY_METRICS_H
#define RELAY_METRICS_H

#include "protocol/event.h"

#include <stdint.h>

enum metrics_outcome { MO_ACCEPTED = 0, MO_DUPLICATE, MO_STALE, MO_REJECTED, MO_COUNT };

#define METRICS_HTTP_PATHS 3 /* status_v3, requests_v3, other */
#define METRICS_HTTP_CLASSES 6 /* 2xx 3xx 4xx 429 5xx error */

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
};

const char *metrics_outcome_name(enum metrics_outcome o);

#endif
