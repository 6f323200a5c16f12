/* internal.h (api) - what the files of relay/api/ share: the server, the per-request context,
 * the route table's types, the reply and parser helpers of reply.c and the route handlers.
 * Private to relay/api/ (nothing outside it includes this file); the public API is server.h.
 *
 * The request lifetime (server.c, reply.c): on_request creates one struct ctx per HTTP request and hands it
 * to the route's handler; exactly one api_reply_* / api_send_* call finishes it (and frees it).
 * A handler that waits for Redis or the upstream returns and finishes the ctx from its callback;
 * by then the client may be gone (ctx->req == NULL: the answer is dropped) and, after api_free,
 * ctx->api is NULL. A callback that starts more work checks both first, and if either is gone
 * calls api_ctx_free instead of answering.
 *
 * Files: server.c (evhttp setup, dispatch by admission's verdict, teardown), admit.c (the
 * verdict on a request head: route, Host, Origin, token, media type, body cap; pure), reply.c
 * (the ctx's life, replies, parsers), gate.c (each connection's request heads, judged before
 * evhttp reads a body; the request deadline), listen.c (the listener, connection caps, client
 * addresses), routes.c (the table), health.c (/healthz /readyz /metrics), requests.c
 * (/v1/requests), events.c (/v1/events and the record -> JSON helpers), compat.c
 * (/intents/status/v3), ingest.c (/v1/ingest/upstream), chains.c (/v1/chains),
 * webhooks.c (webhook endpoints, deliveries, replay; knows no evhttp), metrics.c (the page),
 * proxy.c (the pass-through to the upstream for paths we do not serve).
 * Dependencies point one way (tests/tools/check_layout.sh checks it): server -> listen -> gate
 * -> admit; server -> proxy; everything -> reply and this file. This file declares what every
 * file shares (types, the replies, the handlers); a module only some files use has its own
 * header (admit.h, gate.h, listen.h, proxy.h).
 * runs on: core thread. */
#ifndef RELAY_API_INTERNAL_H
#define RELAY_API_INTERNAL_H

#include "protocol/forwarded.h"
#include "protocol/proto.h"
#include "store/store.h"

#include <sys/queue.h> /* before event2/keyvalq_struct.h: TAILQ_INIT */
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define ROUTE_MAX_PARAMS 2
#define API_GATE_HEADER "X-Statusrelay-Gate" /* gate.c -> on_request; never from a client */
#define API_GATE_TOO_LARGE "too-large"         /* its values: 413 body_too_large */
#define API_GATE_BUSY "busy"                   /* 503 server_busy (listen.c: the reserve) */

#define CT_JSON "application/json"

struct core;
struct evbuffer;
struct proto_hmac;
struct status_event;
struct route;
struct rate_table;
struct api_listen;
struct proto_rest_head;
struct bufferevent;
struct event_base;
struct pt_out;
struct admit_rules;

struct api {
    struct core *c;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    struct proto_hmac *ingest_key; /* HMAC of the upstream API key; NULL without a key */
    struct ctx *pending;           /* every unfinished request */
    struct rate_table *anon_misses; /* status-read misses of anonymous callers, per address */
    unsigned proxy_inflight;       /* pass-through requests waiting for the upstream */
    struct pt_out *proxy_out;      /* pass-through answers being written (proxy.c, owned) */
    size_t proxy_queued;           /* their bytes (bounded by proxy.c's PT_MAX_QUEUED) */
    struct api_listen *lsn;        /* the listener and its connection cap (listen.c) */
    struct admit_rules *rules;     /* admission's settings (admit.h; server.c owns them) */
};

struct ctx {
    struct api *api;            /* NULL after api_free */
    struct evhttp_request *req; /* NULL once the client is gone */
    struct evhttp_connection *evcon;
    struct ctx *prev, *next; /* api->pending */
    const struct route *route;
    int linked;
    int head;                      /* HEAD request: headers only */
    int upstream_shape;            /* errors also carry {"message","errorCode"} */
    int anonymous;                 /* status reads: the caller did not prove who it is */
    int read_only;                 /* it presented the read token: GET only, no secrets */
    char peer[64];                 /* status reads: the client address key (compat.c) */
    int read_kind;                 /* status reads: what an upstream call is for (compat.c) */
    struct proto_ip client;        /* the client address (api_client_addr; family 0: unknown) */
    char *param[ROUTE_MAX_PARAMS]; /* decoded path parameters (owned) */
    size_t param_len[ROUTE_MAX_PARAMS];
    struct evkeyvalq query;
    const char *body; /* request body, contiguous; borrowed from req: valid until gone */
    size_t body_len;
    /* handler state */
    char id[PROTO_MAX_ID + 1];
    size_t ntracked; /* POST /v1/requests */
    int limit;
    char **ids; /* list page: ids (owned) */
    size_t nids;
    char *next_cursor; /* list page: cursor after this page, or NULL */
    char only_status[PROTO_MAX_STATUS + 1]; /* list of stuck requests: this status only */
};

/* ---- the route table (routes.c) ------------------------------------------------------------- */

/* A route handler: runs in on_request after routing, auth, body limit and query parsing; owns x
 * and finishes it (now or from a callback) with exactly one reply. */
