/* config.c - the settings table and cross-field validation. runs on: main thread. */
#include "relay/config.h"
#include "protocol/addr.h"
#include "protocol/forwarded.h"
#include "relay/common/cors.h"
#include "relay/common/util.h"
#include "store/cluster_slot.h"
#include "store/keys.h"
#include "store/redis_url.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define F(x) offsetof(struct config, x)

const struct setting config_settings[] = {
    {"upstream-api-url", SET_STR, F(upstream_api_url), "https://api.relay.link", 0, 0,
     "upstream REST base URL (testnet: https://api.testnets.relay.link)"},
    {"upstream-ws-url", SET_STR, F(upstream_ws_url), "wss://ws.relay.link", 0, 0,
     "upstream websocket URL (testnet: wss://ws.testnets.relay.link)"},
    {"upstream-api-key", SET_STR, F(upstream_api_key), NULL, 1, 0,
     "upstream API key: raises limits, enables /requests/v3 and verifies upstream webhooks"},
    {"upstream-budget", SET_INT, F(upstream_budget), "200", 0, 1,
     "upstream HTTP calls per minute, shared by every poll and backfill of every process"},
    {"poll-interval", SET_DURATION, F(poll_interval_ms), "1s", 0, 100,
     "poll period per request while the upstream websocket is down or unconfirmed"},
    {"poll-safety-interval", SET_DURATION, F(poll_safety_interval_ms), "30s", 0, 1000,
     "poll period per request while the upstream websocket is healthy"},
    {"failure-tail", SET_DURATION, F(failure_tail_ms), "7d", 0, 1000,
     "keep watching a request this long after `failure` (a refund may follow, even hours later)"},
    {"settled-watch", SET_DURATION, F(settled_watch_ms), "24h", 0, 1000,
     "keep watching a request this long after `success`/`refund` (the upstream may reverse it)"},
    {"settled-poll-interval", SET_DURATION, F(settled_poll_interval_ms), "10m", 0, 1000,
     "poll period of a settled request (lowest priority in the budget)"},
    {"waiting-ttl", SET_DURATION, F(waiting_ttl_ms), "24h", 0, 1000,
     "a request still `waiting` (never deposited) this long stops being watched"},
    {"stuck-after", SET_DURATION, F(stuck_after_ms), "30m", 0, 1000,
     "an active request other than `waiting` unchanged this long is listed as stuck"},
    {"upstream-ping-interval", SET_DURATION, F(upstream_ping_interval_ms), "15s", 0, 1000,
     "websocket ping period towards the upstream (unset with the timeout given: min(15s, "
     "timeout/2))"},
    {"upstream-ping-timeout", SET_DURATION, F(upstream_ping_timeout_ms), "30s", 0, 1000,
     "no pong or frame for this long: reconnect (exceeds the interval; unset: max(30s, "
     "2 x interval))"},
    {"ingest-tolerance", SET_DURATION, F(ingest_tolerance_ms), "5m", 0, 1000,
     "freshness window for X-Signature-Timestamp of upstream webhooks"},
    {"max-clock-skew", SET_DURATION, F(max_clock_skew_ms), "1d", 0, 1000,
     "an observation whose updatedAt is more than this ahead of this relay's clock is refused "
     "(counted in statusrelay_events_rejected_total{reason=\"future_updated_at\"})"},
    {"discover", SET_BOOL, F(discover), "false", 0, 0,
     "read the changes feed (/requests/v3 of the API key from a cursor in Redis, one process at "
     "a time): track every request of the key; while it is healthy their status polls are "
     "skipped"},
    {"discover-interval", SET_DURATION, F(discover_interval_ms), "10s", 0, 1000,
     "period of the changes feed (one page when fewer than 50 requests changed)"},
    {"discover-lookback", SET_DURATION, F(discover_lookback_ms), "24h", 0, 1000,
     "how far back the changes feed reads at most: after a restart, a takeover or an outage "
     "it resumes from its cursor in Redis, but never from further back than this; a first start "
     "(no cursor) reads this whole window"},
    {"passthrough", SET_BOOL, F(passthrough), "false", 0, 0,
     "forward every path the REST API does not serve to the upstream REST URL, verbatim, with "
     "the client's own headers (one base URL for upstream clients; no admin token there)"},
    {"chains-refresh", SET_DURATION, F(chains_refresh_ms), "10m", 0, 1000,
     "period of the upstream chain list refresh (GET /chains, one process at a time)"},
    {"redis-url", SET_STR, F(redis_url), "redis://127.0.0.1:6379/0", 0, 0,
     "redis://[[user]:password@]host:port/db, unix:///path/to.sock or "
     "redis-cluster://[[user]:password@]host:port[,host:port...] (rediss:// is refused: "
     "no TLS in this hiredis)"},
    {"redis-prefix", SET_STR, F(redis_prefix), "statusrelay", 0, 0,
     "key prefix; keys are {prefix}:... (one hash tag per deployment)"},
    {"partitions", SET_INT, F(partitions), "1", 0, 1,
     "request partitions, each its own hash tag {prefix:p<k>.<x>} (1..64; fixed for a "
     "deployment: refused at start-up when it differs from the count its Redis recorded)"},
    {"event-retention", SET_INT, F(event_retention), "1000000", 0, 1000,
     "events kept in the event stream (approximate count)"},
    {"event-retention-age", SET_DURATION, F(event_retention_age_ms), "7d", 0, 1000,
     "events older than this are trimmed from the event stream (swept every few seconds)"},
    {"dead-retention", SET_DURATION, F(dead_retention_ms), "30d", 0, 1000,
     "dead and skipped deliveries stay listed and replayable this long, then are deleted"},
    {"request-retention", SET_DURATION, F(request_retention_ms), "90d", 0, 1000,
     "a request whose watch has ended and that has had no event this long is forgotten: its "
     "state and timeline are deleted (seen again, it starts anew with new event ids)"},
    {"compress-records", SET_BOOL, F(compress_records), "true", 0, 0,
     "store the request hash of an ended watch compact: its record deflated, values over 64 B "
     "in chunks (~1.5 KB less Redis memory each); false while processes of an older version run"},
    {"http-listen", SET_HOSTPORT, F(http_listen), "127.0.0.1:8080", 0, 0,
     "REST API, metrics and health"},
    {"http-request-timeout", SET_DURATION, F(http_request_timeout_ms), "30s", 0, 100,
     "REST port: a request must arrive whole (headers and body) within this long of its first "
     "byte, and an idle keep-alive connection is closed after it"},
    {"ws-listen", SET_HOSTPORT, F(ws_listen), "127.0.0.1:8081", 0, 0,
     "dashboard websocket and live page"},
    {"http-max-connections", SET_INT, F(http_max_connections), "0", 0, 0,
     "open REST connections at most; beyond, accepting pauses until one closes (0: derived "
     "from the descriptor limit, see docs/configuration.md)"},
    {"ws-max-connections", SET_INT, F(ws_max_connections), "0", 0, 0,
     "open dashboard-port connections at most; beyond, accepting pauses until one closes "
     "(0: derived from the descriptor limit, see docs/configuration.md)"},
    {"http-max-connections-per-address", SET_INT, F(http_max_connections_per_address), "128",
     0, 0,
     "open REST connections from one client address (IPv6: its /64) at most; more are closed "
     "at accept (trusted proxies are exempt; their forwarded clients count instead; 0: none)"},
    {"ws-max-connections-per-address", SET_INT, F(ws_max_connections_per_address), "256", 0, 0,
     "open dashboard-port connections from one client address (IPv6: its /64) at most; more "
     "are closed at accept (trusted proxies are exempt; their forwarded clients count "
     "instead; 0: none)"},
    {"http-keepalive-requests", SET_INT, F(http_keepalive_requests), "1000", 0, 1,
     "requests served on one REST keep-alive connection; the last answer says "
     "Connection: close"},
    {"trusted-proxies", SET_STR, F(trusted_proxies), NULL, 0, 0,
     "reverse proxies (comma-separated addresses or CIDRs, IPv4 and IPv6) whose "
     "X-Forwarded-For / Forwarded name the client address; unset: none (the headers are "
     "ignored)"},
    {"admin-token", SET_STR, F(admin_token), NULL, 1, 0,
     "bearer token for the REST API; required when listening beyond loopback"},
    {"read-token", SET_STR, F(read_token), NULL, 1, 0,
     "second bearer token that may only read: GET/HEAD on every /v1 path and /metrics (no "
     "secrets; anything else 403 read_only_token); needs STATUSRELAY_ADMIN_TOKEN"},
    {"stream-token", SET_STR, F(stream_token), NULL, 1, 0,
     "token for dashboard subscriptions broader than one request id"},
    {"status-require-token", SET_BOOL, F(status_require_token), "false", 0, 0,
     "GET /intents/status/v3 and /intents/status need the admin token too (default: public)"},
    {"cors-origins", SET_STR, F(cors_origins), "*", 0, 0,
     "origins allowed cross-origin on /intents/status(/v3) and the dashboard port: `*` or a "
     "comma-separated list of scheme://host[:port]; empty: none"},
    {"admin-cors-origins", SET_STR, F(admin_cors_origins), NULL, 0, 0,
     "origins allowed cross-origin on every other REST path (/v1, /metrics); unset: none"},
    {"allowed-hosts", SET_STR, F(allowed_hosts), NULL, 0, 0,
     "Host names answered besides loopback ones (comma-separated, e.g. a reverse proxy's "
     "name): REST without an admin token, the dashboard port without a stream token; unset: "
     "loopback only"},
    {"anon-miss-rate", SET_INT, F(anon_miss_rate), "10", 0, 0,
     "status reads of ids and search terms not known here, per minute per client address, for "
     "callers without the admin token and anonymous dashboard finds (0: none)"},
    {"status-max-age", SET_DURATION, F(status_max_age_ms), "2s", 0, 0,
     "GET /intents/status(/v3) of a request no watch follows answers the stored state only when "
     "the upstream confirmed it within this long; otherwise it asks the upstream (0: always)"},
    {"ws-anonymous", SET_BOOL, F(ws_anonymous), "true", 0, 0,
     "allow anonymous single-id dashboard subscriptions"},
    {"ws-max-subscriptions", SET_INT, F(ws_max_subscriptions), "100", 0, 1,
     "subscriptions per dashboard connection"},
    {"ws-anon-ids-per-address", SET_INT, F(ws_anon_ids_per_address), "100", 0, 0,
     "request ids nobody else watches that anonymous dashboard subscriptions from one client "
     "address (IPv6: its /64) may start watching, across its connections (0: none)"},
    {"ws-anon-lease", SET_DURATION, F(ws_anon_lease_ms), "30s", 0, 1000,
     "an anonymous watch outlives a process that died without releasing it by at most this "
     "long (the lease is renewed every third of it)"},
    {"ws-queue-max", SET_INT, F(ws_queue_max), "1024", 0, 16,
     "frames queued per dashboard connection before it is conflated, then cut off"},
    {"ws-queue-bytes", SET_INT, F(ws_queue_bytes), "4194304", 0, 65536,
     "bytes queued per dashboard connection (frames not yet taken by the client) before it "
     "is conflated, then cut off with 1013"},
    {"ws-ping-interval", SET_DURATION, F(ws_ping_interval_ms), "20s", 0, 100,
     "dashboard websocket: ping a client silent this long (unset with the timeout given: "
     "min(20s, timeout/3))"},
    {"ws-ping-timeout", SET_DURATION, F(ws_ping_timeout_ms), "60s", 0, 200,
     "dashboard websocket: drop a client silent this long (no frame, no pong; exceeds the "
     "interval; unset: max(60s, 3 x interval))"},
    {"allow-private-targets", SET_BOOL, F(allow_private_targets), "false", 0, 0,
     "allow webhook URLs resolving to private, loopback or link-local addresses"},
    {"retry-schedule", SET_DURLIST, F(retry_schedule), "0s,5s,5m,30m,2h,5h,10h,10h", 0, 0,
     "delay before each delivery attempt; its length is the attempt count"},
    {"delivery-timeout", SET_DURATION, F(delivery_timeout_ms), "10s", 0, 100,
     "total time per delivery attempt (unset: raised to a given connect timeout, lowered to "
     "half a given lease)"},
    {"connect-timeout", SET_DURATION, F(connect_timeout_ms), "5s", 0, 100,
     "connect time per delivery attempt (at most the delivery timeout; unset: min(5s, "
     "delivery timeout))"},
    {"delivery-lease", SET_DURATION, F(delivery_lease_ms), "60s", 0, 1000,
     "a claimed delivery not finished by then returns to the queue (exceeds the delivery "
     "timeout; unset: max(60s, delivery timeout + 50s))"},
    {"endpoint-concurrency", SET_INT, F(endpoint_concurrency), "16", 0, 1,
     "deliveries in flight per webhook endpoint (upper bound; shrinks on 429/5xx)"},
    {"disable-after", SET_DURATION, F(disable_after_ms), "5d", 0, 1000,
     "an endpoint failing continuously this long is disabled"},
    {"secret-grace", SET_DURATION, F(secret_grace_ms), "24h", 0, 0,
     "after rotate-secret the old secret keeps signing this long"},
    {"leader-lease", SET_DURATION, F(leader_lease_ms), "10s", 0, 1000,
     "lease of the process holding the upstream websocket"},
    {"shutdown-grace", SET_DURATION, F(shutdown_grace_ms), "10s", 0, 0,
     "time to finish in-flight deliveries on SIGTERM"},
    {"log-level", SET_LEVEL, F(log_level), "info", 0, 0, "error, warn, info or debug"},
    {"log-file", SET_STR, F(log_file), NULL, 0, 0, "append logs here instead of stderr"},
    {"admin-url", SET_STR, F(admin_url), "http://127.0.0.1:8080", 0, 0,
     "REST API base URL used by the operator commands"},
    {NULL, 0, 0, NULL, 0, 0, NULL},
};

