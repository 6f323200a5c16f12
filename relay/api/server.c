/* server.c (api) - see server.h. The REST server on evhttp: setup and teardown, the request
 * lifetime, auth, body limit, query parsing, dispatch over the route table (routes.c), and the
 * replies and parsers every handler uses (internal.h). runs on: core thread.
 *
 * One struct ctx per HTTP request: created in on_request, finished by exactly one reply_* call
 * (which frees it). Handlers that wait for Redis or the upstream return and finish the ctx from
 * their callback. Every ctx sits in api->pending until it is finished, so that a connection
 * closing under it (api_on_conn_close) or api_free can mark it gone: ctx->req = NULL (the evhttp
 * request is freed by evhttp, or by api_on_conn_close when evhttp detached it) and, after
 * api_free, ctx->api = NULL. A gone ctx is freed by its callback without writing anything.
 *
 * The handlers live by resource: health.c, requests.c, events.c, compat.c, ingest.c, webhooks.c;
 * each file's opening comment lists its decisions (documented in README's API section). */
#include "relay/api/server.h"
#include "relay/api/internal.h"
#include "protocol/addr.h"
#include "protocol/proto.h"
#include "protocol/rest_req.h"
#include "protocol/sign.h"
#include "relay/common/cors.h"
#include "relay/common/log.h"
#include "relay/common/rate_table.h"
#include "relay/common/util.h"
#include "relay/config.h"
#include "relay/core.h"
#include "store/store.h"

#include <errno.h>
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

#define CORS_MAX_AGE "7200"    /* preflight cache, seconds (Chromium's own cap) */
#define ANON_MISS_SLOTS 4096   /* client addresses remembered by the anonymous miss limit */

/* Method names for the Allow header of a 405 answer, in the order they are listed. */
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

void api_ctx_free(struct ctx *x)
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

/* The connection is being freed (client gone, error, shutdown): its requests go with it.
 * libevent 2.1 (evhttp_connection_free) calls this first, then frees the requests still queued
 * on the connection. A request a handler holds (not yet answered) is not among them when the
 * connection failed on a timeout or EOF (a client gone, the gate's close, the request deadline):
 * evhttp_connection_incoming_fail unlinks it and sets its connection to NULL, and from then on
 * nobody but us holds it - evhttp would free it only when answered (evhttp_send on a request
 * without a connection frees it). So a request with no connection is freed here; one still on
 * the connection is evhttp's to free. Either way the ctx answers nothing (x->req = NULL). */
void api_on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct api *a = arg;
    api_listen_closed(a, evcon);     /* the connection caps (listen.c) */
    api_proxy_conn_closed(a, evcon); /* pass-through answers still being written (proxy.c) */
    for (struct ctx *x = a->pending; x != NULL; x = x->next)
        if (x->evcon == evcon) {
            if (x->req != NULL && evhttp_request_get_connection(x->req) == NULL)
                evhttp_request_free(x->req);
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

void api_send_body(struct ctx *x, int code, const char *ctype, const char *buf, size_t len)
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
    api_ctx_free(x);
}

void api_send_evbuffer(struct ctx *x, int code, const char *ctype, struct evbuffer *b)
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
    api_ctx_free(x);
}

void api_reply_oom(struct ctx *x)
{
    static const char body[] = "{\"message\":\"out of memory\",\"error\":{\"code\":\"internal\","
                               "\"message\":\"out of memory\"}}";
    api_send_body(x, 500, CT_JSON, body, sizeof(body) - 1);
}

/* Takes body (a new reference). */
void api_reply_json(struct ctx *x, int code, json_t *body)
{
    char *t = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (t == NULL) {
        api_reply_oom(x);
        return;
    }
    api_send_body(x, code, CT_JSON, t, strlen(t));
    free(t);
}

void api_reply_empty(struct ctx *x, int code)
{
    api_send_body(x, code, NULL, NULL, 0);
}

/* {"message","error":{"code","message"[,"field"]}}; on upstream-shaped routes also the upstream's
 * "errorCode" (code in upper case; invalid_parameter is INVALID_INPUT_PARAMETERS). field may be
 * NULL. */