typedef void route_cb(struct ctx *x);
/* AUTH_READ: the upstream-compatible status reads (public unless STATUSRELAY_STATUS_REQUIRE_TOKEN;
 * upstream error shape; CORS by STATUSRELAY_CORS_ORIGINS). Every other path's CORS follows
 * STATUSRELAY_ADMIN_CORS_ORIGINS. */
enum route_auth { AUTH_TOKEN = 0, AUTH_NONE, AUTH_SIGNATURE, AUTH_READ };

struct route {
    enum evhttp_cmd_type method;
    const char *pattern; /* "/v1/requests/{}": "{}" matches one path segment */
    route_cb *fn;
    enum route_auth auth;
    int arg; /* handler's own use (api_h_webhooks: enum api_wh_route) */
};

/* Every endpoint, one row each, in the order on_request tries them (first match wins). */
extern const struct route api_routes[];
extern const size_t api_routes_len;

/* ---- handlers (each takes its ctx, see route_cb) --------------------------------------------- */

route_cb api_h_healthz, api_h_readyz, api_h_metrics;        /* health.c */
route_cb api_h_track, api_h_list, api_h_get, api_h_untrack; /* requests.c */
route_cb api_h_events;                                      /* events.c */
route_cb api_h_status_v3; /* compat.c: /intents/status/v3 and /intents/status */
route_cb api_h_ingest;                                      /* ingest.c */
route_cb api_h_chains;                                      /* chains.c */
route_cb api_h_partitions;                                  /* partitions.c */
route_cb api_h_backfill_post, api_h_backfill_get;           /* backfill.c */
route_cb api_h_webhooks; /* routes.c: adapter to webhooks.c (x->route->arg = enum api_wh_route) */

/* ---- the ctx and replies (reply.c) -------------------------------------------------------
 * Each finishes (frees) the ctx; when the client is gone (x->req NULL) nothing is written.
 * Content-Type (when given) and Cache-Control: no-store are added; a HEAD request gets the
 * headers and Content-Length only. */

/* A new ctx for req, linked into a->pending (on_request). Never NULL (allocation aborts). */
struct ctx *api_ctx_new(struct api *a, struct evhttp_request *req);
/* Free x without answering: for a ctx that is gone (x->req or x->api NULL). */
void api_ctx_free(struct ctx *x);
/* Answer code with len bytes of buf (copied) as ctype; 204 sends no body and no headers. */
void api_send_body(struct ctx *x, int code, const char *ctype, const char *buf, size_t len);
/* Answer code with the content of b (moved into the reply; b stays the caller's to free). */
void api_send_evbuffer(struct ctx *x, int code, const char *ctype, struct evbuffer *b);
/* Count an answer of code in the REST answers by class (for a reply sent without api_send_*). */
void api_count_answer(struct ctx *x, int code);
/* 500 {"message":"out of memory","error":{"code":"internal","message":"out of memory"}} (a
 * static body). */
void api_reply_oom(struct ctx *x);
/* Answer code with body as compact JSON. Takes body (a new reference); NULL (a failed
 * constructor) answers 500 out of memory. */
void api_reply_json(struct ctx *x, int code, json_t *body);
/* Answer code with no body and no Content-Type. */
void api_reply_empty(struct ctx *x, int code);
/* {"message","error":{"code","message"[,"field"]}}: the top-level "message" (the same text) lets
 * a client of the upstream print it. On upstream-shaped routes (x->upstream_shape) also the
 * upstream's "errorCode": code in upper case ("invalid_parameter" is the upstream's
 * INVALID_INPUT_PARAMETERS). field may be NULL; the message is cut at 511 bytes. */
void __attribute__((format(printf, 5, 6)))
api_reply_error(struct ctx *x, int code, const char *ecode, const char *field, const char *fmt,
                ...);
/* 503 "store_unavailable" with Retry-After: 1; what says what failed ("cannot read"). */
void api_reply_unavailable(struct ctx *x, const char *what);

/* ---- request parsers (reply.c) ----------------------------------------------------------------
 * On a bad value each answers 400 (finishing x) and returns -1 / NULL; the handler then returns
 * without touching x. */

/* The query parameter k (percent-decoded), or NULL. Borrowed from x. */
const char *api_query_get(struct ctx *x, const char *k);
/* Parse the "limit" query parameter into x->limit: default def, values above max clamped to max.
 * Returns 0, or -1 after answering 400. */
int api_parse_limit(struct ctx *x, int def, int max);
/* Copy a request id (path parameter or query value of length len) into x->id. Returns 0, or -1
 * after answering 400 naming field. */
int api_take_id(struct ctx *x, const char *s, size_t len, const char *field);
/* Parse the request body as JSON. Returns a new reference, or NULL after answering 400. */
json_t *api_parse_body(struct ctx *x);

/* ---- stored records as JSON (events.c) ------------------------------------------------------- */

/* Decode a stored event record (len bytes of buf) into ev (initialised by the caller; the caller
 * cleans it up on every path). Returns 0, or a PROTO_E* code after one warning naming what. */
int api_decode_record(const char *buf, size_t len, struct status_event *ev, const char *what);
/* The upstream-shaped "data" of ev (and, when sr is not NULL, its "statusrelay" object) as the
 * webhook body has them. New references or NULL (allocation failure). */
json_t *api_event_parts(const struct status_event *ev, json_t **sr);

#endif