static int invalid(const char *env, const char *why)
{
    fprintf(stderr, "statusrelay: invalid setting %s: %s\n", env, why);
    return -1;
}

static int url_scheme_ok(const char *u, const char *a, const char *b)
{
    return u && (strncmp(u, a, strlen(a)) == 0 || strncmp(u, b, strlen(b)) == 0);
}

/* ---- settings that depend on one another --------------------------------------------------
 * The rule (docs/configuration.md): a default never conflicts with a legal value of another
 * setting. When only one setting of a dependent pair is given, the unset one follows it; two
 * given values that conflict stop start-up with one line naming both. The pairs:
 *   connect-timeout <= delivery-timeout < delivery-lease: unset connect = min(5s, delivery);
 *     unset lease = max(60s, delivery + 50s) (the defaults' 50 s of slack); unset delivery =
 *     the default raised to a given connect timeout, or lowered to half a given lease;
 *   upstream-ping-interval < upstream-ping-timeout: unset timeout = max(30s, 2 x interval),
 *     unset interval = min(15s, timeout / 2);
 *   ws-ping-interval < ws-ping-timeout: unset timeout = max(60s, 3 x interval), unset
 *     interval = min(20s, timeout / 3). */

#define MAX_SETTINGS 128

/* Why STATUSRELAY_READ_TOKEN is refused, or NULL. Unset (or empty) is fine. Without an admin
 * token the API is open on loopback (and refused beyond it), so a read token alone would
 * restrict nothing: refused rather than trusted. Its value is compared after trimming blanks,
 * so it holds visible ASCII only. */
