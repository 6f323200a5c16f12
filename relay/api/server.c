/* api.c - see api.h. The REST API on evhttp. runs on: core thread.
 *
 * One struct ctx per HTTP request: created in on_request, finished by exactly one reply_* call
 * (which frees it). Handlers that wait for Redis or the upstream return and finish the ctx from
 * their callback. Every ctx sits in api->pending until it is finished, so that a connection
 * closing under it (on_conn_close) or api_free can mark it gone: ctx->req = NULL (the evhttp
 * request is freed by evhttp) and, after api_free, ctx->api = NULL. A gone ctx is freed by its
 * callback without writing anything.
 *
 * Decisions (documented in README's API section):
 *   - POST /v1/requests answers 201 when at least one id was newly tracked, 200 when every id
 *     was tracked already; body {"tracked": distinct ids, "created": newly tracked}.
 *   - A tracked request not yet observed answers "status": null (and null/empty upstream
 *     fields, "seq": 0). Upstream fields use the upstream's own conventions ("N/A").
 *   - GET /v1/requests lists every known request (tracked or not; see "tracked"), oldest first
 *     by first-seen time; "limit" above 500 is clamped to 500; the cursor is opaque.
 *   - GET /v1/events: "after" is a streamId (exclusive), a bare ms timestamp (events after that
 *     millisecond) or "$" (nothing now; cursor = the newest streamId, for tailing); "cursor" is
 *     where to continue (last streamId returned, else the "after" given), null only when
 *     nothing was asked for and nothing exists. An unknown requestId filter is an empty list,
 *     not a 404 (it filters a collection; it names no resource).
 *   - GET /intents/status/v3 keeps the upstream's shape: cached answers are re-encoded from the
 *     stored record; a miss answers the upstream's own status and body verbatim and tracks the
 *     id unless the upstream refused it with a 4xx other than 429. Our own errors there carry
 *     the upstream's top-level {"message","errorCode"} besides "error".
 *   - POST /v1/ingest/upstream answers 200 {"result": accepted|duplicate|stale|ignored} only
 *     once Redis holds the observation; "ignored" is a well-formed event type we do not handle
 *     (acknowledged so that the upstream does not retry it). */
#include "relay/api/server.h"
#include "relay/api/metrics.h"
#include "relay/api/webhooks.h"
#include "protocol/event.h"
#include "protocol/lifecycle.h"
#include "protocol/normalize.h"
#include "protocol/proto.h"
#include "protocol/sign.h"
#include "relay/core.h"
#include "relay/ingest/ingest.h"
#include "relay/common/log.h"
#include "relay/metrics.h"
#include "relay/ingest/poller.h"
#include "relay/ingest/track.h"
#include "relay/ingest/upstream.h"
#include "relay/common/util.h"
#include "store/keys.h"
#include "store/store.h"

#include <errno.h>
#include <sys/queue.h> /* before event2/keyvalq_struct.h: TAILQ_INIT */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ROUTE_MAX_SEGS 8
#define ROUTE_MAX_PARAMS 2
#define TRACK_MAX_IDS 1000
#define METADATA_MAX 4096
#define LIST_LIMIT_DEFAULT 50
#define LIST_LIMIT_MAX 500
#define EVENTS_LIMIT_DEFAULT 100
#define EVENTS_LIMIT_MAX 1000
#define HTTP_TIMEOUT_S 30
#define HTTP_MAX_HEADERS 16384
#define CURSOR_MAX 512

#define CT_JSON "application/json"
#define CT_PROM "text/plain; version=0.0.4; charset=utf-8"

struct api {
    struct core *c;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    struct proto_hmac *ingest_key; /* HMAC of the upstream API key; NULL without a key */
    struct ctx *pending;           /* every unfinished request */
    struct store_script page_sc, read_sc, events_sc;
};

/* Request fields of GET /v1/requests/{id} and of the list, in requests_read.lua's order. */
enum { RF_REC, RF_SEQ, RF_STATUS, RF_META, RF_FIRST, RF_TRK, RF_SRC, RF_WATCH, RF_WU, RF_COUNT };

struct ctx {
    struct api *api;            /* NULL after api_free */
    struct evhttp_request *req; /* NULL once the client is gone */
    struct evhttp_connection *evcon;
    struct ctx *prev, *next; /* api->pending */
    const struct route *route;
    int linked;
    int head;                      /* HEAD request: headers only */
    int upstream_shape;            /* errors also carry {"message","errorCode"} */
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
    char after[48];    /* events: normalised "ms-seq", "" = none */
    char only_status[PROTO_MAX_STATUS + 1]; /* list of stuck requests: this status only */
};

typedef void route_cb(struct ctx *x);
enum route_auth { AUTH_TOKEN = 0, AUTH_NONE, AUTH_SIGNATURE };

struct route {
    enum evhttp_cmd_type method;
    const char *pattern; /* "/v1/requests/{}": "{}" matches one path segment */
    route_cb *fn;
    enum route_auth auth;
    int arg; /* handler's own use (h_webhooks: enum api_wh_route) */
};

static route_cb h_healthz, h_readyz, h_metrics, h_track, h_list, h_get, h_untrack, h_events,
    h_status_v3, h_ingest, h_webhooks;

/* The route table: {method, pattern, handler, auth, handler argument}; an endpoint is one row.
 * A request whose path matches a row but not its method is 405 with the methods that match. */
static const struct route routes[] = {
    {EVHTTP_REQ_GET, "/healthz", h_healthz, AUTH_NONE, 0},
    {EVHTTP_REQ_GET, "/readyz", h_readyz, AUTH_NONE, 0},
    {EVHTTP_REQ_GET, "/metrics", h_metrics, AUTH_TOKEN, 0},
    {EVHTTP_REQ_POST, "/v1/requests", h_track, AUTH_TOKEN, 0},
    {EVHTTP_REQ_GET, "/v1/requests", h_list, AUTH_TOKEN, 0},
    {EVHTTP_REQ_GET, "/v1/requests/{}", h_get, AUTH_TOKEN, 0},
    {EVHTTP_REQ_DELETE, "/v1/requests/{}", h_untrack, AUTH_TOKEN, 0},
    {EVHTTP_REQ_GET, "/v1/events", h_events, AUTH_TOKEN, 0},
    {EVHTTP_REQ_GET, "/intents/status/v3", h_status_v3, AUTH_TOKEN, 0},
    {EVHTTP_REQ_POST, "/v1/ingest/upstream", h_ingest, AUTH_SIGNATURE, 0},
    /* relay/api/webhooks.c */
    {EVHTTP_REQ_POST, "/v1/webhooks", h_webhooks, AUTH_TOKEN, API_WH_CREATE},
    {EVHTTP_REQ_GET, "/v1/webhooks", h_webhooks, AUTH_TOKEN, API_WH_LIST},
    {EVHTTP_REQ_GET, "/v1/webhooks/{}", h_webhooks, AUTH_TOKEN, API_WH_GET},
    {EVHTTP_REQ_PATCH, "/v1/webhooks/{}", h_webhooks, AUTH_TOKEN, API_WH_PATCH},
    {EVHTTP_REQ_DELETE, "/v1/webhooks/{}", h_webhooks, AUTH_TOKEN, API_WH_DELETE},
    {EVHTTP_REQ_POST, "/v1/webhooks/{}/rotate-secret", h_webhooks, AUTH_TOKEN, API_WH_ROTATE},
    {EVHTTP_REQ_POST, "/v1/webhooks/{}/reveal-secret", h_webhooks, AUTH_TOKEN, API_WH_REVEAL},
    {EVHTTP_REQ_POST, "/v1/webhooks/{}/test", h_webhooks, AUTH_TOKEN, API_WH_TEST},
    {EVHTTP_REQ_GET, "/v1/webhooks/{}/deliveries", h_webhooks, AUTH_TOKEN, API_WH_DELIVERIES},
    {EVHTTP_REQ_POST, "/v1/replay", h_webhooks, AUTH_TOKEN, API_WH_REPLAY},
};

