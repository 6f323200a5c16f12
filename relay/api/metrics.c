/* metrics.c (api) - GET /metrics: every counter and gauge of the daemon as Prometheus text
 * exposition (format 0.0.4). Each family is written once with its HELP and TYPE lines, then
 * one sample per label combination; label values are fixed names from the tables below (no
 * escaping needed). It sits above the modules it reads (struct metrics, store, upstream,
 * ws thread, webhooks), none of which knows it.
 * runs on: core thread (reads struct metrics, which only the core thread writes). */
#include "relay/api/metrics.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/delivery/delivery.h"
#include "relay/delivery/dispatch.h"
#include "relay/delivery/endpoints.h"
#include "relay/edge/ws_thread.h"
#include "relay/ingest/upstream.h"
#include "relay/metrics.h"
#include "store/store.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <string.h>

static const char *const http_paths[METRICS_HTTP_PATHS] = {"status_v3", "requests_v3", "other"};
static const char *const http_classes[METRICS_HTTP_CLASSES] = {"2xx", "3xx", "4xx",
                                                               "429", "5xx", "error"};
static const char *const api_classes[METRICS_API_CLASSES] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
static const char *const ingest_results[4] = {"ok", "bad_signature", "stale_signature",
                                              "malformed"};
static const char *const ws_states[] = {"down", "connecting", "ready", "standby"};

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

static void render_watch(const struct metrics *m, struct evbuffer *out)
{
    family(out, "watched_requests", "gauge",
           "Watched requests (all processes) by phase: active (subscribed, polled), settled "
           "(success/refund, still subscribed, polled slowly); anonymous (watched only while "
           "a dashboard subscription without the stream token follows it, any phase).");
    evbuffer_add_printf(out, "statusrelay_watched_requests{phase=\"active\"} %" PRId64 "\n",
                        m->tracked_polled < 0 || m->poll_urgent < 0
                            ? -1
                            : m->tracked_polled + m->poll_urgent);
    evbuffer_add_printf(out, "statusrelay_watched_requests{phase=\"settled\"} %" PRId64 "\n",
                        m->watch_settled);
    evbuffer_add_printf(out, "statusrelay_watched_requests{phase=\"anonymous\"} %" PRId64 "\n",
                        m->watch_anon);
    family(out, "requests_stuck", "gauge",
           "Active requests other than waiting whose status has not changed for "
           "STATUSRELAY_STUCK_AFTER, by status.");
    for (int i = 0; i <= METRICS_STATUSES; i++)
        evbuffer_add_printf(out, "statusrelay_requests_stuck{status=\"%s\"} %" PRId64 "\n",
                            i < METRICS_STATUSES ? metrics_statuses[i] : "other",
                            m->stuck_by_status[i]);
    int64_t age = m->oldest_unsettled_ms > 0 ? wall_ms() - m->oldest_unsettled_ms : 0;
    family(out, "oldest_unsettled_age_seconds", "gauge",
           "Age (since first seen) of the oldest active request other than waiting; 0 when "
           "there is none.");
    evbuffer_add_printf(out, "statusrelay_oldest_unsettled_age_seconds %.3f\n",
                        age > 0 ? (double)age / 1000.0 : 0.0);
    family(out, "refund_failures_total", "counter",
           "Accepted events whose refundFailReason became set (user funds that need a human), "
           "by reason.");
    for (int i = 0; i <= METRICS_REFUND_REASONS; i++)
        evbuffer_add_printf(out, "statusrelay_refund_failures_total{reason=\"%s\"} %" PRIu64 "\n",
                            i < METRICS_REFUND_REASONS ? metrics_refund_reasons[i] : "other",
                            m->refund_failures[i]);
}

