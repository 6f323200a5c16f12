/* proxy.c (api) - the pass-through (STATUSRELAY_PASSTHROUGH=true): a request for a path the
 * REST API does not serve is forwarded to STATUSRELAY_UPSTREAM_API_URL and the upstream's
 * answer is sent back, so that an upstream client (the upstream's own SDK) can use statusrelay
 * as its one base URL: quotes and execution go through, status reads are ours.
 * runs on: core thread.
 *
 * Decisions (documented in README's "One base URL" section):
 *   - Only paths no route matches, and never our own namespaces: /v1 and everything under it,
 *     /intents/status*, /healthz, /readyz, /metrics (compared percent-decoded and
 *     case-insensitively) keep their own answers (404, 405, 401): admission decides it
 *     (admit.c, verdict ADMIT_PROXY).
 *   - Verbatim: method, raw path and query, body, and the client's own headers minus the
 *     hop-by-hop ones (Connection and the names it lists, Keep-Alive, Proxy-*, TE, Trailer,
 *     Transfer-Encoding, Upgrade), Host, Content-Length and Expect (recomputed). The relay's
 *     STATUSRELAY_UPSTREAM_API_KEY is never added; an Authorization header that carries the
 *     relay's admin or read token is dropped (they are the relay's secrets, not the client's).
 *     X-Forwarded-For, Forwarded and X-Real-IP are dropped and none is added: the relay
 *     cannot vouch for a client's claim about addresses, and does not hand its clients'
 *     addresses to the upstream (which sees the relay as its client).
 *   - No admin token needed on these paths: they carry the client's own upstream credentials.
 *   - The answer: the upstream's status, headers minus hop-by-hop (Content-Length is
 *     recomputed, except for HEAD), and body, buffered up to PT_MAX_RESPONSE.
 *   - Limits: request bodies 64 KiB (API_BODY_ANON_MAX), 1 MiB with the admin token (the
 *     gate checks before this runs: admit.c's ADMIT_PROXY cap), a total deadline of
 *     PT_TIMEOUT_MS, PT_MAX_INFLIGHT requests in flight (then 503 with Retry-After: 1).
 *     Transport failures answer 502/504 with the error shape, top-level "message" and
 *     "errorCode" included (what upstream clients print).
 *   - Answers waiting to be written: a client need not read its answer, so the bytes of every
 *     answer handed to evhttp count (a->proxy_queued) until evhttp wrote it all (its
 *     on_complete callback) or the connection closed (api_proxy_conn_closed). Their total is
 *     bounded by PT_MAX_QUEUED: a request arriving when it is full, or an answer that does not
 *     fit, gets 503 passthrough_busy (Retry-After: 1) instead. An answer none of whose bytes
 *     reached the socket for PT_STALL_MS has its connection closed (a client that does not
 *     read is cut after a few seconds; a slow reader that makes progress is not).
 *   - Dot-segments: a path with a "." or ".." segment (also percent-encoded, also between
 *     backslashes) is refused with 400 invalid_path, not forwarded: curl removes dot-segments,
 *     which would escape the path of a prefixed STATUSRELAY_UPSTREAM_API_URL. */
#include "relay/api/proxy.h"
#include "relay/api/admit.h"
#include "relay/api/internal.h"
#include "relay/common/httpc.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/config.h"
#include "relay/core.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PT_TIMEOUT_MS 25000             /* below evhttp's 30 s connection timeout */
#define PT_CONNECT_TIMEOUT_MS 5000
#define PT_MAX_RESPONSE (8 * 1024 * 1024)
#define PT_MAX_INFLIGHT 256
#define PT_MAX_HEADERS 100              /* client header lines forwarded at most */
#define PT_MAX_QUEUED (32 * 1024 * 1024) /* answer bytes waiting to be written, all clients */
#define PT_STALL_MS 5000                 /* no byte of an answer written this long: cut */
#define PT_CHECK_MS 1000                 /* how often an unwritten answer is looked at */

