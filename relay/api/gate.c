/* gate.c (api) - the REST port's connection gate: a filtering bufferevent between the socket and
 * evhttp (evhttp_set_bevcb), which reads each request head BEFORE evhttp does, so that a
 * request is judged on its headers and its body is never buffered for a caller we will refuse.
 * runs on: core thread.
 *
 * Why a filter: libevent 2.1.12 has no hook on a server request before its body is read
 * (evhttp_set_newreqcb came in 2.2; a request's header_cb cannot be set on server requests),
 * and evhttp answers an oversized body with its own HTML page. The gate fills both gaps:
 *   - it holds the head (at most PROTO_REST_HEAD_MAX bytes) until its empty line, parses it
 *     (protocol/rest_req.c; a head evhttp might read differently - obs-fold, two lengths,
 *     Content-Length with chunked, another coding - closes the connection), and asks admission
 *     (admit.c, the same verdict on_request acts on) how much body this request may send,
 *     from its method, path and headers alone (route, Host, Origin, token, Content-Type);
 *   - a request refused on its headers, or declaring more than its cap, reaches evhttp with
 *     its body and connection headers removed (Content-Length, Transfer-Encoding, Expect,
 *     Connection) and, when too large, "X-Statusrelay-Gate: too-large"; server.c answers it
 *     with the usual JSON error (401/403/404/405/415, or 413). Its body (declared up to
 *     API_BODY_HARD_MAX, or chunked up to that much) is then read and dropped by the gate on
 *     a connection kept open, so that a client that sends its body before reading gets the
 *     answer, not a reset; otherwise (more, Expect: 100-continue, HTTP/1.0) the answer says
 *     "Connection: close". A client never sets the gate's header itself: the gate removes it
 *     from every head;
 *   - a chunked body is decoded here, up to the cap (an oversized one ends in the same JSON
 *     413), and handed to evhttp with a Content-Length (Expect is dropped: the client sends
 *     the body after its own expect timeout);
 *   - a total deadline per request (STATUSRELAY_HTTP_REQUEST_TIMEOUT): from the first byte of
 *     a request to the last byte of its body; a client trickling bytes is cut when it passes,
 *     whatever evhttp's per-read timeout says (that one bounds idle keep-alive connections);
 *   - the listener sees each head first (its on_head hook, listen.c: the reserve, a trusted
 *     proxy's forwarded client counted per address) and may close the connection;
 *   - at most STATUSRELAY_HTTP_KEEPALIVE_REQUESTS requests per connection: the last one
 *     reaches evhttp with "Connection: close" (its own Connection header removed), so its
 *     answer ends the connection, and any byte after its body is dropped.
 * The gate is the filter's context: the filter bufferevent (owned by evhttp's connection) frees
 * it (gate_free). It keeps no pointer to the connection: it closes one by raising an event on
 * its bufferevent (evhttp's error callback then frees the connection), and after evhttp freed
 * the bufferevent its callbacks are gone, so a late timer does nothing. */
#include "relay/api/gate.h"
#include "protocol/rest_req.h"
#include "relay/api/admit.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum gate_state {
    G_HEAD,    /* reading a head (held in g->in until its empty line) */
    G_BODY,    /* passing body_left more bytes of a Content-Length body */
    G_CHUNKED, /* decoding a chunked body into g->body, up to cap */
    G_SKIP,    /* refused on its headers: body_left bytes of its body are read and dropped */
    G_SKIP_CHUNKED, /* the same for a chunked body, up to API_BODY_HARD_MAX decoded bytes */
    G_DROP,    /* refused: every further byte is dropped, the connection closes */
};

struct gate {
    const struct gate_opts *o; /* borrowed: connections are freed before it (evhttp_free) */
    struct bufferevent *bev; /* the filter bufferevent: owns us */
    struct event *timer;     /* the request deadline, or an immediate close */
    struct event *kick;      /* moves an answer evhttp queued while writing was off */
    enum gate_state state;
    struct evbuffer *in;   /* bytes read and not yet judged */
    struct evbuffer *body; /* G_CHUNKED: the decoded body */
    char *head;            /* G_CHUNKED: the head, rewritten once the body is whole */
    size_t head_len;
    uint64_t body_left; /* G_BODY */
    int64_t nreq;       /* heads passed on this connection */
    int last;           /* the last head passed (keep-alive request count): drop the rest */
    int64_t cap;        /* G_CHUNKED */
    struct proto_rest_chunked ch;
};