static void render_webhooks(struct core *c, struct evbuffer *out)
{
    const struct metrics *m = &c->metrics;
    const struct {
        const char *name, *help;
        uint64_t v;
    } rows[] = {
        {"webhook_fanout_events_total", "events fanned out by this process", m->wh_fanout_events},
        {"webhook_deliveries_created_total", "webhook deliveries created",
         m->wh_deliveries_created},
        {"webhook_attempts_total", "webhook delivery attempts completed", m->wh_attempts},
        {"webhook_delivered_total", "webhook attempts answered 2xx", m->wh_delivered},
        {"webhook_retries_total", "webhook attempts scheduled for a retry", m->wh_retries},
        {"webhook_dead_total", "webhook deliveries dead-lettered", m->wh_dead},
        {"webhook_forbidden_total", "webhook attempts refused by the SSRF guard",
         m->wh_forbidden},
        {"webhook_endpoints_disabled_total", "webhook endpoints disabled (410 or failing)",
         m->wh_endpoints_disabled},
        {"webhook_leases_reaped_total", "expired delivery leases returned to the queue",
         m->wh_leases_reaped},
        {"webhook_local_failures_total",
         "attempts that could not start here (out of descriptors or memory): rescheduled, "
         "not counted as attempts",
         m->wh_local_failures},
        {"webhook_rate_limited_total",
         "times a rate-limited endpoint's due deliveries found its rateLimit used up and "
         "waited for it (grants asked for and refused)",
         m->wh_rate_limited},
    };
    for (size_t i = 0; i < ARRAY_LEN(rows); i++)
        evbuffer_add_printf(out, "# HELP statusrelay_%s %s\n# TYPE statusrelay_%s counter\n"
                                 "statusrelay_%s %llu\n",
                            rows[i].name, rows[i].help, rows[i].name, rows[i].name,
                            (unsigned long long)rows[i].v);
    family(out, "webhook_fanout_typed_events_total", "counter",
           "events of the relay's own types (request.watch.ended, request.stuck, "
           "endpoint.disabled) fanned out by this process, by type");
    for (int t = PROTO_EV_STATUS + 1; t < PROTO_EV_COUNT; t++)
        evbuffer_add_printf(out,
                            "statusrelay_webhook_fanout_typed_events_total{type=\"%s\"} %" PRIu64
                            "\n",
                            proto_event_type_name(t), m->wh_fanout_typed[t]);
    struct webhooks *w = c->webhooks;
    if (w) {
        size_t enabled = 0, n = webhooks_count(w);
        for (size_t i = 0; i < n; i++)
            enabled += webhooks_at(w, i)->enabled != 0;
        evbuffer_add_printf(out, "# HELP statusrelay_webhook_endpoints endpoints by state\n"
                                 "# TYPE statusrelay_webhook_endpoints gauge\n"
                                 "statusrelay_webhook_endpoints{state=\"enabled\"} %zu\n"
                                 "statusrelay_webhook_endpoints{state=\"disabled\"} %zu\n",
                            enabled, n - enabled);
        /* endpoint ids are [a-z0-9_]: safe as label values */
        size_t limited = 0;
        for (size_t i = 0; i < n; i++)
            limited += webhooks_at(w, i)->rate_limit > 0;
        if (limited > 0)
            family(out, "webhook_rate_limit_waiting", "gauge",
                   "Due deliveries of a rate-limited endpoint waiting for its rateLimit, as "
                   "this process's last claims saw them (every process sees the same queue).");
        for (size_t i = 0; i < n && limited > 0; i++) {
            const struct webhook *wh = webhooks_at(w, i);
            if (wh->rate_limit > 0)
                evbuffer_add_printf(out,
                                    "statusrelay_webhook_rate_limit_waiting{webhook=\"%s\"} "
                                    "%ld\n",
                                    wh->id, dispatch_rate_waiting(wh));
        }
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
    gauge(out, "tracked_requests_polled", "Active watches on safety polls (the active poll tier).",
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

static void render_events(const struct metrics *m, struct evbuffer *out)
{
    family(out, "events_total", "counter", "Upstream observations by source and apply outcome.");
    for (int s = 0; s < PROTO_SRC_COUNT; s++)
        for (int o = 0; o < MO_COUNT; o++)
            evbuffer_add_printf(
                out, "statusrelay_events_total{source=\"%s\",outcome=\"%s\"} %" PRIu64 "\n",
                proto_source_name((enum proto_source)s), metrics_outcome_name((enum metrics_outcome)o), m->events[s][o]);
    family(out, "events_rejected_total", "counter",
           "Rejected upstream observations by source and reason.");
    for (int s = 0; s < PROTO_SRC_COUNT; s++)
        for (int r = 0; r < MR_COUNT; r++)
            evbuffer_add_printf(
                out, "statusrelay_events_rejected_total{source=\"%s\",reason=\"%s\"} %" PRIu64 "\n",
                proto_source_name((enum proto_source)s), metrics_reject_names[r],
                m->events_rejected[s][r]);
}

static void render_upstream(struct core *c, struct evbuffer *out)
{
    const struct metrics *m = &c->metrics;
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
    counter(out, "upstream_auth_failures_total",
            "Upstream calls with the API key answered 401/403 (the key is refused).",
            m->upstream_auth_failures);
    counter(out, "feed_pages_total", "Changes feed pages read by this process (feed and backfill).",
            m->feed_pages);
    evbuffer_add_printf(out, "# HELP statusrelay_feed_items_total Changes feed items by outcome: "
                             "applied (an event), unchanged, skipped (seen again in the overlap).\n"
                             "# TYPE statusrelay_feed_items_total counter\n");
    static const char *const feed_outcomes[3] = {"applied", "unchanged", "skipped"};
    for (int i = 0; i < 3; i++)
        evbuffer_add_printf(out, "statusrelay_feed_items_total{outcome=\"%s\"} %" PRIu64 "\n",
                            feed_outcomes[i], m->feed_items[i]);
    gauge(out, "feed_healthy", "1 while the changes feed is healthy (a page within 2 intervals).",
          m->feed_healthy);
    gauge(out, "feed_lease_held", "1 while this process reads the changes feed.", m->feed_held);
    gauge(out, "upstream_budget_per_minute",
          "STATUSRELAY_UPSTREAM_BUDGET: upstream calls per minute shared by every process.",
          c->cfg->upstream_budget);
}

static void render_ingest_api(const struct metrics *m, struct evbuffer *out)
{
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
    counter(out, "http_forwarded_malformed_total",
            "REST requests from a trusted proxy whose X-Forwarded-For/Forwarded could not be "
            "read (the proxy's own address was used).",
            m->api_forwarded_malformed);
    counter(out, "http_reserve_busy_total",
            "REST requests on a connection of the reserve that were neither the upstream's "
            "webhook nor carried the admin token (answered 503 server_busy).",
            m->api_reserve_busy);
}

static void render_store(struct core *c, struct evbuffer *out)
{
    if (c->store == NULL)
        return;
    struct store_stats st;
    memset(&st, 0, sizeof(st));
    store_stats_get(c->store, &st);
    gauge(out, "redis_up", "1 when the Redis connection is ready.", store_ready(c->store));
    gauge(out, "redis_refusing_writes",
          "1 when Redis answers but refuses writes (OOM, READONLY, MISCONF; /readyz says why).",
          store_ready(c->store) && store_write_refused(c->store) != NULL);
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

static void render_dashboard(struct core *c, struct evbuffer *out)
{
    if (c->ws == NULL)
        return;
    struct ws_thread_stats wst;
    ws_thread_stats(c->ws, &wst);
    gauge(out, "dashboard_clients", "Open dashboard websocket connections.",
          (int64_t)wst.dash.sessions);
    counter(out, "dashboard_slow_closed_total", "Dashboard clients cut off for being slow.",
            wst.dash.slow_closed);
    gauge(out, "dashboard_queued_bytes", "Bytes waiting in dashboard send queues.",
          (int64_t)wst.dash.queued_bytes);
    counter(out, "dashboard_holds_expired_total",
            "Dashboard snapshots or resumes that proceeded before the follower caught up.",
            c->metrics.dash_holds_expired);
    counter(out, "upstream_ws_frames_total", "Frames received on the upstream websocket.",
            wst.up.frames_in);
}

void metrics_render(struct core *c, struct evbuffer *out)
{
    const struct metrics *m = &c->metrics;
    render_events(m, out);
    render_upstream(c, out);
    render_ingest_api(m, out);
    render_store(c, out);
    family(out, "start_time_seconds", "gauge", "Process start time (unix seconds).");
    evbuffer_add_printf(out, "statusrelay_start_time_seconds %.3f\n", (double)c->started_ms / 1000.0);
    gauge(out, "partitions", "Partitions of the deployment (STATUSRELAY_PARTITIONS).",
          (int64_t)store_partitions(c->store));
    gauge(out, "fanout_partitions_held", "Partitions whose webhook fan-out this process runs.",
          (int64_t)delivery_partitions_held(c));
    render_depths(m, out);
    render_watch(m, out);
    render_dashboard(c, out);
    gauge(out, "shutting_down", "1 while the process is shutting down.", c->shutting_down != 0);
    render_webhooks(c, out);
}