/* One answer handed to evhttp and not yet written whole (a->proxy_out, owned by the list). */
struct pt_out {
    struct api *a;
    struct evhttp_connection *evcon; /* borrowed: its close releases us */
    size_t bytes;                    /* counted in a->proxy_queued */
    size_t left;                     /* bytes waiting at the last check; SIZE_MAX: none yet */
    int stalled_ms;                  /* since left last went down */
    struct event *timer;             /* the stall check, every PT_CHECK_MS */
    struct pt_out *prev, *next;
};

/* One forwarded request. */
struct pt {
    struct ctx *x;
    char *body;            /* a copy: the client may go away while curl still sends it */
    size_t body_len;
    char *lines[PT_MAX_HEADERS + 8]; /* "Name: value" (owned), NULL-terminated */
    int nlines;
};

static const char *const hop_by_hop[] = {
    "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
    "te", "trailer", "trailers", "transfer-encoding", "upgrade",
};

/* Is name (len bytes) listed in one of the Connection header values of h? */
static int named_by_connection(const struct evkeyvalq *h, const char *name, size_t len)
{
    const struct evkeyval *kv;
    TAILQ_FOREACH(kv, h, next) {
        if (strcasecmp(kv->key, "connection") != 0)
            continue;
        const char *p = kv->value;
        while (*p != '\0') {
            while (*p == ' ' || *p == '\t' || *p == ',')
                p++;
            const char *t = p;
            while (*p != '\0' && *p != ',' && *p != ' ' && *p != '\t')
                p++;
            if ((size_t)(p - t) == len && len > 0 && strncasecmp(t, name, len) == 0)
                return 1;
        }
    }
    return 0;
}

static int hop(const struct evkeyvalq *h, const char *name, size_t len)
{
    for (size_t i = 0; i < ARRAY_LEN(hop_by_hop); i++)
        if (strlen(hop_by_hop[i]) == len && strncasecmp(hop_by_hop[i], name, len) == 0)
            return 1;
    return h != NULL && named_by_connection(h, name, len);
}

/* Does this Authorization value carry one of the relay's tokens (admin or read, with or
 * without "Bearer ")? They are the relay's secrets, not the client's. */
static int is_relay_token(const char *v, const struct admit_rules *rules)
{
    return admit_bearer(rules, v, strlen(v)) != ADMIT_CRED_NONE ||
           admit_token(rules, v, strlen(v)) != ADMIT_CRED_NONE;
}

static void pt_free(struct pt *p)
{
    for (int i = 0; i < p->nlines; i++)
        free(p->lines[i]);
    free(p->body);
    free(p);
}

/* ---- answers waiting to be written ----------------------------------------------------------- */

static void out_release(struct pt_out *o)
{
    struct api *a = o->a;
    if (o->prev)
        o->prev->next = o->next;
    else
        a->proxy_out = o->next;
    if (o->next)
        o->next->prev = o->prev;
    a->proxy_queued -= o->bytes;
    event_free(o->timer);
    free(o);
}

/* Bytes of the connection's answers not yet on the socket: evhttp's output (the gate's filter)
 * and the socket bufferevent's under it (gate.c moves what it can at once). */
static size_t conn_unsent(struct evhttp_connection *evcon)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    if (bev == NULL)
        return 0;
    size_t n = evbuffer_get_length(bufferevent_get_output(bev));
    struct bufferevent *under = bufferevent_get_underlying(bev);
    if (under != NULL)
        n += evbuffer_get_length(bufferevent_get_output(under));
    return n;
}

static void on_stall_check(evutil_socket_t fd, short what, void *arg)
{
    struct pt_out *o = arg;
    size_t left = conn_unsent(o->evcon);
    o->stalled_ms = left > 0 && left >= o->left ? o->stalled_ms + PT_CHECK_MS : 0;
    if (o->stalled_ms >= PT_STALL_MS) {
        log_debug("passthrough answer cut: the client read nothing", "unsent=%zu stall_ms=%d",
                  left, PT_STALL_MS);
        /* evhttp's error callback frees the connection; its close releases o: return after */
        bufferevent_trigger_event(evhttp_connection_get_bufferevent(o->evcon),
                                  BEV_EVENT_WRITING | BEV_EVENT_TIMEOUT, 0);
        return;
    }
    o->left = left;
    struct timeval tv = {PT_CHECK_MS / 1000, (PT_CHECK_MS % 1000) * 1000};
    evtimer_add(o->timer, &tv);
}