static void gate_close_soon(struct gate *g, const char *why)
{
    log_debug("REST connection closed by the gate", "why=%s", why);
    g->state = G_DROP;
    evbuffer_drain(g->in, evbuffer_get_length(g->in));
    struct timeval now = {0, 0};
    evtimer_add(g->timer, &now);
}

/* 1 while evhttp still has the connection: bufferevent_free clears the callbacks, and the
 * bufferevent (with us) lives on until its finalizer runs. Poking it then (an incref/decref)
 * would destroy it a second time. */
static int conn_alive(struct gate *g)
{
    bufferevent_data_cb rcb, wcb;
    bufferevent_event_cb ecb;
    void *cbarg;
    bufferevent_getcb(g->bev, &rcb, &wcb, &ecb, &cbarg);
    return ecb != NULL;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct gate *g = arg;
    if (!conn_alive(g))
        return;
    if (g->state != G_DROP)
        log_debug("REST request cut: not received whole within the request timeout", "");
    /* evhttp_error_cb frees the connection, the bufferevent and so this gate: return after */
    bufferevent_trigger_event(g->bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, 0);
}

static void arm_deadline(struct gate *g)
{
    int64_t ms = g->o->request_timeout_ms;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    evtimer_add(g->timer, &tv);
}

/* Append the head buf (parsed as h) to out without its body headers and our marker, and
 * without its connection headers when drop_conn is set, then the lines of extra. */
static void rewrite_head(struct evbuffer *out, const char *buf, const struct proto_rest_head *h,
                         const char *extra, int drop_conn)
{
    static const char *const drop[] = {"Content-Length", "Transfer-Encoding", "Expect",
                                       API_GATE_HEADER, "Connection", "Keep-Alive"};
    const char *p = buf + h->line_len, *end;
    evbuffer_add(out, buf, h->line_len);
    /* every header line, kept in h->hdr or not (h->more). strchr stays inside the head: the
     * parser checked that each line ends in LF and holds no NUL, up to the empty line */
    for (; (end = strchr(p, '\n')) != NULL && *p != '\r' && *p != '\n'; p = end + 1) {
        size_t name_len = strcspn(p, ":");
        int keep = 1;
        for (size_t k = 0; k < ARRAY_LEN(drop) - (drop_conn ? 0 : 2) && keep; k++)
            keep = !(strlen(drop[k]) == name_len && strncasecmp(drop[k], p, name_len) == 0);
        if (keep)
            evbuffer_add(out, p, (size_t)(end + 1 - p));
    }
    evbuffer_add(out, extra, strlen(extra));
    evbuffer_add(out, "\r\n", 2);
}

/* Pass the head of a request answered without its body (refused on its headers, or too_large).
 * Its body (declared up to API_BODY_HARD_MAX, or chunked) is then read and dropped within the
 * same deadline, on a connection kept open (the client's Connection header is dropped), so
 * that a client sending its body before reading the answer gets the answer, not a reset. With
 * Expect: 100-continue (the client may never send the body), HTTP/1.0 or a larger body, the
 * connection closes after the answer instead. */
static void refuse(struct gate *g, const char *buf, const struct proto_rest_head *h,
                   int too_large, struct evbuffer *dst)
{
    int skip = !h->expect_continue && h->minor >= 1 && !g->last &&
               (h->chunked || h->content_length <= API_BODY_HARD_MAX);
    const char *extra = too_large ? (skip ? API_GATE_HEADER ": " API_GATE_TOO_LARGE "\r\n"
                                          : "Connection: close\r\n" API_GATE_HEADER
                                            ": " API_GATE_TOO_LARGE "\r\n")
                                  : (skip ? "" : "Connection: close\r\n");
    rewrite_head(dst, buf, h, extra, 1);
    if (skip && h->chunked) {
        g->state = G_SKIP_CHUNKED;
        g->body_left = API_BODY_HARD_MAX;
    } else if (skip && h->content_length > 0) {
        g->body_left = (uint64_t)h->content_length;
        g->state = G_SKIP;
    } else {
        g->state = skip ? G_HEAD : G_DROP;
        evtimer_del(g->timer);
    }
}

/* How many body bytes the request of head h may send (admit.h): API_BODY_MAX,
 * API_BODY_ANON_MAX, or -1 when it is answered on its head alone. Its headers are copied into
 * an evkeyvalq as evhttp will read them (evhttp_add_header refuses what evhttp would). */