static const struct {
    enum evhttp_cmd_type m;
    const char *name;
} method_names[] = {
    {EVHTTP_REQ_GET, "GET"},         {EVHTTP_REQ_HEAD, "HEAD"},   {EVHTTP_REQ_POST, "POST"},
    {EVHTTP_REQ_PUT, "PUT"},         {EVHTTP_REQ_PATCH, "PATCH"}, {EVHTTP_REQ_DELETE, "DELETE"},
    {EVHTTP_REQ_OPTIONS, "OPTIONS"},
};

/* ---- ctx lifecycle --------------------------------------------------------------------------- */

static void ctx_unlink(struct ctx *x)
{
    if (!x->linked)
        return;
    if (x->prev)
        x->prev->next = x->next;
    else
        x->api->pending = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
    x->linked = 0;
}

static void ctx_free(struct ctx *x)
{
    ctx_unlink(x);
    for (int i = 0; i < ROUTE_MAX_PARAMS; i++)
        free(x->param[i]);
    evhttp_clear_headers(&x->query);
    for (size_t i = 0; i < x->nids; i++)
        free(x->ids[i]);
    free(x->ids);
    free(x->next_cursor);
    free(x);
}

/* The connection is being freed (client gone, error, shutdown): its requests go with it. */
static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct api *a = arg;
    for (struct ctx *x = a->pending; x != NULL; x = x->next)
        if (x->evcon == evcon) {
            x->req = NULL;
            x->body = NULL;
            x->body_len = 0;
        }
}

/* ---- replies: each finishes (frees) the ctx -------------------------------------------------- */

static void count_answer(struct ctx *x, int code)
{
    if (x->api != NULL && code >= 100 && code < 600)
        x->api->c->metrics.api_responses[code / 100 - 1]++;
}

static void add_common_headers(struct ctx *x, const char *ctype)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(x->req);
    if (ctype != NULL)
        evhttp_add_header(h, "Content-Type", ctype);
    evhttp_add_header(h, "Cache-Control", "no-store");
}

static void send_body(struct ctx *x, int code, const char *ctype, const char *buf, size_t len)
{
    if (x->req != NULL) {
        count_answer(x, code);
        if (code != 204) {
            add_common_headers(x, ctype);
            if (x->head) {
                char n[24];
                snprintf(n, sizeof(n), "%zu", len);
                evhttp_add_header(evhttp_request_get_output_headers(x->req), "Content-Length", n);
            } else if (len > 0) {
                evbuffer_add(evhttp_request_get_output_buffer(x->req), buf, len);
            }
        }
        evhttp_send_reply(x->req, code, NULL, NULL);
    }
    ctx_free(x);
}

static void send_evbuffer(struct ctx *x, int code, const char *ctype, struct evbuffer *b)
{
    if (x->req != NULL) {
        count_answer(x, code);
        add_common_headers(x, ctype);
        if (x->head) {
            char n[24];
            snprintf(n, sizeof(n), "%zu", evbuffer_get_length(b));
            evhttp_add_header(evhttp_request_get_output_headers(x->req), "Content-Length", n);
        } else {
            evbuffer_add_buffer(evhttp_request_get_output_buffer(x->req), b);
        }
        evhttp_send_reply(x->req, code, NULL, NULL);
    }
    ctx_free(x);
}

static void reply_oom(struct ctx *x)
{
    static const char body[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
    send_body(x, 500, CT_JSON, body, sizeof(body) - 1);
}

/* Takes body (a new reference). */
static void reply_json(struct ctx *x, int code, json_t *body)
{
    char *t = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (t == NULL) {
        reply_oom(x);
        return;
    }
    send_body(x, code, CT_JSON, t, strlen(t));
    free(t);
}

static void reply_empty(struct ctx *x, int code)
{
    send_body(x, code, NULL, NULL, 0);
}

/* {"error":{"code","message"[,"field"]}}; on upstream-shaped routes also the upstream's top-level
 * {"message","errorCode"} (errorCode = code in upper case). field may be NULL. */
static void __attribute__((format(printf, 5, 6)))
reply_error(struct ctx *x, int code, const char *ecode, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *err = json_pack("{s:s,s:s}", "code", ecode, "message", msg);
    if (err != NULL && field != NULL && field[0] != '\0')
        json_object_set_new(err, "field", json_string(field));
    json_t *o = err != NULL ? json_pack("{s:o}", "error", err) : NULL;
    if (o != NULL && x->upstream_shape) {
        char up[64];
        size_t i = 0;
        for (; ecode[i] != '\0' && i < sizeof(up) - 1; i++)
            up[i] = (char)(ecode[i] >= 'a' && ecode[i] <= 'z' ? ecode[i] - 'a' + 'A' : ecode[i]);
        up[i] = '\0';
        json_object_set_new(o, "message", json_string(msg));
        json_object_set_new(o, "errorCode", json_string(up));
    }
    reply_json(x, code, o);
}

static void reply_unavailable(struct ctx *x, const char *what)
{
    if (x->req != NULL)
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", "1");
    reply_error(x, 503, "store_unavailable", NULL, "%s: Redis is unavailable, retry shortly", what);
}

/* ---- small parsers --------------------------------------------------------------------------- */

static const char *query_get(struct ctx *x, const char *k)
{
    return evhttp_find_header(&x->query, k);
}

/* Parse the "limit" query parameter: default def, values above max clamped to max. Returns 0, or -1
 * after answering 400. */
static int parse_limit(struct ctx *x, int def, int max)
{
    const char *s = query_get(x, "limit");
    x->limit = def;
    if (s == NULL || s[0] == '\0')
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || errno != 0 || *end != '\0' || v < 1) {
        reply_error(x, 400, "invalid_parameter", "limit",
                    "limit must be a positive integer (at most %d)", max);
        return -1;
    }
    x->limit = v > max ? max : (int)v;
    return 0;
}

/* Copy a request id (path parameter or query value of length len) into x->id. Returns 0, or -1
 * after answering 400. */
static int take_id(struct ctx *x, const char *s, size_t len, const char *field)
{
    if (s == NULL || len == 0) {
        reply_error(x, 400, "invalid_request_id", field, "%s is required", field);
        return -1;
    }
    if (!proto_request_id_valid(s, len) || len > PROTO_MAX_ID) {
        reply_error(x, 400, "invalid_request_id", field,
                    "%s must be 1..%d characters of A-Z a-z 0-9 _ : . -", field, PROTO_MAX_ID);
        return -1;
    }
    memcpy(x->id, s, len);
    x->id[len] = '\0';
    return 0;
}