static void on_answer_written(struct evhttp_request *req, void *arg)
{
    out_release(arg);
}

void api_proxy_conn_closed(struct api *a, struct evhttp_connection *evcon)
{
    for (struct pt_out *o = a->proxy_out, *n; o != NULL; o = n) {
        n = o->next;
        if (o->evcon == evcon)
            out_release(o);
    }
}

void api_proxy_free(struct api *a)
{
    while (a->proxy_out != NULL)
        out_release(a->proxy_out);
}

/* 503 passthrough_busy with Retry-After: 1 (why: what is full). */
static void reply_busy(struct ctx *x, const char *why)
{
    evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", "1");
    api_reply_error(x, 503, "passthrough_busy", NULL, "%s; retry shortly", why);
}

/* Does the raw path hold a "." or ".." segment once percent-decoded, with "\\" as "/"? */
static int has_dot_segment(const char *path)
{
    char *d = evhttp_uridecode(path, 0, NULL);
    if (d == NULL)
        return 1;
    int dot = 0;
    for (const char *p = d; *p != '\0' && !dot;) {
        size_t n = strcspn(p, "/\\");
        dot = (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.');
        p += n;
        if (*p != '\0')
            p++;
    }
    free(d);
    return dot;
}

/* Copy the upstream's header fields into the reply, minus hop-by-hop and Content-Length (evhttp
 * sets it from the body; a HEAD answer keeps the upstream's). */
static void copy_response_headers(struct ctx *x, const char *h, size_t len)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(x->req);
    /* A forwarded answer is the upstream's, CORS included: the headers on_request added for
     * STATUSRELAY_ADMIN_CORS_ORIGINS go, or a browser would see two Allow-Origin values. */
    while (evhttp_remove_header(out, "Access-Control-Allow-Origin") == 0 ||
           evhttp_remove_header(out, "Access-Control-Expose-Headers") == 0 ||
           evhttp_remove_header(out, "Vary") == 0)
        ;
    const char *end = h + len;
    /* Connection tokens of the answer name more hop-by-hop fields: collect them first. */
    struct evkeyvalq conn;
    TAILQ_INIT(&conn);
    for (int pass = 0; pass < 2; pass++) {
        for (const char *p = h; p < end;) {
            const char *eol = memchr(p, '\n', (size_t)(end - p));
            const char *next = eol != NULL ? eol + 1 : end;
            const char *e = eol != NULL ? eol : end;
            if (e > p && e[-1] == '\r')
                e--;
            const char *colon = memchr(p, ':', (size_t)(e - p));
            if (colon == NULL || colon == p || *p == ' ' || *p == '\t') {
                p = next; /* not a field (or an obsolete folded line): skipped */
                continue;
            }
            size_t nl = (size_t)(colon - p);
            const char *v = colon + 1;
            while (v < e && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = e;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            char *name = xstrndup(p, nl), *val = xstrndup(v, (size_t)(ve - v));
            if (pass == 0) {
                if (strcasecmp(name, "connection") == 0)
                    evhttp_add_header(&conn, name, val);
            } else if (!hop(&conn, name, nl) &&
                       (x->head || strcasecmp(name, "content-length") != 0)) {
                evhttp_add_header(out, name, val); /* refuses CR/LF: cannot happen here */
            }
            free(name);
            free(val);
            p = next;
        }
    }
    evhttp_clear_headers(&conn);
}

static const char *method_name(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_PATCH: return "PATCH";
    default: return NULL;
    }
}

