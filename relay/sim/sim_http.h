/* sim_http.h - HTTP on the simulator's port: the upstream endpoints (GET /intents/status/v3,
 * GET /requests/v3, GET /chains) with their API-key rules, the per-key rate limit (sliding
 * 60 s window, 429 + Retry-After), the HTTP faults (injected errors with the upstream's
 * {message, errorCode} bodies, held answers), and the plumbing that hands /_sim/ requests to
 * sim_control.c. Every upstream call is counted by path and status in sim->stats.
 * runs on: the simulator's lws thread. */
#ifndef RELAY_SIM_HTTP_H
#define RELAY_SIM_HTTP_H

#include "relay/sim/sim_json.h"

#include <libwebsockets.h>
#include <stddef.h>
#include <stdint.h>

struct sim;

enum sim_method { SIM_M_GET, SIM_M_POST, SIM_M_DELETE, SIM_M_PUT, SIM_M_OTHER };

#define SIM_MAX_ARGS 32

/* The query string, split into name/value pairs (values as lws decoded them). */
struct sim_query {
    int n;
    const char *name[SIM_MAX_ARGS];
    const char *value[SIM_MAX_ARGS];
    char buf[4096];
    size_t used;
};

/* The value of the first arg called name, or NULL. */
const char *sim_query_get(const struct sim_query *q, const char *name);

/* An answer being built: status, body (sbuf with LWS_PRE headroom), content type. */
struct sim_resp {
    int status;
    struct sbuf body;
    const char *ctype;   /* static; NULL = application/json */
    int retry_after_s;   /* > 0 adds Retry-After */
    int64_t delay_ms;    /* hold the answer this long */
};

/* Set status and an upstream-style error body {message, errorCode}. */
void sim_resp_error(struct sim_resp *r, int status, const char *message, const char *code);

struct sim_http;

struct sim_http *sim_http_new(struct sim *s);
/* NULL-safe. */
void sim_http_free(struct sim_http *h);

/* The lws protocol callback (protocols[0] in sim.c) and its per-session size. */
int sim_http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                      size_t len);
size_t sim_http_session_size(void);

#endif