/* Stream id "ms-seq" or "ms" into parts (each up to 20 digits, fitting uint64). */
static int parse_stream_id(const char *s, uint64_t *ms, uint64_t *seq, int *has_seq)
{
    char *end;
    if (s[0] < '0' || s[0] > '9' || strlen(s) > 41)
        return -1;
    errno = 0;
    unsigned long long a = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    *ms = a;
    *has_seq = 0;
    *seq = 0;
    if (*end == '\0')
        return 0;
    if (*end != '-' || end[1] < '0' || end[1] > '9')
        return -1;
    const char *t = end + 1;
    unsigned long long b = strtoull(t, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *seq = b;
    *has_seq = 1;
    return 0;
}

/* Parse the request body as JSON. Returns a new reference, or NULL after answering 400. */
static json_t *parse_body(struct ctx *x)
{
    if (x->body_len == 0) {
        reply_error(x, 400, "invalid_body", NULL, "a JSON body is required");
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(x->body, x->body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (root == NULL) {
        /* je.text may quote the input: keep the message plain ASCII and short */
        char clean[96];
        size_t i = 0;
        for (const char *p = je.text; *p != '\0' && i < sizeof(clean) - 1; p++)
            clean[i++] = (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ? *p : '?';
        clean[i] = '\0';
        reply_error(x, 400, "invalid_json", NULL, "body is not valid JSON: %s (line %d, column %d)",
                    clean, je.line, je.column);
        return NULL;
    }
    return root;
}

/* ---- opaque list cursor: base64url (no padding) of "<score>|<id>" ---------------------------- */

static const char b64u[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *cursor_encode(const char *score, const char *id)
{
    char raw[CURSOR_MAX];
    int n = snprintf(raw, sizeof(raw), "%s|%s", score, id);
    if (n < 0 || (size_t)n >= sizeof(raw))
        return NULL;
    char *out = xmalloc((size_t)n * 4 / 3 + 4);
    size_t o = 0;
    for (int i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)raw[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)raw[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)raw[i + 2];
        out[o++] = b64u[(v >> 18) & 63];
        out[o++] = b64u[(v >> 12) & 63];
        if (i + 1 < n)
            out[o++] = b64u[(v >> 6) & 63];
        if (i + 2 < n)
            out[o++] = b64u[v & 63];
    }
    out[o] = '\0';
    return out;
}

/* Decode a cursor into score digits and a valid id. Returns 0 or -1. */
static int cursor_decode(const char *s, char *score, size_t scoren, char *id, size_t idn)
{
    char raw[CURSOR_MAX];
    size_t len = strlen(s), o = 0;
    if (len == 0 || len >= sizeof(raw) || len % 4 == 1)
        return -1;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        const char *p = strchr(b64u, s[i]);
        if (p == NULL || s[i] == '\0')
            return -1;
        acc = (acc << 6) | (unsigned)(p - b64u);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            raw[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    raw[o] = '\0';
    char *bar = memchr(raw, '|', o);
    if (bar == NULL)
        return -1;
    size_t sl = (size_t)(bar - raw), il = o - sl - 1;
    if (sl == 0 || sl >= scoren || sl > 17 || il >= idn || !proto_request_id_valid(bar + 1, il))
        return -1;
    for (size_t i = 0; i < sl; i++)
        if (raw[i] < '0' || raw[i] > '9')
            return -1;
    memcpy(score, raw, sl);
    score[sl] = '\0';
    memcpy(id, bar + 1, il);
    id[il] = '\0';
    return 0;
}

/* ---- record -> JSON -------------------------------------------------------------------------- */

/* The upstream-shaped "data" object of an event (webhook body encoding): new reference. */
/* The upstream-shaped "data" of ev (and, when sr is not NULL, its "statusrelay" object) as
 * the webhook body has them. New references or NULL. */
static json_t *event_parts(const struct status_event *ev, json_t **sr)
{
    size_t len;
    char *text = proto_event_webhook_body(ev, &len);
    if (sr != NULL)
        *sr = NULL;
    if (text == NULL)
        return NULL;
    json_t *root = json_loadb(text, len, 0, NULL);
    free(text);
    json_t *data = json_incref(json_object_get(root, "data"));
    if (sr != NULL)
        *sr = json_incref(json_object_get(root, "statusrelay"));
    json_decref(root);
    return data;
}

static json_t *event_data(const struct status_event *ev)
{
    return event_parts(ev, NULL);
}

static int decode_record(const char *buf, size_t len, struct status_event *ev, const char *what)
{
    struct proto_err perr;
    memset(&perr, 0, sizeof(perr));
    int rc = proto_event_from_record(buf, len, ev, &perr);
    if (rc != 0)
        log_warn("stored record unreadable", "what=%s err=%s field=%s", what, proto_strerror(rc),
                 perr.field);
    return rc;
}

static const redisReply *field_of(const redisReply *arr, int i)
{
    if (arr == NULL || arr->type != REDIS_REPLY_ARRAY || (size_t)i >= arr->elements)
        return NULL;
    const redisReply *r = arr->element[i];
    return r != NULL && r->type == REDIS_REPLY_STRING ? r : NULL;
}

static json_t *copy_or(json_t *data, const char *k, json_t *dflt)
{
    json_t *v = data != NULL ? json_object_get(data, k) : NULL;
    if (v != NULL) {
        json_decref(dflt);
        return json_incref(v);
    }
    return dflt;
}

static json_t *num_or_null(const redisReply *r)
{
    if (r == NULL)
        return json_null();
    char *end;
    long long v = strtoll(r->str, &end, 10);
    return end == r->str ? json_null() : json_integer(v);
}

/* The pinned REST shape of one request from its hash fields (an HMGET-like array in
 * requests_read.lua order). Returns a new object, NULL when the request does not exist. */
static json_t *request_json(const char *id, const redisReply *f)
{
    int any = 0;
    for (int i = 0; i < RF_COUNT; i++)
        if (field_of(f, i) != NULL)
            any = 1;
    if (!any)
        return NULL;
    const redisReply *rec = field_of(f, RF_REC), *seq = field_of(f, RF_SEQ),
                     *st = field_of(f, RF_STATUS), *meta = field_of(f, RF_META),
                     *first = field_of(f, RF_FIRST), *trk = field_of(f, RF_TRK),
                     *src = field_of(f, RF_SRC), *watch = field_of(f, RF_WATCH),
                     *wu = field_of(f, RF_WU);
    json_t *data = NULL, *reorg = NULL;
    if (rec != NULL) {
        struct status_event ev;
        status_event_init(&ev);
        if (decode_record(rec->str, rec->len, &ev, id) == 0)
            data = event_parts(&ev, &reorg); /* reorg: the statusrelay object */
        status_event_cleanup(&ev);
    }
    json_t *o = json_object();
    if (o == NULL) {
        json_decref(data);
        json_decref(reorg);
        return NULL;
    }
    json_t *metadata = meta != NULL ? json_loadb(meta->str, meta->len, 0, NULL) : NULL;
    json_t *seqv = num_or_null(seq);
    if (json_is_null(seqv)) {
        json_decref(seqv);
        seqv = json_integer(0);
    }
    json_object_set_new(o, "requestId", json_string(id));
    json_object_set_new(
        o, "status",
        copy_or(data, "status", st != NULL ? json_stringn(st->str, st->len) : json_null()));
    json_object_set_new(o, "updatedAt", copy_or(data, "updatedAt", json_null()));
    json_object_set_new(o, "seq", seqv);
    json_object_set_new(o, "originChainId", copy_or(data, "originChainId", json_null()));
    json_object_set_new(o, "destinationChainId", copy_or(data, "destinationChainId", json_null()));
    json_object_set_new(o, "inTxHashes", copy_or(data, "inTxHashes", json_array()));
    json_object_set_new(o, "txHashes", copy_or(data, "txHashes", json_array()));
    json_object_set_new(o, "failReason", copy_or(data, "failReason", json_null()));
    json_object_set_new(o, "refundFailReason", copy_or(data, "refundFailReason", json_null()));
    json_object_set_new(o, "details", copy_or(data, "details", json_null()));
    json_object_set_new(o, "depositAddress", copy_or(data, "depositAddress", json_null()));
    json_object_set_new(o, "metadata", metadata != NULL ? metadata : json_null());
    json_object_set_new(o, "tracked",
                        json_boolean(trk != NULL && trk->len == 1 && trk->str[0] == '1'));
    json_object_set_new(o, "firstSeenAt", num_or_null(first));
    json_object_set_new(o, "lastSource",
                        src != NULL ? json_stringn(src->str, src->len) : json_null());
    /* no phase: written before watches existed (watch_migrate.lua converts the tracked
     * unfinished ones at start-up), so ended */
    json_object_set_new(o, "watch",
                        json_string(watch != NULL && watch->len > 0 ? watch->str : "ended"));
    json_t *wuv = num_or_null(wu);
    json_object_set_new(o, "watchUntil", wuv != NULL ? wuv : json_null());
    json_object_set_new(o, "reorg", copy_or(reorg, "reorg", json_null()));
    json_decref(data);
    json_decref(reorg);
    return o;
}

/* One event of the event stream (an XRANGE entry {id, {field, value, ...}}). NULL when the entry is
 * unreadable (logged) or on allocation failure. */
static json_t *event_json(const redisReply *entry)
{
    if (entry == NULL || entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 ||
        entry->element[0]->type != REDIS_REPLY_STRING ||
        entry->element[1]->type != REDIS_REPLY_ARRAY)
        return NULL;
    const redisReply *sid = entry->element[0], *kv = entry->element[1], *rec = NULL;
    for (size_t i = 0; i + 1 < kv->elements; i += 2)
        if (kv->element[i]->type == REDIS_REPLY_STRING && strcmp(kv->element[i]->str, "rec") == 0 &&
            kv->element[i + 1]->type == REDIS_REPLY_STRING)
            rec = kv->element[i + 1];
    if (rec == NULL)
        return NULL;
    struct status_event ev;
    status_event_init(&ev);
    if (decode_record(rec->str, rec->len, &ev, sid->str) != 0) {
        status_event_cleanup(&ev);
        return NULL;
    }
    json_t *o = json_object();
    if (o != NULL) {
        json_object_set_new(o, "streamId", json_stringn(sid->str, sid->len));
        json_object_set_new(o, "eventId", json_string(ev.event_id));
        json_object_set_new(o, "requestId",
                            ev.request_id ? json_string(ev.request_id) : json_null());
        json_object_set_new(o, "seq", json_integer((json_int_t)ev.seq));
        json_object_set_new(o, "status", ev.status ? json_string(ev.status) : json_null());
        json_object_set_new(o, "previousStatus",
                            ev.prev_status ? json_string(ev.prev_status) : json_null());
        json_object_set_new(o, "source", json_string(proto_source_name(ev.source)));
        json_object_set_new(o, "createdAt", json_integer(ev.created_at));
        json_t *data = event_data(&ev);
        json_object_set_new(o, "data", data != NULL ? data : json_null());
    }
    status_event_cleanup(&ev);
    return o;
}

/* ---- GET /healthz, /readyz, /metrics --------------------------------------------------------- */

static void h_healthz(struct ctx *x)
{
    reply_json(x, 200, json_pack("{s:s}", "status", "ok"));
}

/* Ready = Redis answers and the settings are valid (they are: config_load refused to start
 * otherwise; a Redis setting we refuse shows as store_fatal). Not ready while shutting down. The
 * upstream websocket and the lease are reported, never required. */
static void h_readyz(struct ctx *x)
{
    struct core *c = x->api->c;
    int redis = store_ready(c->store);
    int ready = redis && store_fatal(c->store) == NULL && !c->shutting_down;
    const char *ws = c->upstream != NULL ? upstream_state_name(c->upstream) : "down";
    json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "status", ready ? "ready" : "not_ready", "redis",
                          redis ? "up" : "down", "upstreamWebsocket", ws, "lease",
                          strcmp(ws, "standby") == 0 ? "standby" : "held");
    reply_json(x, ready ? 200 : 503, o);
}

static void h_metrics(struct ctx *x)
{
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) {
        reply_oom(x);
        return;
    }
    metrics_render(x->api->c, b);
    send_evbuffer(x, 200, CT_PROM, b);
    evbuffer_free(b);
}

/* ---- POST /v1/requests ----------------------------------------------------------------------- */

static void on_tracked(void *arg, const char *err, size_t created)
{
    struct ctx *x = arg;
    if (err != NULL) {
        reply_unavailable(x, "tracking not stored");
        return;
    }
    reply_json(
        x, created > 0 ? 201 : 200,
        json_pack("{s:I,s:I}", "tracked", (json_int_t)x->ntracked, "created", (json_int_t)created));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void h_track(struct ctx *x)
{
    json_t *root = parse_body(x);
    if (root == NULL)
        return;
    const char **ids = NULL;
    char *meta_text = NULL;
    size_t n = 0;
    if (json_is_array(root)) {
        reply_error(x, 400, "invalid_body", NULL,
                    "a bare JSON array is not accepted: send {\"requestIds\": [...]}");
        goto out;
    }
    if (!json_is_object(root)) {
        reply_error(x, 400, "invalid_body", NULL,
                    "body must be a JSON object with \"requestId\" or \"requestIds\"");
        goto out;
    }
    json_t *one = json_object_get(root, "requestId"), *many = json_object_get(root, "requestIds"),
           *meta = json_object_get(root, "metadata");
    if ((one == NULL) == (many == NULL)) {
        reply_error(x, 400, "invalid_body", NULL,
                    "give exactly one of \"requestId\" (string) or \"requestIds\" (array)");
        goto out;
    }
    if (one != NULL) {
        if (!json_is_string(one) ||
            !proto_request_id_valid(json_string_value(one), json_string_length(one))) {
            reply_error(x, 400, "invalid_request_id", "requestId",
                        "requestId must be a string of 1..%d characters of A-Z a-z "
                        "0-9 _ : . -",
                        PROTO_MAX_ID);
            goto out;
        }
        ids = xcalloc(1, sizeof(*ids));
        ids[n++] = json_string_value(one);
    } else {
        if (!json_is_array(many)) {
            reply_error(x, 400, "invalid_body", "requestIds", "requestIds must be an array");
            goto out;
        }
        size_t total = json_array_size(many);
        if (total == 0 || total > TRACK_MAX_IDS) {
            reply_error(x, 400, "invalid_body", "requestIds",
                        "requestIds must hold 1..%d ids (got %zu)", TRACK_MAX_IDS, total);
            goto out;
        }
        ids = xcalloc(total, sizeof(*ids));
        for (size_t i = 0; i < total; i++) {
            json_t *v = json_array_get(many, i);
            if (!json_is_string(v) ||
                !proto_request_id_valid(json_string_value(v), json_string_length(v))) {
                char field[32];
                snprintf(field, sizeof(field), "requestIds[%zu]", i);
                reply_error(x, 400, "invalid_request_id", field,
                            "%s is not a valid request id (a string of 1..%d characters of "
                            "A-Z a-z 0-9 _ : . -)",
                            field, PROTO_MAX_ID);
                goto out;
            }
            ids[n++] = json_string_value(v);
        }
        /* distinct ids: "tracked" counts each once */
        qsort(ids, n, sizeof(*ids), cmp_str);
        size_t u = 0;
        for (size_t i = 0; i < n; i++)
            if (u == 0 || strcmp(ids[u - 1], ids[i]) != 0)
                ids[u++] = ids[i];
        n = u;
    }
    if (meta != NULL && !json_is_null(meta)) {
        if (!json_is_object(meta)) {
            reply_error(x, 400, "invalid_metadata", "metadata", "metadata must be a JSON object");
            goto out;
        }
        meta_text = json_dumps(meta, JSON_COMPACT);
        if (meta_text == NULL) {
            reply_oom(x);
            goto out;
        }
        if (strlen(meta_text) > METADATA_MAX) {
            reply_error(x, 400, "invalid_metadata", "metadata",
                        "metadata must be at most %d bytes of compact JSON (got %zu)", METADATA_MAX,
                        strlen(meta_text));
            goto out;
        }
    }
    x->ntracked = n;
    if (track_requests(x->api->c, ids, n, meta_text, on_tracked, x) != 0)
        reply_unavailable(x, "cannot track");
out:
    free(meta_text);
    free(ids);
    json_decref(root);
}

/* ---- GET /v1/requests/{id} ------------------------------------------------------------------- */

static void on_get(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (err != NULL) {
        reply_unavailable(x, "cannot read");
        return;
    }
    json_t *o = request_json(x->id, r);
    if (o == NULL) {
        reply_error(x, 404, "not_found", NULL, "request %s is not known", x->id);
        return;
    }
    reply_json(x, 200, o);
}

static void h_get(struct ctx *x)
{
    if (take_id(x, x->param[0], x->param_len[0], "requestId") != 0)
        return;
    struct core *c = x->api->c;
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag(c->store), "req", x->id, NULL);
    if (store_cmd(c->store, on_get, x, "HMGET %s rec seq status meta first trk src watch wu", k) != 0)
        reply_unavailable(x, "cannot read");
}

/* ---- DELETE /v1/requests/{id} ---------------------------------------------------------------- */

static void on_untracked(void *arg, const char *err, int found)
{
    struct ctx *x = arg;
    if (err != NULL)
        reply_unavailable(x, "cannot untrack");
    else if (!found)
        reply_error(x, 404, "not_found", NULL, "request %s is not known", x->id);
    else
        reply_empty(x, 204);
}

static void h_untrack(struct ctx *x)
{
    if (take_id(x, x->param[0], x->param_len[0], "requestId") != 0)
        return;
    if (untrack_request(x->api->c, x->id, on_untracked, x) != 0)
        reply_unavailable(x, "cannot untrack");
}

/* ---- GET /v1/requests?status=&stuck=&cursor=&limit= ------------------------------------------------- */

static void on_list_read(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements != x->nids) {
        reply_unavailable(x, "cannot list");
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < x->nids; i++) {
        json_t *o = request_json(x->ids[i], r->element[i]);
        const char *st = o != NULL ? json_string_value(json_object_get(o, "status")) : NULL;
        if (o != NULL && x->only_status[0] != '\0' &&
            (st == NULL || strcmp(st, x->only_status) != 0)) {
            json_decref(o); /* stuck list filtered by status: another status */
            continue;
        }
        if (o != NULL) /* NULL: the request vanished between the two reads */
            json_array_append_new(list, o);
    }
    json_t *cur = x->next_cursor != NULL ? json_string(x->next_cursor) : json_null();
    reply_json(x, 200, json_pack("{s:o,s:o}", "requests", list, "cursor", cur));
}

static void on_list_page(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (x->req == NULL || x->api == NULL) { /* gone: skip the second read */
        ctx_free(x);
        return;
    }
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        reply_unavailable(x, "cannot list");
        return;
    }
    size_t n = r->elements / 2;
    if (n > (size_t)x->limit) {
        n = (size_t)x->limit;
        const redisReply *id = r->element[2 * n - 2], *score = r->element[2 * n - 1];
        if (id->type == REDIS_REPLY_STRING && score->type == REDIS_REPLY_STRING)
            x->next_cursor = cursor_encode(score->str, id->str);
    }
    if (n == 0) {
        reply_json(x, 200, json_pack("{s:[],s:n}", "requests", "cursor"));
        return;
    }
    struct core *c = x->api->c;
    x->ids = xcalloc(n, sizeof(char *));
    const char **argv = xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        const redisReply *id = r->element[2 * i];
        x->ids[x->nids++] = xstrndup(id->type == REDIS_REPLY_STRING ? id->str : "",
                                     id->type == REDIS_REPLY_STRING ? id->len : 0);
        char *k = xmalloc(KEY_MAX);
        key_build(k, KEY_MAX, store_tag(c->store), "req", x->ids[i], NULL);
        argv[i] = k;
    }
    int rc = store_eval(c->store, &x->api->read_sc, on_list_read, x, (int)n, (int)n, argv, NULL);
    for (size_t i = 0; i < n; i++)
        free((char *)argv[i]);
    free(argv);
    if (rc != 0)
        reply_unavailable(x, "cannot list");
}