static void on_upstream(void *arg, const struct httpc_resp *r)
{
    struct pt *p = arg;
    struct ctx *x = p->x;
    if (x->api != NULL)
        x->api->proxy_inflight--;
    if (x->req == NULL || x->api == NULL) { /* the client is gone: drop the answer */
        api_ctx_free(x);
        pt_free(p);
        return;
    }
    if (r->err != NULL || r->status < 200 || r->status > 599) {
        const char *err = r->err != NULL ? r->err : "protocol";
        log_warn("passthrough failed", "err=%s status=%ld latency_ms=%lld detail=\"%s\"", err,
                 r->status, (long long)r->latency_ms, r->detail != NULL ? r->detail : "");
        if (r->err == httpc_err_timeout)
            api_reply_error(x, 504, "upstream_timeout", NULL,
                            "the upstream did not answer within %d s", PT_TIMEOUT_MS / 1000);
        else if (r->err == httpc_err_too_large)
            api_reply_error(x, 502, "upstream_too_large", NULL,
                            "the upstream's answer exceeds %d bytes", PT_MAX_RESPONSE);
        else if (r->err == httpc_err_bad_url)
            api_reply_error(x, 400, "invalid_path", NULL,
                            "the path cannot be forwarded to the upstream");
        else
            api_reply_error(x, 502, "upstream_unavailable", NULL,
                            "the upstream could not be reached (%s)", err);
        pt_free(p);
        return;
    }
    log_debug("passthrough", "method=%s status=%ld latency_ms=%lld bytes=%zu",
              method_name(evhttp_request_get_command(x->req)),
              r->status, (long long)r->latency_ms, r->body_len);
    size_t bytes = r->headers_len + (x->head ? 0 : r->body_len);
    struct api *a = x->api;
    if (a->proxy_queued + bytes > PT_MAX_QUEUED) {
        reply_busy(x, "too many pass-through answers are waiting to be read");
        pt_free(p);
        return;
    }
    copy_response_headers(x, r->headers != NULL ? r->headers : "", r->headers_len);
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) {
        api_reply_oom(x);
        pt_free(p);
        return;
    }
    if (!x->head && r->body_len > 0)
        evbuffer_add(b, r->body, r->body_len);
    /* counted until written whole or the connection closes; set up before sending (evhttp may
     * complete it, or free the connection, from inside the send) */
    struct pt_out *o = xcalloc(1, sizeof(*o));
    o->a = a;
    o->evcon = x->evcon;
    o->bytes = bytes;
    o->left = SIZE_MAX;
    o->timer = evtimer_new(a->c->base, on_stall_check, o);
    if (o->timer == NULL) {
        log_err("out of memory", "what=passthrough_timer");
        abort();
    }
    o->next = a->proxy_out;
    if (o->next)
        o->next->prev = o;
    a->proxy_out = o;
    a->proxy_queued += bytes;
    struct timeval tv = {PT_CHECK_MS / 1000, (PT_CHECK_MS % 1000) * 1000};
    evtimer_add(o->timer, &tv);
    evhttp_request_set_on_complete_cb(x->req, on_answer_written, o);
    api_count_answer(x, (int)r->status);
    evhttp_send_reply(x->req, (int)r->status, NULL, b);
    evbuffer_free(b);
    api_ctx_free(x);
    pt_free(p);
}

/* The client's header lines for curl into p->lines (minus hop-by-hop, Host, Content-Length,
 * Expect, the address claims and an Authorization carrying the admin or the read token), then
 * blanks for the headers
 * curl would add on its own. -1 when there are more than PT_MAX_HEADERS. */
