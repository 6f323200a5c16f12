/* sim.h - shared state of the upstream simulator (`statusrelay sim`): settings, the fault
 * switches the control API flips, the counters /_sim/stats reports, and the context every
 * simulator module reaches through lws_context_user().
 *
 * Internal to relay/sim/ (like lws's private-lib-*.h): the entry point for the rest of the
 * program is sim_main() in relay/commands.h.
 * Modules: sim.c (main, settings, load generator), sim_model.c (requests, lifecycles, rng,
 * timers), sim_json.c (the upstream's wire shapes), sim_ws.c (websocket server),
 * sim_http.c (upstream HTTP endpoints, rate limit, HTTP faults), sim_control.c (/_sim/),
 * sim_webhook.c (upstream webhooks, own thread), sim_map.c (hash map).
 * runs on: the simulator's lws service thread (the main thread), except where a field says
 * otherwise. */
#ifndef RELAY_SIM_H
#define RELAY_SIM_H

#include "relay/sim/sim_json.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

struct lws_context;
struct lws_vhost;
struct sim_model;
struct sim_ws;
struct sim_http;
struct sim_webhook;
struct sim_req;

/* Settings (relay/common/settings.h table in sim.c; env prefix STATUSRELAY_SIM_). */
struct sim_config {
    char *listen;           /* HOST:PORT; port 0 picks a free port (see port_file) */
    int64_t seed;
    int64_t rate;           /* generated requests per second; 0 = only scripted ones */
    int64_t duration_ms;    /* how long the generator runs; 0 = until stopped */
    int exit_when_done;     /* exit once the generator ended and every lifecycle finished */
    char *api_key;          /* NULL: no key required anywhere */
    char *webhook_url;      /* NULL: no upstream webhooks */
    char *webhook_secret;   /* NULL: sign with api_key ("" when neither) */
    int64_t webhook_retries;
    int64_t webhook_timeout_ms;
    int64_t rate_limit;     /* upstream HTTP calls per minute per key; 0 = unlimited */
    int64_t step_ms;        /* base time between lifecycle steps of generated requests */
    char *mix;              /* lifecycle weights "name:weight,..." */
    char *envelope;         /* "A" or "B" */
    int64_t retain;         /* requests kept in memory (oldest finished ones evicted) */
    int64_t ws_max_queue;   /* frames queued per websocket client before it is cut off */
    char *port_file;        /* write the bound port here once listening */
    int log_level;
};

/* Fault switches (POST /_sim/faults). All off by default. */
struct sim_faults {
    int silent;               /* websocket sends no events (acks and pongs still flow) */
    int duplicate;            /* every event frame is sent twice */
    int reorder;              /* each request's events are swapped pairwise */
    int ws_refuse;            /* new websocket upgrades get 503 */
    int envelope_b;           /* events in envelope B {"data":{"event","data"}} */
    int ws_minimal;           /* event data without the optional fields */
    int64_t delay_ms;         /* event frames leave this much later */
    double http_error_rate;   /* fraction of upstream HTTP calls answered with an error */
    int http_error_status;    /* 429, 500, 502, 503, 504; 0 = a random one of 429/500/503 */
    int64_t http_error_count; /* the next N upstream calls fail (before the rate) */
    char http_error_path[128];/* only paths starting with this ("" = every upstream path) */
    int64_t http_delay_ms;    /* upstream HTTP answers are held this long */
    int64_t rate_limit;       /* per key per minute; 0 = unlimited (from --rate-limit) */
    int refuse_key;           /* 401 or 403: every upstream call with an x-api-key gets it */
};

enum sim_http_path { SIM_P_STATUS, SIM_P_REQUESTS, SIM_P_CHAINS, SIM_P_OTHER, SIM_P_N };
#define SIM_MAX_CODES 16

#define SIM_TL_BUCKETS 6000 /* 100 ms each: 10 minutes */
#define SIM_TL_BUCKET_MS 100

struct sim_stats {
    /* websocket */
    uint64_t ws_connections, ws_open, ws_rejected, ws_frames, ws_event_frames, ws_acks,
        ws_malformed, ws_subscribes, ws_unsubscribes, ws_bad_messages, ws_suppressed,
        ws_dropped_abrupt, ws_dropped_close, ws_slow_closed, ws_bytes;
    /* upstream HTTP, by path and status */
    uint64_t http_total, http_rate_limited, http_injected;
    struct {
        int code;
        uint64_t n;
    } http[SIM_P_N][SIM_MAX_CODES];
    /* lifecycle */
    uint64_t requests_created, requests_evicted, status_changes;
    uint64_t control_calls;
    /* upstream HTTP answers per 100 ms since the last reset (GET /_sim/timeline); calls
     * past the last bucket (10 minutes) are counted in the last one */
    int64_t tl_start_ms;            /* wall ms of bucket 0 (0: no call yet) */
    uint32_t tl[SIM_TL_BUCKETS];
};

struct sim {
    struct sim_config cfg;
    struct sim_faults faults;
    struct sim_stats stats;
    struct lws_context *ctx;
    struct lws_vhost *vh;
    struct sim_model *model;
    struct sim_ws *ws;
    struct sim_http *http;
    struct sim_webhook *wh; /* NULL without --webhook-url */
    int port;
    int64_t started_mono_ms;
    uint64_t fault_rng;     /* random stream for fault decisions (separate from the model) */
    unsigned char chain_flags[SIM_CHAINS_MAX]; /* GET /chains marks (POST /_sim/chains) */
    /* load generator */
    int64_t gen_rate;       /* current rate (settings or POST /_sim/load) */
    int64_t gen_started_ms; /* mono ms when the current run started */
    int64_t gen_until_ms;   /* mono ms; 0 = unbounded */
    uint64_t gen_made;      /* requests made in the current run */
    int gen_running;
    volatile sig_atomic_t stop;
};

/* Path names for the stats: "/intents/status/v3", "/requests/v3", "/chains", "other". */
const char *sim_path_name(enum sim_http_path p);
/* Start (rate > 0) or stop (rate 0) the request generator; duration_ms 0 = unbounded. */
void sim_load_set(struct sim *s, int64_t rate, int64_t duration_ms);

#endif