static int status_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > PROTO_MAX_STATUS)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

static void h_list(struct ctx *x)
{
    if (parse_limit(x, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX) != 0)
        return;
    const char *status = query_get(x, "status"), *cursor = query_get(x, "cursor");
    char score[24] = "", cid[PROTO_MAX_ID + 1] = "";
    if (status != NULL && status[0] != '\0' && !status_name_valid(status)) {
        reply_error(x, 400, "invalid_parameter", "status",
                    "status must be 1..%d characters of A-Z a-z 0-9 _ -", PROTO_MAX_STATUS);
        return;
    }
    if (cursor != NULL && cursor[0] != '\0' &&
        cursor_decode(cursor, score, sizeof(score), cid, sizeof(cid)) != 0) {
        reply_error(x, 400, "invalid_cursor", "cursor", "cursor is not one this API returned");
        return;
    }
    const char *stuck = query_get(x, "stuck");
    if (stuck != NULL && strcmp(stuck, "true") != 0 && strcmp(stuck, "false") != 0) {
        reply_error(x, 400, "invalid_parameter", "stuck", "stuck must be true or false");
        return;
    }
    struct core *c = x->api->c;
    char k[KEY_MAX], want[16], max[24] = "";
    if (stuck != NULL && strcmp(stuck, "true") == 0) {
        /* active, not waiting, status unchanged for STUCK_AFTER ({P}:act by last change) */
        key_build(k, sizeof(k), store_tag(c->store), "act", NULL, NULL);
        snprintf(max, sizeof(max), "%lld", (long long)(wall_ms() - c->cfg->stuck_after_ms - 1));
        if (status != NULL)
            snprintf(x->only_status, sizeof(x->only_status), "%s", status);
    } else if (status != NULL && status[0] != '\0') {
        key_build(k, sizeof(k), store_tag(c->store), "st", status, NULL);
    } else {
        key_build(k, sizeof(k), store_tag(c->store), "all", NULL, NULL);
    }
    snprintf(want, sizeof(want), "%d", x->limit + 1);
    const char *argv[] = {k, score, cid, want, max};
    if (store_eval(c->store, &x->api->page_sc, on_list_page, x, 1, 5, argv, NULL) != 0)
        reply_unavailable(x, "cannot list");
}