static int pt_headers(struct pt *p, struct evkeyvalq *in, const struct admit_rules *rules)
{
    int has_accept = 0, has_ua = 0, has_ctype = 0;
    const struct evkeyval *kv;
    TAILQ_FOREACH(kv, in, next) {
        size_t nl = strlen(kv->key);
        if (hop(in, kv->key, nl) || strcasecmp(kv->key, "host") == 0 ||
            strcasecmp(kv->key, "content-length") == 0 || strcasecmp(kv->key, "expect") == 0 ||
            strcasecmp(kv->key, "x-forwarded-for") == 0 || strcasecmp(kv->key, "forwarded") == 0 ||
            strcasecmp(kv->key, "x-real-ip") == 0)
            continue;
        if (strcasecmp(kv->key, "authorization") == 0 && is_relay_token(kv->value, rules))
            continue;
        if (p->nlines == PT_MAX_HEADERS)
            return -1;
        has_accept |= strcasecmp(kv->key, "accept") == 0;
        has_ua |= strcasecmp(kv->key, "user-agent") == 0;
        has_ctype |= strcasecmp(kv->key, "content-type") == 0;
        /* curl drops "Name:" (no value) instead of sending it; "Name;" sends it empty */
        p->lines[p->nlines++] = kv->value[0] == '\0' ? xasprintf("%s;", kv->key)
                                                     : xasprintf("%s: %s", kv->key, kv->value);
    }
    /* nothing curl would add on its own: the client's headers are the request's headers */
    p->lines[p->nlines++] = xstrdup("Expect:");
    if (!has_accept)
        p->lines[p->nlines++] = xstrdup("Accept:");
    if (!has_ua)
        p->lines[p->nlines++] = xstrdup("User-Agent:");
    if (!has_ctype)
        p->lines[p->nlines++] = xstrdup("Content-Type:");
    p->lines[p->nlines] = NULL;
    return 0;
}

/* Start forwarding p (its x's method, path, query, headers and body) to url. 0, or -1 when
 * curl could not take it. */
static int pt_start(struct core *c, struct pt *p, const char *method, const char *url)
{
    struct evbuffer *body = evhttp_request_get_input_buffer(p->x->req);
    p->body_len = evbuffer_get_length(body);
    if (p->body_len > 0) {
        p->body = xmalloc(p->body_len);
        evbuffer_copyout(body, p->body, p->body_len);
    }
    struct httpc_req req = {
        .method = method,
        .url = url,
        .headers = (const char *const *)p->lines,
        .body = p->body,
        .body_len = p->body_len,
        .connect_timeout_ms = PT_CONNECT_TIMEOUT_MS,
        .total_timeout_ms = PT_TIMEOUT_MS,
        .max_response = PT_MAX_RESPONSE,
        .keep_headers = 1,
    };
    return httpc_request(c->httpc, &req, on_upstream, p);
}

void api_proxy(struct ctx *x)
{
    struct api *a = x->api;
    struct core *c = a->c;
    x->upstream_shape = 1;
    const char *method = method_name(evhttp_request_get_command(x->req));
    if (method == NULL) {
        api_reply_error(x, 405, "method_not_allowed", NULL, "method not forwarded");
        return;
    }
    if (a->proxy_inflight >= PT_MAX_INFLIGHT) {
        reply_busy(x, "too many pass-through requests are in flight");
        return;
    }
    if (a->proxy_queued >= PT_MAX_QUEUED) {
        reply_busy(x, "too many pass-through answers are waiting to be read");
        return;
    }
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(x->req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
    if (path == NULL || path[0] == '\0')
        path = "/";
    if (has_dot_segment(path)) {
        api_reply_error(x, 400, "invalid_path", NULL,
                        "paths with . or .. segments are not forwarded to the upstream");
        return;
    }
    struct pt *p = xcalloc(1, sizeof(*p));
    p->x = x;
    if (pt_headers(p, evhttp_request_get_input_headers(x->req), a->rules) != 0) {
        api_reply_error(x, 431, "too_many_headers", NULL,
                        "at most %d request headers are forwarded", PT_MAX_HEADERS);
        pt_free(p);
        return;
    }
    const char *base = c->cfg->upstream_api_url;
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/')
        bl--;
    char *url = xasprintf("%.*s%s%s%s%s", (int)bl, base, path[0] == '/' ? "" : "/", path,
                          query != NULL ? "?" : "", query != NULL ? query : "");
    int rc = pt_start(c, p, method, url);
    free(url);
    if (rc != 0) {
        api_reply_error(x, 502, "upstream_unavailable", NULL,
                        "the request could not be forwarded to the upstream");
        pt_free(p);
        return;
    }
    a->proxy_inflight++;
}
