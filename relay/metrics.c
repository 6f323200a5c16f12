/* metrics.c - see metrics.h: the counters' label tables and the few counting helpers. The
 * page (GET /metrics) is rendered by relay/api/metrics.c, which reads every module.
 * runs on: core thread. */
#include "relay/metrics.h"

#include <string.h>

static const char *const outcome_names[MO_COUNT] = {"accepted", "duplicate", "stale", "rejected"};
const char *const metrics_reject_names[MR_COUNT] = {"malformed", "future_updated_at"};

const char *metrics_outcome_name(enum metrics_outcome o)
{
    return (unsigned)o < MO_COUNT ? outcome_names[o] : "unknown";
}

const int64_t metrics_lat_bounds_ms[METRICS_LAT_BUCKETS] = {5,   10,   25,   50,   100,  250,
                                                             500, 1000, 2500, 5000, 10000};
const char *const metrics_statuses[METRICS_STATUSES] = {
    "waiting", "depositing", "pending", "submitted", "success",
    "failure", "refund",     "delayed", "fallback",  "received"};

const char *const metrics_refund_reasons[METRICS_REFUND_REASONS] = {
    "AMOUNT_TOO_LOW_TO_REFUND", "MANUAL_REFUND_REQUIRED",      "NEGATIVE_NEW_AMOUNT_AFTER_FEES",
    "REFUND_RECIPIENT_IS_VASP", "REVERSE_SWAP_FAILED",         "SWAP_CURRENCY_NOT_ON_ORIGIN",
    "UNKNOWN"};

void metrics_refund_failure(struct metrics *m, const char *reason)
{
    int i = 0;
    while (i < METRICS_REFUND_REASONS && strcmp(reason, metrics_refund_reasons[i]) != 0)
        i++;
    m->refund_failures[i]++;
}

void metrics_observe_delivery(struct metrics *m, int64_t latency_ms)
{
    m->wh_latency_ms_sum += (uint64_t)latency_ms;
    for (int i = 0; i < METRICS_LAT_BUCKETS; i++)
        if (latency_ms <= metrics_lat_bounds_ms[i]) {
            m->wh_latency_buckets[i]++;
            break;
        }
}