/* ---- GET /v1/events?after=&requestId=&limit= ------------------------------------------------- */

static void on_events(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        reply_unavailable(x, "cannot read events");
        return;
    }
    json_t *list = json_array();
    const char *last = NULL;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_ARRAY && e->elements == 2 &&
            e->element[0]->type == REDIS_REPLY_STRING)
            last = e->element[0]->str; /* an unreadable entry is skipped, not re-read */
        json_t *o = event_json(e);
        if (o != NULL)
            json_array_append_new(list, o);
    }
    json_t *cur = last != NULL          ? json_string(last)
                  : x->after[0] != '\0' ? json_string(x->after)
                                        : json_null();
    reply_json(x, 200, json_pack("{s:o,s:o}", "events", list, "cursor", cur));
}

/* after=$: nothing now, the cursor is the newest stream id (tail from here). */
static void on_events_last(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        reply_unavailable(x, "cannot read events");
        return;
    }
    const char *last = "0-0";
    if (r->elements > 0 && r->element[0]->type == REDIS_REPLY_ARRAY &&
        r->element[0]->elements >= 1 && r->element[0]->element[0]->type == REDIS_REPLY_STRING)
        last = r->element[0]->element[0]->str;
    reply_json(x, 200, json_pack("{s:[],s:s}", "events", "cursor", last));
}