static const char *read_token_check(const struct config *c)
{
    const char *t = c->read_token;
    if (t == NULL || t[0] == '\0')
        return NULL;
    if (c->admin_token == NULL || c->admin_token[0] == '\0')
        return "needs STATUSRELAY_ADMIN_TOKEN (without it the API is open and a read token "
               "restricts nothing)";
    if (strlen(t) < 16)
        return "must be at least 16 characters";
    for (const char *p = t; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            return "must be visible ASCII (no spaces or control characters)";
    if (strcmp(t, c->admin_token) == 0)
        return "must differ from STATUSRELAY_ADMIN_TOKEN";
    return NULL;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Whether the setting name was given (environment or flag). */
static int given_of(const unsigned char *given, const char *name)
{
    for (const struct setting *s = config_settings; s->name; s++)
        if (strcmp(s->name, name) == 0)
            return given[s - config_settings];
    return 0;
}

/* One line: "invalid setting <a_env> (<a>): must <rel> <b_env> (<b>[, <b_note>])"; returns
 * -1. */
static int conflict(const char *a_env, int64_t a, const char *rel, const char *b_env, int64_t b,
                    const char *b_note)
{
    char av[32], bv[32];
    format_duration_ms(a, av, sizeof(av));
    format_duration_ms(b, bv, sizeof(bv));
    fprintf(stderr, "statusrelay: invalid setting %s (%s): must %s %s (%s%s%s)\n", a_env, av,
            rel, b_env, bv, b_note ? ", " : "", b_note ? b_note : "");
    return -1;
}

/* Derive the unset settings of each dependent pair from the given ones, then check the
 * pairs. Returns 0 or -1 after one line on stderr. */
static int derive_dependents(struct config *c, const unsigned char *given)
{
    int g_conn = given_of(given, "connect-timeout"), g_dt = given_of(given, "delivery-timeout"),
        g_lease = given_of(given, "delivery-lease");
    const char *dt_note = NULL;
    if (!g_dt && g_conn && g_lease && c->connect_timeout_ms >= c->delivery_lease_ms)
        return conflict("STATUSRELAY_DELIVERY_LEASE", c->delivery_lease_ms, "exceed",
                        "STATUSRELAY_CONNECT_TIMEOUT", c->connect_timeout_ms, NULL);
    if (!g_dt) {
        if (g_conn && c->connect_timeout_ms > c->delivery_timeout_ms) {
            c->delivery_timeout_ms = c->connect_timeout_ms;
            dt_note = "unset: follows STATUSRELAY_CONNECT_TIMEOUT";
        }
        if (g_lease && c->delivery_lease_ms <= c->delivery_timeout_ms) {
            c->delivery_timeout_ms =
                max64(c->delivery_lease_ms / 2, g_conn ? c->connect_timeout_ms : 0);
            dt_note = "unset: follows STATUSRELAY_DELIVERY_LEASE";
        }
    }
    if (!g_conn)
        c->connect_timeout_ms = min64(c->connect_timeout_ms, c->delivery_timeout_ms);
    if (!g_lease)
        c->delivery_lease_ms = max64(c->delivery_lease_ms, c->delivery_timeout_ms + 50000);
    if (c->delivery_lease_ms <= c->delivery_timeout_ms)
        return conflict("STATUSRELAY_DELIVERY_LEASE", c->delivery_lease_ms, "exceed",
                        "STATUSRELAY_DELIVERY_TIMEOUT", c->delivery_timeout_ms, dt_note);
    if (c->connect_timeout_ms > c->delivery_timeout_ms)
        return conflict("STATUSRELAY_CONNECT_TIMEOUT", c->connect_timeout_ms, "not exceed",
                        "STATUSRELAY_DELIVERY_TIMEOUT", c->delivery_timeout_ms, dt_note);

    int g_upi = given_of(given, "upstream-ping-interval"),
        g_upt = given_of(given, "upstream-ping-timeout");
    if (g_upi && !g_upt)
        c->upstream_ping_timeout_ms = max64(c->upstream_ping_timeout_ms,
                                            2 * c->upstream_ping_interval_ms);
    if (g_upt && !g_upi)
        c->upstream_ping_interval_ms = min64(c->upstream_ping_interval_ms,
                                             c->upstream_ping_timeout_ms / 2);
    if (c->upstream_ping_timeout_ms <= c->upstream_ping_interval_ms)
        return conflict("STATUSRELAY_UPSTREAM_PING_TIMEOUT", c->upstream_ping_timeout_ms,
                        "exceed", "STATUSRELAY_UPSTREAM_PING_INTERVAL",
                        c->upstream_ping_interval_ms, NULL);

    int g_wpi = given_of(given, "ws-ping-interval"), g_wpt = given_of(given, "ws-ping-timeout");
    if (g_wpi && !g_wpt)
        c->ws_ping_timeout_ms = max64(c->ws_ping_timeout_ms, 3 * c->ws_ping_interval_ms);
    if (g_wpt && !g_wpi)
        c->ws_ping_interval_ms = min64(c->ws_ping_interval_ms, c->ws_ping_timeout_ms / 3);
    if (c->ws_ping_timeout_ms <= c->ws_ping_interval_ms)
        return conflict("STATUSRELAY_WS_PING_TIMEOUT", c->ws_ping_timeout_ms, "exceed",
                        "STATUSRELAY_WS_PING_INTERVAL", c->ws_ping_interval_ms, NULL);
    return 0;
}

int config_load(struct config *c, int argc, char **argv, const char **rest, int *nrest,
                int *help)
{
    unsigned char given[MAX_SETTINGS] = {0};
    memset(c, 0, sizeof(*c));
    if (ARRAY_LEN(config_settings) > MAX_SETTINGS) { /* a programming error, caught by any test */
        fprintf(stderr, "statusrelay: more than %d settings: raise MAX_SETTINGS\n", MAX_SETTINGS);
        return -1;
    }
    if (settings_load_given(config_settings, c, "STATUSRELAY_", argc, argv, rest, nrest, help,
                            given) != 0)
        return -1;
    if (derive_dependents(c, given) != 0)
        return -1;
    if (!url_scheme_ok(c->upstream_api_url, "https://", "http://"))
        return invalid("STATUSRELAY_UPSTREAM_API_URL", "must start with https:// or http://");
    if (!url_scheme_ok(c->upstream_ws_url, "wss://", "ws://"))
        return invalid("STATUSRELAY_UPSTREAM_WS_URL", "must start with wss:// or ws://");
    struct redis_url ru; /* the store's own parsers: what passes here connects */
    struct cluster_url cu;
    const char *rwhy = NULL;
    if (url_scheme_ok(c->redis_url, "redis-cluster://", "redis-cluster://")) {
        if (cluster_url_parse(&cu, c->redis_url, &rwhy) != 0)
            return invalid("STATUSRELAY_REDIS_URL", rwhy);
        cluster_url_cleanup(&cu);
    } else if (redis_url_parse(c->redis_url, &ru, &rwhy) != 0)
        return invalid("STATUSRELAY_REDIS_URL", rwhy ? rwhy : "unparsable");
    else
        redis_url_cleanup(&ru);
    if (c->redis_prefix == NULL || c->redis_prefix[0] == '\0' ||
        strpbrk(c->redis_prefix, "{} \t\r\n") != NULL)
        return invalid("STATUSRELAY_REDIS_PREFIX", "must be non-empty without braces or spaces");
    if (strlen(c->redis_prefix) > 150)
        return invalid("STATUSRELAY_REDIS_PREFIX", "at most 150 characters");
    if (c->partitions > KEY_MAX_PARTITIONS)
        return invalid("STATUSRELAY_PARTITIONS", "at most 64");
    if ((c->admin_token == NULL || c->admin_token[0] == '\0') &&
        !proto_listen_is_loopback(c->http_listen))
        return invalid("STATUSRELAY_ADMIN_TOKEN", "required when listening beyond loopback");
    if (c->admin_token && c->admin_token[0] != '\0' && strlen(c->admin_token) < 16)
        return invalid("STATUSRELAY_ADMIN_TOKEN", "must be at least 16 characters");
    const char *why;
    if ((why = read_token_check(c)) != NULL)
        return invalid("STATUSRELAY_READ_TOKEN", why);
    if ((why = cors_list_check(c->cors_origins)) != NULL)
        return invalid("STATUSRELAY_CORS_ORIGINS", why);
    if ((why = cors_list_check(c->admin_cors_origins)) != NULL)
        return invalid("STATUSRELAY_ADMIN_CORS_ORIGINS", why);
    if (proto_cidr_list_parse(c->trusted_proxies, &c->trusted, &why) != 0)
        return invalid("STATUSRELAY_TRUSTED_PROXIES", why);
    if (c->discover && c->upstream_api_key == NULL)
        return invalid("STATUSRELAY_DISCOVER", "needs STATUSRELAY_UPSTREAM_API_KEY");
    return 0;
}

int config_fit_descriptors(struct config *c, int64_t limit)
{
    /* The REST port serves operators, backends and status reads: a quarter of what the
     * reserve leaves (at least 256 when that fits in half); the dashboard port, where
     * thousands of browsers each hold a socket, gets the rest. */
    int64_t reserve = CONFIG_FD_RESERVE_BASE + limit / 8, avail = limit - reserve;
    int64_t http = avail / 4 >= 256 ? avail / 4 : (avail / 2 < 256 ? avail / 2 : 256);
    int64_t derived[2] = {http, avail - http}, most = limit - CONFIG_FD_RESERVE_BASE;
    char why[160];
    const struct {
        int64_t *cap;
        const char *env;
    } caps[] = {{&c->http_max_connections, "STATUSRELAY_HTTP_MAX_CONNECTIONS"},
                {&c->ws_max_connections, "STATUSRELAY_WS_MAX_CONNECTIONS"}};
    for (size_t i = 0; i < ARRAY_LEN(caps); i++) {
        if (*caps[i].cap == 0) { /* derived: always accepted, at least 1 */
            *caps[i].cap = derived[i] < 1 ? 1 : derived[i];
        } else if (*caps[i].cap > most) {
            snprintf(why, sizeof(why), "%lld does not fit the descriptor limit %lld (at most %lld)",
                     (long long)*caps[i].cap, (long long)limit, (long long)most);
            return invalid(caps[i].env, why);
        }
    }
    return 0;
}

void config_free(struct config *c)
{
    settings_free(config_settings, c);
}

void config_print(const struct config *c, FILE *f)
{
    struct config shown = *c; /* shallow: only redis_url is swapped, for its redacted form */
    char red[1024];
    if (c->redis_url) {
        redis_url_redact(c->redis_url, red, sizeof(red));
        shown.redis_url = red;
    }
    settings_print(config_settings, &shown, "STATUSRELAY_", f);
}