static int64_t body_cap(const struct gate *g, const struct proto_rest_head *h)
{
    struct evkeyvalq in;
    TAILQ_INIT(&in);
    char *target = xstrndup(h->target, h->target_len);
    struct evhttp_uri *uri = evhttp_uri_parse_with_flags(target, EVHTTP_URI_NONCONFORMANT);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    int64_t cap = -1;
    for (size_t i = 0; i < h->nhdr; i++) {
        char *k = xstrndup(h->hdr[i].name, h->hdr[i].name_len);
        char *v = xstrndup(h->hdr[i].value, h->hdr[i].value_len);
        evhttp_add_header(&in, k, v); /* copies */
        free(k);
        free(v);
    }
    if (path != NULL) { /* a target evhttp cannot parse is refused there: no body needed */
        struct admit_req q = {admit_method(h->method, h->method_len), path, &in, NULL};
        struct admit ad;
        admit_decide(g->o->rules, &q, &ad);
        cap = ad.body_cap;
        admit_cleanup(&ad);
    }
    if (uri != NULL)
        evhttp_uri_free(uri);
    evhttp_clear_headers(&in);
    free(target);
    return cap;
}

/* The parsed head of take_head and chunked_end: large (every header line), so not on the
 * stack; the core thread is the only user, and neither function keeps it past its return. */
static struct proto_rest_head head_scratch;

/* The head buf[0..len) is whole: judge it and pass it (or its refusal) to dst. */
static void take_head(struct gate *g, const char *buf, size_t len, struct evbuffer *dst)
{
    struct proto_rest_head *h = &head_scratch;
    if (proto_rest_head_parse(buf, len, h) != 0) {
        gate_close_soon(g, "malformed_head");
        return;
    }
    int said = g->o->on_head != NULL ? g->o->on_head(g->o->arg, g->bev, h) : 0;
    if (said < 0) {
        gate_close_soon(g, "listener");
        return;
    }
    if (said > 0) { /* answered 503 by evhttp (the marker), its body and the rest dropped */
        rewrite_head(dst, buf, h, "Connection: close\r\n" API_GATE_HEADER ": " API_GATE_BUSY "\r\n", 1);
        g->state = G_DROP;
        evtimer_del(g->timer);
        return;
    }
    g->last = ++g->nreq >= g->o->keepalive_requests;
    int has_body = h->chunked || h->content_length > 0;
    /* a head with more lines than h keeps: judged refused (its body is not needed for the
     * answer it gets: 431 on pass-through paths) */
    int64_t cap = h->more ? -1 : body_cap(g, h);
    if (!has_body || (cap >= 0 && !h->chunked && h->content_length <= cap)) {
        if (proto_rest_head_find(h, API_GATE_HEADER) != NULL || g->last) {
            /* a forged marker is removed; the last request says Connection: close */
            char cl[80] = "";
            if (h->content_length > 0)
                snprintf(cl, sizeof(cl), "Content-Length: %lld\r\n", (long long)h->content_length);
            if (g->last)
                strcat(cl, "Connection: close\r\n");
            rewrite_head(dst, buf, h, cl, g->last);
        } else {
            evbuffer_add(dst, buf, len);
        }
        g->body_left = h->content_length > 0 ? (uint64_t)h->content_length : 0;
        g->state = g->body_left > 0 ? G_BODY : G_HEAD;
        if (g->state == G_HEAD)
            evtimer_del(g->timer);
        return;
    }
    if (h->chunked)
        memset(&g->ch, 0, sizeof(g->ch));
    if (cap >= 0 && h->chunked) { /* decode here, up to cap */
        g->head = xmalloc(len);
        memcpy(g->head, buf, len);
        g->head_len = len;
        g->cap = cap;
        g->body = evbuffer_new();
        g->state = G_CHUNKED;
        return;
    }
    refuse(g, buf, h, h->content_length > API_BODY_MAX || cap >= 0, dst);
}

/* A request's body is through: the next bytes are a head, and the deadline is over. */
static void body_done(struct gate *g)
{
    g->state = G_HEAD;
    evtimer_del(g->timer);
}

/* One step of the chunked decoder over everything buffered (proto_rest_chunked_step). */
static int chunked_step(struct gate *g, size_t avail, size_t *used, const char **data,
                        size_t *dlen)
{
    const char *p = (const char *)evbuffer_pullup(g->in, -1);
    return proto_rest_chunked_step(&g->ch, p, avail, used, data, dlen);
}