static void h_events(struct ctx *x)
{
    if (parse_limit(x, EVENTS_LIMIT_DEFAULT, EVENTS_LIMIT_MAX) != 0)
        return;
    const char *after = query_get(x, "after"), *rid = query_get(x, "requestId");
    if (rid != NULL && take_id(x, rid, strlen(rid), "requestId") != 0)
        return;
    uint64_t ms = 0, seq = 0;
    int has_seq = 0, tail = after != NULL && strcmp(after, "$") == 0;
    if (after != NULL && after[0] != '\0' && !tail) {
        if (parse_stream_id(after, &ms, &seq, &has_seq) != 0) {
            reply_error(x, 400, "invalid_parameter", "after",
                        "after must be a streamId (\"<ms>-<seq>\"), a unix ms "
                        "timestamp or \"$\"");
            return;
        }
        if (!has_seq) /* a bare ms: everything of that millisecond is "before" */
            seq = UINT64_MAX;
        snprintf(x->after, sizeof(x->after), "%llu-%llu", (unsigned long long)ms,
                 (unsigned long long)seq);
    }
    struct core *c = x->api->c;
    const char *tag = store_tag(c->store);
    char k_ev[KEY_MAX], cnt[16];
    key_build(k_ev, sizeof(k_ev), tag, "events", NULL, NULL);
    snprintf(cnt, sizeof(cnt), "%d", x->limit);
    int rc;
    if (tail) {
        rc = store_cmd(c->store, on_events_last, x, "XREVRANGE %s + - COUNT 1", k_ev);
    } else if (rid != NULL) {
        char k_tl[KEY_MAX], a_ms[24] = "", a_seq[24] = "0";
        key_build(k_tl, sizeof(k_tl), tag, "tl", x->id, NULL);
        if (x->after[0] != '\0') {
            snprintf(a_ms, sizeof(a_ms), "%llu", (unsigned long long)ms);
            snprintf(a_seq, sizeof(a_seq), "%llu", (unsigned long long)seq);
        }
        const char *argv[] = {k_tl, k_ev, a_ms, a_seq, cnt};
        rc = store_eval(c->store, &x->api->events_sc, on_events, x, 2, 5, argv, NULL);
    } else {
        /* exclusive start without "(" (Redis < 6.2): the successor of the cursor's id */
        char start[48] = "-";
        if (x->after[0] != '\0') {
            if (seq < UINT64_MAX)
                snprintf(start, sizeof(start), "%llu-%llu", (unsigned long long)ms,
                         (unsigned long long)seq + 1);
            else
                snprintf(start, sizeof(start), "%llu-0", (unsigned long long)ms + 1);
        }
        rc = store_cmd(c->store, on_events, x, "XRANGE %s %s + COUNT %s", k_ev, start, cnt);
    }
    if (rc != 0)
        reply_unavailable(x, "cannot read events");
}

/* ---- GET /intents/status/v3?requestId= ------------------------------------------------------- */

static void on_track_quiet(void *arg, const char *err, size_t created)
{
    /* best effort: the poller and the next miss retry; nothing to answer */
}

static void on_v3_fetched(void *arg, long status, const char *body, size_t len)
{
    struct ctx *x = arg;
    /* Track unless the upstream refused the id outright (4xx other than 429). The api may be gone
     * (shutdown): then nothing more is started. */
    int refused = status >= 400 && status < 500 && status != 429;
    if (x->api != NULL && !refused) {
        const char *ids[] = {x->id};
        track_requests(x->api->c, ids, 1, NULL, on_track_quiet, NULL);
    }
    if (status == 0) {
        if (x->req != NULL)
            evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", "1");
        reply_error(x, 503, "upstream_unavailable", NULL,
                    "request %s is not cached and the upstream could not be asked "
                    "now (call "
                    "budget spent or transport error); retry shortly",
                    x->id);
        return;
    }
    if (status < 200 || status > 599) {
        reply_error(x, 502, "upstream_error", NULL, "the upstream answered HTTP %ld", status);
        return;
    }
    json_t *probe = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
    if (probe == NULL) { /* not JSON (a proxy's HTML page?): our error shape */
        reply_error(x, status == 200 ? 502 : (int)status, "upstream_error", NULL,
                    "the upstream answered HTTP %ld without a JSON body", status);
        return;
    }
    json_decref(probe);
    send_body(x, (int)status, CT_JSON, body, len);
}