void __attribute__((format(printf, 5, 6)))
api_reply_error(struct ctx *x, int code, const char *ecode, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *err = json_pack("{s:s,s:s}", "code", ecode, "message", msg);
    if (err != NULL && field != NULL && field[0] != '\0')
        json_object_set_new(err, "field", json_string(field));
    json_t *o = err != NULL ? json_pack("{s:s,s:o}", "message", msg, "error", err) : NULL;
    if (o != NULL && x->upstream_shape) {
        char up[64];
        size_t i = 0;
        if (strcmp(ecode, "invalid_parameter") == 0)
            ecode = "invalid_input_parameters"; /* the upstream's name for it */
        for (; ecode[i] != '\0' && i < sizeof(up) - 1; i++)
            up[i] = (char)(ecode[i] >= 'a' && ecode[i] <= 'z' ? ecode[i] - 'a' + 'A' : ecode[i]);
        up[i] = '\0';
        json_object_set_new(o, "errorCode", json_string(up));
    }
    api_reply_json(x, code, o);
}

void api_reply_unavailable(struct ctx *x, const char *what)
{
    if (x->req != NULL)
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", "1");
    api_reply_error(x, 503, "store_unavailable", NULL, "%s: Redis is unavailable, retry shortly",
                    what);
}

/* ---- small parsers --------------------------------------------------------------------------- */

const char *api_query_get(struct ctx *x, const char *k)
{
    return evhttp_find_header(&x->query, k);
}

/* Parse the "limit" query parameter: default def, values above max clamped to max. Returns 0, or -1
 * after answering 400. */
int api_parse_limit(struct ctx *x, int def, int max)
{
    const char *s = api_query_get(x, "limit");
    x->limit = def;
    if (s == NULL || s[0] == '\0')
        return 0;
    if (proto_rest_limit(s, def, max, &x->limit) != 0) {
        api_reply_error(x, 400, "invalid_parameter", "limit",
                        "limit must be a positive integer (at most %d)", max);
        return -1;
    }
    return 0;
}

/* Copy a request id (path parameter or query value of length len) into x->id. Returns 0, or -1
 * after answering 400. */
int api_take_id(struct ctx *x, const char *s, size_t len, const char *field)
{
    if (s == NULL || len == 0) {
        api_reply_error(x, 400, "invalid_request_id", field, "%s is required", field);
        return -1;
    }
    if (!proto_request_id_valid(s, len) || len > PROTO_MAX_ID) {
        api_reply_error(x, 400, "invalid_request_id", field,
                        "%s must be 1..%d characters of A-Z a-z 0-9 _ : . -", field, PROTO_MAX_ID);
        return -1;
    }
    memcpy(x->id, s, len);
    x->id[len] = '\0';
    return 0;
}