/* G_CHUNKED: the body ended (ok) or outgrew the cap: pass the rewritten head (and body). */
static void chunked_end(struct gate *g, int ok, struct evbuffer *dst)
{
    struct proto_rest_head *h = &head_scratch;
    if (proto_rest_head_parse(g->head, g->head_len, h) != 0) { /* parsed before: cannot */
        gate_close_soon(g, "malformed_head");
    } else if (ok) {
        char cl[80];
        snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n%s", evbuffer_get_length(g->body),
                 g->last ? "Connection: close\r\n" : "");
        rewrite_head(dst, g->head, h, cl, g->last);
        evbuffer_add_buffer(dst, g->body);
        body_done(g);
    } else { /* the decoder goes on, dropping the rest */
        refuse(g, g->head, h, 1, dst);
        g->body_left = API_BODY_HARD_MAX > evbuffer_get_length(g->body)
                           ? API_BODY_HARD_MAX - evbuffer_get_length(g->body)
                           : 0;
    }
    free(g->head);
    g->head = NULL;
    evbuffer_free(g->body);
    g->body = NULL;
}

/* One step of the state machine over g->in. Returns 1 to go on, 0 when it needs more bytes. */
static int step(struct gate *g, struct evbuffer *dst)
{
    size_t avail = evbuffer_get_length(g->in);
    switch (g->state) {
    case G_HEAD: {
        if (avail == 0)
            return 0;
        if (g->last) { /* after the connection's last request: evhttp closes it */
            evbuffer_drain(g->in, avail);
            return 0;
        }
        if (!evtimer_pending(g->timer, NULL))
            arm_deadline(g); /* the first byte of a request */
        size_t n = avail < PROTO_REST_HEAD_MAX ? avail : PROTO_REST_HEAD_MAX;
        const char *p = (const char *)evbuffer_pullup(g->in, (ev_ssize_t)n);
        long e = proto_rest_head_end(p, n, PROTO_REST_HEAD_MAX);
        if (e == 0)
            return 0;
        if (e < 0) {
            gate_close_soon(g, e == PROTO_ETOOLONG ? "head_too_large" : "malformed_head");
            return 0;
        }
        take_head(g, p, (size_t)e, dst); /* p dies here: take_head copies what it keeps */
        evbuffer_drain(g->in, (size_t)e);
        return g->state != G_DROP;
    }
    case G_BODY: {
        if (avail == 0)
            return 0;
        size_t n = avail < g->body_left ? avail : (size_t)g->body_left;
        evbuffer_remove_buffer(g->in, dst, n);
        g->body_left -= n;
        if (g->body_left == 0)
            body_done(g);
        return 1;
    }
    case G_SKIP: {
        if (avail == 0)
            return 0;
        size_t n = avail < g->body_left ? avail : (size_t)g->body_left;
        evbuffer_drain(g->in, n);
        g->body_left -= n;
        if (g->body_left == 0)
            body_done(g);
        return 1;
    }
    case G_SKIP_CHUNKED: {
        if (avail == 0)
            return 0;
        size_t used = 0, dlen = 0;
        const char *data = NULL;
        int rc = chunked_step(g, avail, &used, &data, &dlen);
        if (rc < 0 || dlen > g->body_left) {
            gate_close_soon(g, rc < 0 ? "malformed_chunked_body" : "refused_body_too_large");
            return 0;
        }
        g->body_left -= dlen;
        evbuffer_drain(g->in, used);
        if (rc == 1)
            body_done(g);
        return 1;
    }
    case G_CHUNKED: {
        if (avail == 0)
            return 0;
        size_t used = 0, dlen = 0;
        const char *data = NULL;
        int rc = chunked_step(g, avail, &used, &data, &dlen);
        if (rc < 0) {
            gate_close_soon(g, "malformed_chunked_body");
            return 0;
        }
        if (dlen > 0 && evbuffer_get_length(g->body) + dlen > (size_t)g->cap) {
            evbuffer_drain(g->in, used); /* this span is dropped with the rest */
            chunked_end(g, 0, dst);
            return g->state != G_DROP;
        }
        if (dlen > 0)
            evbuffer_add(g->body, data, dlen);
        evbuffer_drain(g->in, used);
        if (rc == 1)
            chunked_end(g, 1, dst);
        return 1;
    }
    case G_DROP:
    default:
        evbuffer_drain(g->in, avail);
        return 0;
    }
}

