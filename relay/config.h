/* config.h - the daemon's settings, parsed once into an immutable struct config.
 *
 * Every setting is STATUSRELAY_<NAME> in the environment and --<name> as a flag (flags win).
 * The table in config.c is the one list of settings: docs/configuration.md's table mirrors it
 * (tests/integration/ops.test.mjs checks both ways).
 * runs on: main thread at start-up; afterwards read-only from any thread. */
#ifndef RELAY_CONFIG_H
#define RELAY_CONFIG_H

#include "protocol/forwarded.h"
#include "relay/common/settings.h"

#include <stdint.h>
#include <stdio.h>

struct config {
    /* upstream */
    char *upstream_api_url;
    char *upstream_ws_url;
    char *upstream_api_key;
    int64_t upstream_budget;       /* calls per minute, shared */
    int64_t poll_interval_ms;      /* per request while the upstream ws is down/unconfirmed */
    int64_t poll_safety_interval_ms; /* per request while the upstream ws is healthy */
    int64_t failure_tail_ms;       /* keep watching a failed request this long (refund?) */
    int64_t settled_watch_ms;      /* keep watching a success/refund this long (reversal?) */
    int64_t settled_poll_interval_ms; /* poll period of a settled watch */
    int64_t waiting_ttl_ms;        /* a request waiting this long stops being watched */
    int64_t stuck_after_ms;        /* active, not waiting, unchanged this long: stuck */
    int64_t upstream_ping_interval_ms;
    int64_t upstream_ping_timeout_ms;
    int64_t ingest_tolerance_ms;   /* upstream webhook signature freshness */
    int64_t max_clock_skew_ms;     /* updatedAt further ahead of now is refused (ingest.c) */
    int discover;                  /* page /requests/v3 for new requests (needs a key) */
    int64_t discover_interval_ms;
    int64_t discover_lookback_ms;  /* the feed resumes at most this far back (feed.c) */
    int passthrough;               /* forward paths we do not serve to upstream_api_url */
    int64_t chains_refresh_ms;     /* GET /chains refresh period (relay/ingest/chains.c) */
    /* redis */
    char *redis_url;
    char *redis_prefix;
    int64_t partitions;            /* request partitions (docs/partitions.md), 1..64 */
    int64_t event_retention;       /* events kept in the stream (count) */
    int64_t event_retention_age_ms;
    int64_t dead_retention_ms;     /* dead and skipped deliveries are deleted after this */
    int64_t request_retention_ms;  /* idle requests whose watch ended are deleted after this */
    int compress_records;          /* deflate the records of ended watches (store/rec.h) */
    /* listeners and auth */
    char *http_listen;
    int64_t http_request_timeout_ms; /* REST: a request must arrive whole within this */
    char *ws_listen;
    char *admin_token;
    char *read_token;              /* GET/HEAD only on /v1 and /metrics (admit.c) */
    char *stream_token;
    int status_require_token;      /* /intents/status(/v3) need the admin token too */
    char *cors_origins;            /* CORS origins of the status reads and the dashboard port */
    char *admin_cors_origins;      /* CORS origins of every other REST path (NULL: none) */
    char *allowed_hosts;           /* Host names besides loopback ones, without a token */
    int64_t anon_miss_rate;        /* anonymous status misses per minute per client address */
    int64_t status_max_age_ms;     /* status reads of unwatched ids: cache answer within this */
    int ws_anonymous;              /* anonymous single-id dashboard subscriptions allowed */
    int64_t ws_max_subscriptions;
    int64_t ws_anon_ids_per_address; /* new ids anonymous subscriptions may watch per address */
    int64_t ws_anon_lease_ms;      /* lease of an anonymous watch held by a process */
    int64_t ws_queue_max;          /* frames queued per dashboard connection */
    int64_t ws_queue_bytes;        /* bytes queued per dashboard connection */
    int64_t http_max_connections;  /* REST connections at most (0 until config_fit_descriptors) */
    int64_t ws_max_connections;    /* dashboard-port connections at most (likewise) */
    int64_t http_max_connections_per_address; /* REST connections per client address (0: any) */
    int64_t ws_max_connections_per_address;   /* dashboard connections per address (0: any) */
    int64_t http_keepalive_requests; /* requests per REST keep-alive connection */
    char *trusted_proxies;         /* STATUSRELAY_TRUSTED_PROXIES as given (NULL: none) */
    struct proto_cidr_list trusted; /* ... parsed by config_load */
    int64_t ws_ping_interval_ms;   /* dashboard: ping a client silent this long */
    int64_t ws_ping_timeout_ms;    /* dashboard: drop a client silent this long */
    /* webhooks */
    int allow_private_targets;
    struct duration_list retry_schedule;
    int64_t delivery_timeout_ms;
    int64_t connect_timeout_ms;
    int64_t delivery_lease_ms;
    int64_t endpoint_concurrency;
    int64_t disable_after_ms;      /* failing continuously this long disables an endpoint */
    int64_t secret_grace_ms;
    /* cluster and lifecycle */
    int64_t leader_lease_ms;
    int64_t shutdown_grace_ms;
    /* logging */
    int log_level;
    char *log_file;
    /* operator CLI */
    char *admin_url;
};

extern const struct setting config_settings[];

/* Load from env and argv (see settings_load), then validate cross-field rules. Returns 0 or
 * -1 after printing one line naming the bad setting (exit status 2). */
int config_load(struct config *c, int argc, char **argv, const char **rest, int *nrest,
                int *help);
void config_free(struct config *c);

/* Descriptors kept for everything but the two listeners: Redis, the upstream websocket and
 * HTTP calls, webhook attempts, the log, libevent's and libwebsockets' own. The reserve is
 * CONFIG_FD_RESERVE_BASE + limit / 8; each listener's default cap is half of the rest. */
#define CONFIG_FD_RESERVE_BASE 24
/* Fit the connection caps to the descriptor limit `limit` (RLIMIT_NOFILE after start-up
 * raised it): a cap left 0 becomes (limit - reserve) / 2 (at least 1, whatever the limit); a
 * cap given above limit - CONFIG_FD_RESERVE_BASE is refused. Returns 0, or -1 after one line
 * naming the setting. (Caps whose sum exceeds the limit are allowed: accepting then pauses on
 * EMFILE.) */
int config_fit_descriptors(struct config *c, int64_t limit);
/* NAME=value lines, secrets masked. */
void config_print(const struct config *c, FILE *f);

#endif