/* Parse the request body as JSON. Returns a new reference, or NULL after answering 400. */
json_t *api_parse_body(struct ctx *x)
{
    if (x->body_len == 0) {
        api_reply_error(x, 400, "invalid_body", NULL, "a JSON body is required");
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
        api_reply_error(x, 400, "invalid_json", NULL,
                        "body is not valid JSON: %s (line %d, column %d)", clean, je.line,
                        je.column);
        return NULL;
    }
    return root;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static int authorized_in(struct api *a, struct evkeyvalq *in)
{
    const char *tok = a->c->cfg->admin_token;
    if (tok == NULL || tok[0] == '\0')
        return 1;
    const char *h = evhttp_find_header(in, "Authorization");
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

static int authorized(struct api *a, struct evhttp_request *req)
{
    return authorized_in(a, evhttp_request_get_input_headers(req));
}

/* A status-read caller proved who it is (issue 22; otherwise it is anonymous, compat.c): with
 * an admin token set, by presenting it; without one, by being a tool on this machine - a
 * loopback peer whose request carries no Origin (any web page can make a browser send a GET
 * to loopback, but not without its Origin). */
static int read_caller_proven(struct api *a, struct ctx *x, const char *origin)
{
    const char *tok = a->c->cfg->admin_token;
    if (tok != NULL && tok[0] != '\0')
        return authorized(a, x->req);
    /* the client address: behind a trusted proxy (a local nginx: a loopback peer) the
     * forwarded client's, which is on loopback only when the proxy says so */
    static const uint8_t lo6[16] = {[15] = 1};
    const struct proto_ip *ip = &x->client;
    int loopback = (ip->family == AF_INET && ip->a[0] == 127) ||
                   (ip->family == AF_INET6 && memcmp(ip->a, lo6, sizeof(lo6)) == 0);
    return origin == NULL && loopback;
}

/* The methods of allow as an Allow header value ("GET, HEAD, POST"); HEAD comes with GET, and
 * OPTIONS is listed when options is set (a path that answers CORS preflights). */
static void method_list(unsigned allow, int options, char *list, size_t n)
{
    list[0] = '\0';
    for (size_t i = 0; i < ARRAY_LEN(method_names); i++)
        if ((allow & method_names[i].m) ||
            (method_names[i].m == EVHTTP_REQ_HEAD && (allow & EVHTTP_REQ_GET)) ||
            (method_names[i].m == EVHTTP_REQ_OPTIONS && options)) {
            if (list[0] != '\0')
                strncat(list, ", ", n - strlen(list) - 1);
            strncat(list, method_names[i].name, n - strlen(list) - 1);
        }
}

/* Answer an OPTIONS request on a path whose CORS setting lists origins: 204 with Allow and, for
 * a preflight from an allowed origin, the Access-Control-* answer (the requested headers are
 * echoed back when they are plain header names). A preflight from another origin is 403. acao:
 * the Access-Control-Allow-Origin value for this request (already added), or NULL. */
static void answer_options(struct ctx *x, unsigned allow, const char *origin, const char *acao)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(x->req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(x->req);
    char list[96];
    method_list(allow, 1, list, sizeof(list));
    evhttp_add_header(out, "Allow", list);
    const char *rm = evhttp_find_header(in, "Access-Control-Request-Method");
    if (origin == NULL || rm == NULL) { /* a plain OPTIONS, not a preflight */
        api_reply_empty(x, 204);
        return;
    }
    evhttp_add_header(out, "Vary", "Origin, Access-Control-Request-Method, "
                                   "Access-Control-Request-Headers");
    if (acao == NULL) {
        api_reply_error(x, 403, "forbidden_origin", NULL, /* the origin is not echoed: any bytes */
                        "cross-origin requests from this origin are not allowed on this path");
        return;
    }
    const char *rh = evhttp_find_header(in, "Access-Control-Request-Headers");
    evhttp_add_header(out, "Access-Control-Allow-Methods", list);
    if (rh != NULL && rh[0] != '\0' && cors_headers_ok(rh))
        evhttp_add_header(out, "Access-Control-Allow-Headers", rh);
    evhttp_add_header(out, "Access-Control-Max-Age", CORS_MAX_AGE);
    api_reply_empty(x, 204);
}

/* DNS rebinding: a page of a name that resolves to 127.0.0.1 is "same-origin" with us and
 * could read every answer. Without an admin token (the API is open on loopback), a request
 * must name us: a loopback Host (any spelling proto_listen_is_loopback takes, any port) or a
 * name in STATUSRELAY_ALLOWED_HOSTS. With a token, the token protects. */
static int host_allowed(const struct config *cfg, const char *host)
{
    if ((cfg->admin_token != NULL && cfg->admin_token[0] != '\0') || host == NULL)
        return 1;
    return proto_host_names_relay(host, cfg->allowed_hosts);
}

/* The request's Host, or a value no Host rule accepts when it has several (ambiguous: which
 * one did a proxy in front check?); NULL when it has none. */
static const char *request_host(struct evkeyvalq *in)
{
    static const char several[] = "(several Host headers)";
    const char *host = NULL;
    for (struct evkeyval *kv = TAILQ_FIRST(in); kv != NULL; kv = TAILQ_NEXT(kv, next))
        if (strcasecmp(kv->key, "Host") == 0) {
            if (host != NULL)
                return several;
            host = kv->value;
        }
    return host;
}

/* 1 when a Content-Type value is application/json (any case, parameters allowed). */
static int json_media_type(const char *ct)
{
    static const char want[] = "application/json";
    if (ct == NULL)
        return 0;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, want, sizeof(want) - 1) != 0)
        return 0;
    ct += sizeof(want) - 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

static enum evhttp_cmd_type method_of(const char *m, size_t n)
{
    for (size_t i = 0; i < ARRAY_LEN(method_names); i++)
        if (strlen(method_names[i].name) == n && memcmp(method_names[i].name, m, n) == 0)
            return method_names[i].m;
    return 0;
}

/* The checks of on_request that need no body, in its order, on a head the gate parsed. */
static int64_t body_cap(struct api *a, enum evhttp_cmd_type m, const char *path,
                        struct evkeyvalq *in)
{
    const struct config *cfg = a->c->cfg;
    struct proto_rest_seg segs[PROTO_REST_SEGS_MAX];
    size_t plen = path != NULL ? strlen(path) : 0;
    char *segbuf = xmalloc(plen + 1);
    int nsegs = proto_rest_path_split(path != NULL ? path : "", plen, segbuf, plen + 1, segs,
                                      PROTO_REST_SEGS_MAX);
    const struct route *r = NULL;
    unsigned allow = 0;
    int read_path = 0;
    if (m == EVHTTP_REQ_HEAD)
        m = EVHTTP_REQ_GET;
    for (size_t i = 0; nsegs >= 0 && i < api_routes_len; i++) {
        if (!proto_rest_route_match(api_routes[i].pattern, segs, nsegs, NULL, ROUTE_MAX_PARAMS))
            continue;
        allow |= api_routes[i].method;
        read_path |= api_routes[i].auth == AUTH_READ;
        if (r == NULL && api_routes[i].method == m)
            r = &api_routes[i];
    }
    free(segbuf);
    if (nsegs < 0 || allow == 0) /* pass-through: the larger cap only with the admin token */
        return path == NULL || !api_proxy_wants(a, path) ? -1
               : cfg->admin_token != NULL && cfg->admin_token[0] != '\0' && authorized_in(a, in)
                   ? API_BODY_MAX
                   : API_BODY_ANON_MAX;
    if (r == NULL || !host_allowed(cfg, request_host(in)))
        return -1;
    const char *origin = evhttp_find_header(in, "Origin");
    const char *cors = read_path ? cfg->cors_origins : cfg->admin_cors_origins;
    if (r->auth == AUTH_TOKEN && m != EVHTTP_REQ_GET && origin != NULL &&
        cors_allow_origin(cors, origin) == NULL)
        return -1;
    if ((r->auth == AUTH_TOKEN || (r->auth == AUTH_READ && cfg->status_require_token)) &&
        !authorized_in(a, in))
        return -1;
    if (r->auth == AUTH_TOKEN &&
        (m == EVHTTP_REQ_POST || m == EVHTTP_REQ_PUT || m == EVHTTP_REQ_PATCH) &&
        !json_media_type(evhttp_find_header(in, "Content-Type")))
        return -1;
    return r->auth == AUTH_TOKEN ? API_BODY_MAX : API_BODY_ANON_MAX;
}

int64_t api_gate_body_cap(struct api *a, const struct proto_rest_head *h)
{
    struct evkeyvalq in;
    TAILQ_INIT(&in);
    char *target = xstrndup(h->target, h->target_len);
    struct evhttp_uri *uri = evhttp_uri_parse_with_flags(target, EVHTTP_URI_NONCONFORMANT);
    int64_t cap = -1;
    for (size_t i = 0; i < h->nhdr; i++) {
        char *k = xstrndup(h->hdr[i].name, h->hdr[i].name_len);
        char *v = xstrndup(h->hdr[i].value, h->hdr[i].value_len);
        evhttp_add_header(&in, k, v); /* copies; refuses what evhttp would refuse */
        free(k);
        free(v);
    }
    if (uri != NULL)
        cap = body_cap(a, method_of(h->method, h->method_len), evhttp_uri_get_path(uri), &in);
    if (uri != NULL)
        evhttp_uri_free(uri);
    evhttp_clear_headers(&in);
    free(target);
    return cap;
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
        evhttp_connection_set_closecb(x->evcon, api_on_conn_close, a);
    api_client_addr(a, req, &x->client); /* the peer, or a trusted proxy's forwarded client */

    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    x->head = m == EVHTTP_REQ_HEAD;
    if (x->head)
        m = EVHTTP_REQ_GET;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
    struct proto_rest_seg segs[PROTO_REST_SEGS_MAX];
    size_t plen = path != NULL ? strlen(path) : 0;
    char *segbuf = xmalloc(plen + 1);
    int nsegs = uri != NULL ? proto_rest_path_split(path != NULL ? path : "", plen, segbuf,
                                                    plen + 1, segs, PROTO_REST_SEGS_MAX)
                            : -1;

    const struct route *r = NULL;
    unsigned allow = 0;
    enum route_auth auth = AUTH_TOKEN;
    int read_path = 0; /* an upstream-compatible status read (AUTH_READ) */
    if (nsegs >= 0)
        for (size_t i = 0; i < api_routes_len; i++) {
            if (!proto_rest_route_match(api_routes[i].pattern, segs, nsegs, NULL, ROUTE_MAX_PARAMS))
                continue;
            allow |= api_routes[i].method;
            read_path |= api_routes[i].auth == AUTH_READ;
            if (api_routes[i].auth != AUTH_TOKEN)
                auth = api_routes[i].auth;
            if (r == NULL && api_routes[i].method == m)
                r = &api_routes[i];
        }
    if (r != NULL) {
        x->route = r;
        auth = r->auth;
        int pi[ROUTE_MAX_PARAMS] = {-1, -1};
        proto_rest_route_match(r->pattern, segs, nsegs, pi, ROUTE_MAX_PARAMS);
        for (int i = 0; i < ROUTE_MAX_PARAMS; i++)
            if (pi[i] >= 0) { /* the decoded bytes, NULs included (param_len is the truth) */
                x->param[i] = xmalloc(segs[pi[i]].len + 1);
                memcpy(x->param[i], segs[pi[i]].s, segs[pi[i]].len);
                x->param[i][segs[pi[i]].len] = '\0';
                x->param_len[i] = segs[pi[i]].len;
            }
    }
    free(segbuf);

    /* CORS: the status reads follow STATUSRELAY_CORS_ORIGINS (default "*"), every other path
     * STATUSRELAY_ADMIN_CORS_ORIGINS (default none). The header goes on every answer, errors
     * included, so that a page can read why it failed. */
    x->upstream_shape = read_path;
    const struct config *cfg = a->c->cfg;
    const char *cors = read_path ? cfg->cors_origins : cfg->admin_cors_origins;
    int cors_on = cors != NULL && cors[0] != '\0';
    const char *origin = evhttp_find_header(evhttp_request_get_input_headers(req), "Origin");
    const char *acao = cors_allow_origin(cors, origin);
    if (acao != NULL) {
        struct evkeyvalq *out = evhttp_request_get_output_headers(req);
        evhttp_add_header(out, "Access-Control-Allow-Origin", acao);
        if (strcmp(acao, "*") != 0 && m != EVHTTP_REQ_OPTIONS)
            evhttp_add_header(out, "Vary", "Origin");
        if (read_path)
            evhttp_add_header(out, "Access-Control-Expose-Headers",
                              "Retry-After, statusrelay-stale");
    }

    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(in);
    if (evhttp_find_header(evhttp_request_get_input_headers(req), API_GATE_HEADER) != NULL) {
        api_reply_error(x, 413, "body_too_large", NULL, /* gate.c: declared or chunked */
                        "request bodies are limited to %d bytes (%d without the admin token)",
                        API_BODY_MAX, API_BODY_ANON_MAX);
        return;
    }
    if (blen > API_BODY_MAX) {
        api_reply_error(x, 413, "body_too_large", NULL, "request bodies are limited to %d bytes",
                        API_BODY_MAX);
        return;
    }
    if ((nsegs < 0 || allow == 0) && api_proxy_wants(a, path)) {
        api_proxy(x); /* proxy.c: the client's own credentials, no admin token */
        return;
    }
    if (m == EVHTTP_REQ_OPTIONS && r == NULL && allow != 0 && cors_on) {
        answer_options(x, allow, origin, acao); /* preflights carry no credentials */
        return;
    }
    const char *host = request_host(evhttp_request_get_input_headers(req));
    if (!host_allowed(cfg, host)) {
        api_reply_error(x, 403, "forbidden_host", NULL,
                        "Host %.200s is not this relay (STATUSRELAY_ALLOWED_HOSTS adds names)",
                        host);
        return;
    }
    /* Cross-site requests (issue 15): a browser page can send a "simple" POST to us without a
     * preflight, so a state-changing request must come from an allowed Origin (none by
     * default; STATUSRELAY_ADMIN_CORS_ORIGINS) and carry a JSON body type, which a page can only
     * send after a preflight we refuse. Clients that are not browsers send no Origin. */
    if (r != NULL && r->auth == AUTH_TOKEN && m != EVHTTP_REQ_GET) {
        if (origin != NULL && acao == NULL) {
            api_reply_error(x, 403, "forbidden_origin", NULL,
                            "requests from Origin %.200s are refused "
                            "(STATUSRELAY_ADMIN_CORS_ORIGINS lists the allowed ones)",
                            origin);
            return;
        }
    }
    if (auth == AUTH_READ)
        x->anonymous = !read_caller_proven(a, x, origin);
    if ((auth == AUTH_TOKEN || (auth == AUTH_READ && cfg->status_require_token)) &&
        !authorized(a, req)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                          "Bearer realm=\"statusrelay\"");
        api_reply_error(x, 401, "unauthorized", NULL,
                        "Authorization: Bearer <admin token> required");
        return;
    }
    /* ... and a JSON body type (checked once the caller is known: 401 says more) */
    if (r != NULL && r->auth == AUTH_TOKEN && (m == EVHTTP_REQ_POST || m == EVHTTP_REQ_PUT ||
                                               m == EVHTTP_REQ_PATCH) &&
        !json_media_type(
            evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type"))) {
        api_reply_error(x, 415, "unsupported_media_type", NULL,
                        "Content-Type: application/json required");
        return;
    }
    if (nsegs < 0 || allow == 0) {
        api_reply_error(x, 404, "not_found", NULL, "no such endpoint");
        return;
    }
    if (r == NULL) {
        char list[96];
        method_list(allow, cors_on, list, sizeof(list));
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", list);
        api_reply_error(x, 405, "method_not_allowed", NULL, "allowed: %s", list);
        return;
    }
    if (query != NULL &&
        (strstr(query, "%00") != NULL || evhttp_parse_query_str(query, &x->query) != 0)) {
        api_reply_error(x, 400, "invalid_parameter", NULL, "the query string is malformed");
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
    evhttp_set_max_body_size(a->http, API_BODY_MAX);  /* gate.c answers first, in JSON */
    evhttp_set_max_headers_size(a->http, PROTO_REST_HEAD_MAX);
    struct timeval idle = {(time_t)(c->cfg->http_request_timeout_ms / 1000),
                           (suseconds_t)(c->cfg->http_request_timeout_ms % 1000) * 1000};
    evhttp_set_timeout_tv(a->http, &idle); /* per read: bounds idle keep-alive connections */
    /* each connection's bufferevent is the request gate's filter (gate.c), made by the
     * listener's bufferevent callback (listen.c), which also counts the connection */
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
    a->anon_misses = rate_table_new(c->cfg->anon_miss_rate, ANON_MISS_SLOTS);
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
    if (api_listen_start(a, host, port) != 0) /* sets a->sock; logs why not */
        return -1;
    int tok = a->c->cfg->admin_token && a->c->cfg->admin_token[0];
    log_info("REST API listening",
             "listen=%s max_connections=%lld auth=%s ingest=%s status_reads=%s", listen,
             (long long)a->c->cfg->http_max_connections, tok ? "token" : "none",
             a->ingest_key ? "on" : "off",
             tok && a->c->cfg->status_require_token ? "token" : "public");
    return 0;
}

void api_stop_accepting(struct api *a)
{
    if (a == NULL || a->sock == NULL)
        return;
    api_listen_stop(a->lsn);
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
    api_proxy_free(a); /* after evhttp_free: its connections' closes released their answers */
    api_listen_free(a->lsn); /* after evhttp_free: its connections' closes are counted */
    proto_hmac_free(a->ingest_key);
    rate_table_free(a->anon_misses);
    free(a);
}