/* ---- output ---------------------------------------------------------------------------------
 * Three gaps of libevent 2.1.12's filter bufferevent, filled here:
 *   - evhttp adds its answer to the output while writing is disabled, then enables writing;
 *     enabling does not move what is queued (be_filter_enable), so the answer would wait for an
 *     unrelated event. An output-buffer callback schedules a kick that flushes it;
 *   - the filter tells evhttp "written" as soon as the bytes reach the socket bufferevent, and
 *     evhttp then frees a "Connection: close" connection - with its unsent bytes. The output
 *     filter writes to the socket at once and, while bytes remain unsent, keeps the last byte
 *     back (BEV_NEED_MORE: evhttp is not told); when the socket drained, the filter runs again
 *     (be_filter_writecb) and kicks;
 *   - evhttp may free the connection from the "written" callback; be_filter_writecb holds no
 *     reference and re-arms a timeout on the freed bufferevent afterwards (a dangling timer).
 *     So evhttp is told "written" only from the kick, inside bufferevent_flush, which holds a
 *     reference: the filter says BEV_OK only while `kicking` is its gate. */
static struct gate *kicking; /* the gate whose kick is flushing (core thread only) */

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct gate *g = arg;
    if (!conn_alive(g)) /* evhttp freed the connection: its bufferevent is going */
        return;
    kicking = g;
    bufferevent_flush(g->bev, EV_WRITE, BEV_NORMAL); /* may free the connection (not g yet) */
    kicking = NULL;
}

static void on_output_added(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct gate *g = arg;
    if (info->n_added > 0)
        event_active(g->kick, EV_WRITE, 0);
}

static enum bufferevent_filter_result on_output(struct evbuffer *src, struct evbuffer *dst,
                                                ev_ssize_t lim, enum bufferevent_flush_mode mode,
                                                void *arg)
{
    struct gate *g = arg;
    size_t n = evbuffer_get_length(src);
    if (mode != BEV_NORMAL) {
        evbuffer_add_buffer(dst, src);
        return BEV_OK;
    }
    if (evbuffer_get_length(dst) == 0) {
        if (kicking != g) { /* the socket drained (or a plain write): tell evhttp from a kick */
            event_active(g->kick, EV_WRITE, 0);
            return BEV_NEED_MORE;
        }
        evutil_socket_t fd = bufferevent_getfd(bufferevent_get_underlying(g->bev));
        if (fd >= 0)
            evbuffer_write(src, fd); /* in order: nothing older waits; one write, no Nagle gap */
        if (evbuffer_get_length(src) == 0)
            return BEV_OK; /* all sent: evhttp may go on (and close) */
    }
    n = evbuffer_get_length(src);
    if (n > 1) /* the socket's own write event sends these; the last byte waits for the drain */
        evbuffer_remove_buffer(src, dst, n - 1);
    return BEV_NEED_MORE;
}

static enum bufferevent_filter_result on_input(struct evbuffer *src, struct evbuffer *dst,
                                               ev_ssize_t lim, enum bufferevent_flush_mode mode,
                                               void *arg)
{
    struct gate *g = arg;
    size_t before = evbuffer_get_length(dst);
    evbuffer_add_buffer(g->in, src);
    while (step(g, dst))
        ;
    return evbuffer_get_length(dst) > before ? BEV_OK : BEV_NEED_MORE;
}

static void gate_free(void *arg)
{
    struct gate *g = arg;
    event_free(g->timer);
    event_free(g->kick);
    evbuffer_free(g->in);
    if (g->body != NULL) /* evbuffer_free is not NULL-safe */
        evbuffer_free(g->body);
    free(g->head);
    free(g);
}

struct bufferevent *api_gate_bev_new(struct event_base *base, const struct gate_opts *o)
{
    struct gate *g = xcalloc(1, sizeof(*g));
    g->o = o;
    g->in = evbuffer_new();
    g->timer = evtimer_new(base, on_timer, g);
    g->kick = event_new(base, -1, 0, on_kick, g);
    struct bufferevent *sock = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (g->in == NULL || g->timer == NULL || g->kick == NULL || sock == NULL) {
        log_err("out of memory", "what=rest_gate");
        abort();
    }
    g->bev = bufferevent_filter_new(sock, on_input, on_output, BEV_OPT_CLOSE_ON_FREE, gate_free, g);
    if (g->bev == NULL || evbuffer_add_cb(bufferevent_get_output(g->bev), on_output_added, g) ==
                              NULL) {
        log_err("out of memory", "what=rest_gate_filter");
        abort();
    }
    return g->bev;
}