static void on_v3_cached(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (err != NULL) {
        reply_unavailable(x, "cannot read");
        return;
    }
    if (x->req == NULL || x->api == NULL) { /* gone: do not spend an upstream call */
        ctx_free(x);
        return;
    }
    if (r->type == REDIS_REPLY_STRING) {
        struct status_event ev;
        status_event_init(&ev);
        if (decode_record(r->str, r->len, &ev, x->id) == 0) {
            size_t len;
            char *body = proto_event_status_v3(&ev, &len);
            status_event_cleanup(&ev);
            if (body == NULL) {
                reply_oom(x);
                return;
            }
            send_body(x, 200, CT_JSON, body, len);
            free(body);
            return;
        }
        status_event_cleanup(&ev); /* unreadable: ask the upstream instead */
    }
    struct core *c = x->api->c;
    if (c->poller == NULL || poller_fetch_now(c->poller, x->id, on_v3_fetched, x) != 0)
        reply_unavailable(x, "cannot ask the upstream");
}

static void h_status_v3(struct ctx *x)
{
    x->upstream_shape = 1;
    const char *rid = query_get(x, "requestId");
    if (take_id(x, rid, rid != NULL ? strlen(rid) : 0, "requestId") != 0)
        return;
    struct core *c = x->api->c;
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag(c->store), "req", x->id, NULL);
    if (store_cmd(c->store, on_v3_cached, x, "HGET %s rec", k) != 0)
        reply_unavailable(x, "cannot read");
}

/* ---- POST /v1/ingest/upstream ---------------------------------------------------------------- */

enum { WI_OK = 0, WI_BAD_SIGNATURE, WI_STALE, WI_MALFORMED };

static void on_ingested(void *arg, const char *err, enum proto_verdict v,
                        const struct status_event *ev)
{
    struct ctx *x = arg;
    if (err != NULL) { /* nothing stored: the upstream retries */
        reply_unavailable(x, "observation not stored");
        return;
    }
    if (x->api != NULL)
        x->api->c->metrics.webhook_ingest[WI_OK]++;
    reply_json(x, 200, json_pack("{s:s}", "result", proto_verdict_name(v)));
}

static void h_ingest(struct ctx *x)
{
    struct api *a = x->api;
    struct core *c = a->c;
    if (a->ingest_key == NULL) {
        reply_error(x, 503, "not_configured", NULL,
                    "no upstream API key is configured (STATUSRELAY_UPSTREAM_API_KEY)");
        return;
    }
    struct evkeyvalq *h = evhttp_request_get_input_headers(x->req);
    const char *ts = evhttp_find_header(h, "X-Signature-Timestamp"),
               *sig = evhttp_find_header(h, "X-Signature-SHA256");
    if (ts == NULL || sig == NULL) {
        c->metrics.webhook_ingest[WI_BAD_SIGNATURE]++;
        reply_error(x, 401, "bad_signature", NULL,
                    "X-Signature-Timestamp and X-Signature-SHA256 are required");
        return;
    }
    int64_t tol_s = c->cfg->ingest_tolerance_ms / 1000;
    int rc = proto_upstream_verify(a->ingest_key, ts, sig, x->body != NULL ? x->body : "",
                                   x->body_len, wall_ms(), tol_s > 0 ? tol_s : 1);
    if (rc == PROTO_ESTALE) {
        c->metrics.webhook_ingest[WI_STALE]++;
        reply_error(x, 401, "stale_signature", NULL,
                    "X-Signature-Timestamp is outside the accepted window of %lld s",
                    (long long)(tol_s > 0 ? tol_s : 1));
        return;
    }
    if (rc != 0) {
        c->metrics.webhook_ingest[WI_BAD_SIGNATURE]++;
        reply_error(x, 401, "bad_signature", NULL, "the signature does not verify");
        return;
    }
    struct status_event ev;
    struct proto_err perr;
    memset(&perr, 0, sizeof(perr));
    rc =
        proto_normalize_webhook(x->body != NULL ? x->body : "", x->body_len, wall_ms(), &ev, &perr);
    if (rc == PROTO_EEVENT) { /* well-formed, an event we do not handle: acknowledge */
        status_event_cleanup(&ev);
        c->metrics.webhook_ingest[WI_OK]++;
        reply_json(x, 200, json_pack("{s:s}", "result", "ignored"));
        return;
    }
    if (rc != 0) {
        status_event_cleanup(&ev);
        c->metrics.webhook_ingest[WI_MALFORMED]++;
        ingest_rejected(c->ingest, PROTO_SRC_WEBHOOK);
        reply_error(x, 400, "invalid_body", perr.field, "%s: %s", proto_strerror(rc),
                    perr.msg[0] != '\0' ? perr.msg : "malformed upstream webhook");
        return;
    }
    /* takes a copy; the callback may run before ingest_submit returns */
    ingest_submit(c->ingest, &ev, 1, on_ingested, x);
    status_event_cleanup(&ev);
}

/* ---- webhook endpoints, deliveries, replay: adapter to relay/api/webhooks.c ------------- */

static const char *wh_query(void *ctx, const char *key)
{
    return query_get(ctx, key);
}

static void wh_reply_json(void *ctx, int code, json_t *body)
{
    reply_json(ctx, code, body);
}

static void wh_reply_error(void *ctx, int code, const char *ecode, const char *field,
                           const char *message)
{
    reply_error(ctx, code, ecode, field, "%s", message);
}

static void wh_reply_empty(void *ctx, int code)
{
    reply_empty(ctx, code);
}

