/* metrics.c - see metrics.h. Prometheus text exposition (format 0.0.4) of the daemon's counters.
 * Each family is written once with its HELP and TYPE lines, then one sample per label
 * combination; label values are fixed names from the tables below (no escaping needed).
 * runs on: core thread (reads struct metrics, which only the core thread writes). */
#include "relay/metrics.h"
#include "relay/webhooks.h"
#include "relay/core.h"
#include "relay/ws_thread.h"
#include "relay/upstream.h"
#include "store/store.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <string.h>

static const char *const outcome_names[MO_COUNT] = {"accepted", "duplicate", "stale", "rejected"};
static const char *const http_paths[METRICS_HTTP_PATHS] = {"status_v3", "requests_v3", "other"};
static const char *const http_classes[METRICS_HTTP_CLASSES] = {"2xx", "3xx", "4xx",
                                                               "429", "5xx", "error"};
static const char *const api_classes[METRICS_API_CLASSES] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
static const char *const ingest_results[4] = {"ok", "bad_signature", "stale_signature",
                                              "malformed"};
static const char *const ws_states[] = {"down", "connecting", "ready", "standby"};

const char *metrics_outcome_name(enum metrics_outcome o)
{
    return (unsigned)o < MO_COUNT ? outcome_names[o] : "unknown";
}

static void family(struct evbuffer *out, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(out, "# HELP statusrelay_%s %s\n# TYPE statusrelay_%s %s\n", name, help,
                        name, type);
}

static void sample(struct evbuffer *out, const char *name, uint64_t v)
{
    evbuffer_add_printf(out, "statusrelay_%s %" PRIu64 "\n", name, v);
}

static void sample_i(struct evbuffer *out, const char *name, int64_t v)
{
    evbuffer_add_printf(out, "statusrelay_%s %" PRId64 "\n", name, v);
}

static void counter(struct evbuffer *out, const char *name, const char *help, uint64_t v)
{
    family(out, name, "counter", help);
    sample(out, name, v);
}

static void gauge(struct evbuffer *out, const char *name, const char *help, int64_t v)
{
    family(out, name, "gauge", help);
    sample_i(out, name, v);
}

const int64_t metrics_lat_bounds_ms[METRICS_LAT_BUCKETS] = {5,   10,   25,   50,   100,  250,
                                                             500, 1000, 2500, 5000, 10000};
const char *const metrics_statuses[METRICS_STATUSES] = {
    "waiting", "depositing", "pending", "submitted", "success",
    "failure", "refund",     "delayed", "fallback",  "received"};

void metrics_observe_delivery(struct metrics *m, int64_t latency_ms)
{
    m->wh_latency_ms_sum += (uint64_t)latency_ms;
    for (int i = 0; i < METRICS_LAT_BUCKETS; i++)
        if (latency_ms <= metrics_lat_bounds_ms[i]) {
            m->wh_latency_buckets[i]++;
            break;
        }
}

static void render_depths(const struct metrics *m, struct evbuffer *out)
{
    family(out, "webhook_queue_depth", "gauge",
           "Webhook queues (all processes): due = endpoints with queued deliveries, "
           "inflight = deliveries leased, dead = dead deliveries.");
    const char *q[] = {"due", "inflight", "dead"};
    int64_t v[] = {m->q_due, m->q_inflight, m->q_dead};
    for (int i = 0; i < 3; i++)
        evbuffer_add_printf(out, "statusrelay_webhook_queue_depth{queue=\"%s\"} %" PRId64 "\n",
                            q[i], v[i]);
    gauge(out, "tracked_requests_polled", "Tracked requests not final yet (the poll set).",
          m->tracked_polled);
    family(out, "requests_by_status", "gauge", "Known requests by current status.");
    for (int i = 0; i < METRICS_STATUSES; i++)
        evbuffer_add_printf(out, "statusrelay_requests_by_status{status=\"%s\"} %" PRId64 "\n",
                            metrics_statuses[i], m->requests_by_status[i]);
    family(out, "webhook_delivery_latency_seconds", "histogram",
           "Latency of delivered webhook attempts.");
    uint64_t cum = 0;
    for (int i = 0; i < METRICS_LAT_BUCKETS; i++) {
        cum += m->wh_latency_buckets[i];
        evbuffer_add_printf(out,
                            "statusrelay_webhook_delivery_latency_seconds_bucket{le=\"%g\"} %" PRIu64
                            "\n",
                            (double)metrics_lat_bounds_ms[i] / 1000.0, cum);
    }
    evbuffer_add_printf(out,
                        "statusrelay_webhook_delivery_latency_seconds_bucket{le=\"+Inf\"} %" PRIu64
                        "\nstatusrelay_webhook_delivery_latency_seconds_sum %.3f\n"
                        "statusrelay_webhook_delivery_latency_seconds_count %" PRIu64 "\n",
                        m->wh_delivered, (double)m->wh_latency_ms_sum / 1000.0, m->wh_delivered);
}

void metrics_render(struct core *c, struct evbuffer *out)
{
    const struct metrics *m = &c->metrics;

    family(out, "events_total", "counter", "Upstream observations by source and apply outcome.");
    for (int s = 0; s < PROTO_SRC_COUNT; s++)
        for (int o = 0; o < MO_COUNT; o++)
            evbuffer_add_printf(
                out, "statusrelay_events_total{source=\"%s\",outcome=\"%s\"} %" PRIu64 "\n",
                proto_source_name((enum proto_source)s), outcome_names[o], m->events[s][o]);

    counter(out, "upstream_ws_reconnects_total", "Upstream websocket reconnects.",
            m->upstream_ws_reconnects);
    const char *ws = c->upstream ? upstream_state_name(c->upstream) : "down";
    family(out, "upstream_ws_state", "gauge",
           "Upstream websocket state: 1 for the current state, 0 for the others.");
    for (size_t i = 0; i < sizeof(ws_states) / sizeof(ws_states[0]); i++)
        evbuffer_add_printf(out, "statusrelay_upstream_ws_state{state=\"%s\"} %d\n", ws_states[i],
                            strcmp(ws, ws_states[i]) == 0);
    gauge(out, "upstream_ws_subscriptions", "Request ids subscribed on the upstream websocket.",
          c->upstream ? (int64_t)upstream_subscriptions(c->upstream) : 0);
    counter(out, "upstream_ws_lagging_total",
            "Safety polls that found a change the upstream websocket never reported.",
            m->upstream_ws_lagging);

    family(out, "upstream_http_total", "counter",
           "Upstream HTTP calls by endpoint and result class.");
    for (int p = 0; p < METRICS_HTTP_PATHS; p++)
        for (int k = 0; k < METRICS_HTTP_CLASSES; k++)
            evbuffer_add_printf(
                out, "statusrelay_upstream_http_total{path=\"%s\",class=\"%s\"} %" PRIu64 "\n",
                http_paths[p], http_classes[k], m->upstream_http[p][k]);
    counter(out, "upstream_budget_used_total", "Upstream calls this process drew from the budget.",
            m->budget_used);
    counter(out, "upstream_budget_denied_total",
            "Upstream calls deferred because the shared budget was spent.", m->budget_denied);

    gauge(out, "ingest_pending", "Observations waiting for Redis.", (int64_t)m->ingest_pending);
    counter(out, "ingest_dropped_total", "Observations dropped because the pending queue was full.",
            m->ingest_dropped);

    family(out, "webhook_ingest_total", "counter",
           "Upstream webhook deliveries received at POST /v1/ingest/upstream, by "
           "result.");
    for (int i = 0; i < 4; i++)
        evbuffer_add_printf(out, "statusrelay_webhook_ingest_total{result=\"%s\"} %" PRIu64 "\n",
                            ingest_results[i], m->webhook_ingest[i]);

    family(out, "http_responses_total", "counter", "REST API answers by status class.");
    for (int i = 0; i < METRICS_API_CLASSES; i++)
        evbuffer_add_printf(out, "statusrelay_http_responses_total{class=\"%s\"} %" PRIu64 "\n",
                            api_classes[i], m->api_responses[i]);

    if (c->store != NULL) {
        struct store_stats st;
        memset(&st, 0, sizeof(st));
        store_stats_get(c->store, &st);
        gauge(out, "redis_up", "1 when the Redis connection is ready.", store_ready(c->store));
        counter(out, "redis_commands_total", "Redis commands sent.", st.commands);
        counter(out, "redis_errors_total", "Redis error replies and failed commands.", st.errors);
        counter(out, "redis_reconnects_total", "Redis reconnects.", st.reconnects);
        counter(out, "redis_timeouts_total", "Redis commands that timed out.", st.timeouts);
        gauge(out, "redis_pending_commands", "Redis commands waiting for an answer.", st.pending);
        family(out, "redis_command_latency_seconds", "summary", "Redis command latency.");
        evbuffer_add_printf(out, "statusrelay_redis_command_latency_seconds_sum %.3f\n",
                            (double)st.latency_ms_sum / 1000.0);
        sample(out, "redis_command_latency_seconds_count", st.latency_n);
    }
    family(out, "start_time_seconds", "gauge", "Process start time (unix seconds).");
    evbuffer_add_printf(out, "statusrelay_start_time_seconds %.3f\n", (double)c->started_ms / 1000.0);
    render_depths(m, out);
    if (c->ws != NULL) {
        struct ws_thread_stats wst;
        ws_thread_stats(c->ws, &wst);
        gauge(out, "dashboard_clients", "Open dashboard websocket connections.",
              (int64_t)wst.dash.sessions);
        counter(out, "dashboard_slow_closed_total", "Dashboard clients cut off for being slow.",
                wst.dash.slow_closed);
        counter(out, "upstream_ws_frames_total", "Frames received on the upstream websocket.",
                wst.up.frames_in);
    }

    gauge(out, "shutting_down", "1 while the process is shutting down.", c->shutting_down != 0);
    if (c->webhooks != NULL)
        webhooks_metrics_render(c, out);
}