static void h_webhooks(struct ctx *x)
{
    struct api_wh_req r = {
        .ctx = x,
        .c = x->api->c,
        .id = x->param[0],
        .id_len = x->param_len[0],
        .body = x->body,
        .body_len = x->body_len,
        .query = wh_query,
        .reply_json = wh_reply_json,
        .reply_error = wh_reply_error,
        .reply_empty = wh_reply_empty,
    };
    api_webhooks_handle((enum api_wh_route)x->route->arg, &r);
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static int authorized(struct api *a, struct evhttp_request *req)
{
    const char *tok = a->c->cfg->admin_token;
    if (tok == NULL || tok[0] == '\0')
        return 1;
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return 0;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strlen(h), m = strlen(tok);
    while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    return n == m && CRYPTO_memcmp(h, tok, m) == 0;
}

/* Split and percent-decode path segments ("/v1/requests/x" -> "v1", "requests", "x"; one trailing
 * slash is ignored). Returns the count, or -1 for a path no route can match (too many segments, not
 * absolute). segs[i] are malloc'd (caller frees), lens their decoded sizes (a decoded segment may
 * hold NUL bytes: lens is the truth). */
static int split_path(const char *path, char **segs, size_t *lens)
{
    if (path == NULL || path[0] == '\0')
        path = "/";
    if (path[0] != '/')
        return -1;
    size_t plen = strlen(path);
    if (plen > 1 && path[plen - 1] == '/')
        plen--;
    if (plen == 1)
        return 0;
    int n = 0;
    const char *p = path + 1, *end = path + plen;
    for (;;) {
        const char *q = memchr(p, '/', (size_t)(end - p));
        if (q == NULL)
            q = end;
        if (n == ROUTE_MAX_SEGS) {
            for (int i = 0; i < n; i++)
                free(segs[i]);
            return -1;
        }
        char *raw = xstrndup(p, (size_t)(q - p));
        size_t dl = 0;
        char *dec = evhttp_uridecode(raw, 0, &dl);
        free(raw);
        if (dec == NULL) {
            log_err("out of memory", "what=uridecode");
            abort();
        }
        segs[n] = dec;
        lens[n] = dl;
        n++;
        if (q == end)
            return n;
        p = q + 1;
    }
}

/* Does pattern match the segments? With x != NULL, the "{}" segments are handed over to x->param
 * (taken out of segs). */
static int route_match(const char *pattern, char **segs, size_t *lens, int nsegs, struct ctx *x)
{
    int i = 0, np = 0;
    const char *p = pattern;
    if (strcmp(pattern, "/") == 0)
        return nsegs == 0;
    while (*p == '/') {
        p++;
        const char *q = strchr(p, '/');
        size_t pl = q != NULL ? (size_t)(q - p) : strlen(p);
        if (i >= nsegs)
            return 0;
        if (pl == 2 && p[0] == '{' && p[1] == '}') {
            if (lens[i] == 0 || np >= ROUTE_MAX_PARAMS)
                return 0;
            if (x != NULL) {
                x->param[np] = segs[i];
                x->param_len[np] = lens[i];
                segs[i] = NULL;
            }
            np++;
        } else if (lens[i] != pl || memcmp(segs[i], p, pl) != 0) {
            return 0;
        }
        i++;
        p += pl;
    }
    return i == nsegs;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct api *a = arg;
    struct ctx *x = xcalloc(1, sizeof(*x));
    x->api = a;
    x->req = req;
    x->evcon = evhttp_request_get_connection(req);
    TAILQ_INIT(&x->query);
    x->next = a->pending;
    if (a->pending)
        a->pending->prev = x;
    a->pending = x;
    x->linked = 1;
    if (x->evcon != NULL)
        evhttp_connection_set_closecb(x->evcon, on_conn_close, a);

    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    x->head = m == EVHTTP_REQ_HEAD;
    if (x->head)
        m = EVHTTP_REQ_GET;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
    char *segs[ROUTE_MAX_SEGS] = {0};
    size_t lens[ROUTE_MAX_SEGS] = {0};
    int nsegs = uri != NULL ? split_path(path, segs, lens) : -1;

    const struct route *r = NULL;
    unsigned allow = 0;
    enum route_auth auth = AUTH_TOKEN;
    if (nsegs >= 0)
        for (size_t i = 0; i < ARRAY_LEN(routes); i++) {
            if (!route_match(routes[i].pattern, segs, lens, nsegs, NULL))
                continue;
            allow |= routes[i].method;
            if (routes[i].auth != AUTH_TOKEN)
                auth = routes[i].auth;
            if (r == NULL && routes[i].method == m)
                r = &routes[i];
        }
    if (r != NULL) {
        x->route = r;
        auth = r->auth;
        route_match(r->pattern, segs, lens, nsegs, x);
    }
    for (int i = 0; i < nsegs; i++)
        free(segs[i]);

    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(in);
    if (blen > API_BODY_MAX) {
        reply_error(x, 413, "body_too_large", NULL, "request bodies are limited to %d bytes",
                    API_BODY_MAX);
        return;
    }
    if (auth == AUTH_TOKEN && !authorized(a, req)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                          "Bearer realm=\"statusrelay\"");
        reply_error(x, 401, "unauthorized", NULL, "Authorization: Bearer <admin token> required");
        return;
    }
    if (nsegs < 0 || allow == 0) {
        reply_error(x, 404, "not_found", NULL, "no such endpoint");
        return;
    }
    if (r == NULL) {
        char list[96] = "";
        for (size_t i = 0; i < ARRAY_LEN(method_names); i++)
            if ((allow & method_names[i].m) ||
                (method_names[i].m == EVHTTP_REQ_HEAD && (allow & EVHTTP_REQ_GET))) {
                if (list[0] != '\0')
                    strncat(list, ", ", sizeof(list) - strlen(list) - 1);
                strncat(list, method_names[i].name, sizeof(list) - strlen(list) - 1);
            }
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", list);
        reply_error(x, 405, "method_not_allowed", NULL, "allowed: %s", list);
        return;
    }
    if (query != NULL &&
        (strstr(query, "%00") != NULL || evhttp_parse_query_str(query, &x->query) != 0)) {
        reply_error(x, 400, "invalid_parameter", NULL, "the query string is malformed");
        return;
    }
    if (blen > 0) {
        x->body = (const char *)evbuffer_pullup(in, -1);
        x->body_len = blen;
    }
    r->fn(x);
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

struct api *api_new(struct core *c)
{
    struct api *a = xcalloc(1, sizeof(*a));
    a->c = c;
    a->http = evhttp_new(c->base);
    if (a->http == NULL) {
        log_err("evhttp_new failed", "");
        abort();
    }
    evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_max_body_size(a->http, API_BODY_HARD_MAX);
    evhttp_set_max_headers_size(a->http, HTTP_MAX_HEADERS);
    evhttp_set_timeout(a->http, HTTP_TIMEOUT_S);
    evhttp_set_gencb(a->http, on_request, a);
    const char *key = c->cfg->upstream_api_key;
    if (key != NULL && key[0] != '\0') {
        a->ingest_key = proto_hmac_new((const unsigned char *)key, strlen(key));
        if (a->ingest_key == NULL) {
            log_err("out of memory", "what=ingest_hmac");
            abort();
        }
    }
    store_script_init(&a->page_sc, "requests_page");
    store_script_init(&a->read_sc, "requests_read");
    store_script_init(&a->events_sc, "events_by_request");
    return a;
}

int api_start(struct api *a)
{
    const char *listen = a->c->cfg->http_listen;
    char host[256];
    int port;
    if (parse_hostport(listen, host, sizeof(host), &port) != 0) {
        log_err("REST API cannot listen: bad address", "listen=%s", listen);
        return -1;
    }
    a->sock = evhttp_bind_socket_with_handle(a->http, host, (ev_uint16_t)port);
    if (a->sock == NULL) {
        int e = EVUTIL_SOCKET_ERROR();
        log_err("REST API cannot listen", "listen=%s err=\"%s\"", listen,
                e != 0 ? evutil_socket_error_to_string(e) : "bind failed");
        return -1;
    }
    log_info("REST API listening", "listen=%s auth=%s ingest=%s", listen,
             a->c->cfg->admin_token && a->c->cfg->admin_token[0] ? "token" : "none",
             a->ingest_key ? "on" : "off");
    return 0;
}

void api_stop_accepting(struct api *a)
{
    if (a == NULL || a->sock == NULL)
        return;
    evhttp_del_accept_socket(a->http, a->sock);
    a->sock = NULL;
}

void api_free(struct api *a)
{
    if (a == NULL)
        return;
    /* Requests still waiting complete later (store/poller callbacks): cut them loose first,
     * evhttp_free frees their evhttp requests. */
    for (struct ctx *x = a->pending, *n; x != NULL; x = n) {
        n = x->next;
        x->req = NULL;
        x->body = NULL;
        x->api = NULL;
        x->linked = 0;
        x->prev = x->next = NULL;
    }
    a->pending = NULL;
    evhttp_free(a->http);
    proto_hmac_free(a->ingest_key);
    free(a);
}
