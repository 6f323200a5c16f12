/* ws_server.c - see ws_server.h. runs on: ws thread (stats: any thread).
 *
 * Sessions are lws per-session data (struct session, zeroed by lws). A websocket session gets
 * its id at ESTABLISHED and sits in an id -> session hash until CLOSED; plain HTTP
 * connections use the same struct with id 0. Messages from the core name a session by id
 * only, so a message for a session that is gone is simply dropped. */
#include "relay/ws_server.h"
#include "relay/log.h"
#include "relay/util.h"
#include "relay/xq.h"

#include <libwebsockets.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRITE_BURST 16       /* frames per WRITEABLE callback */
#define CLOSE_GRACE_SECS 5   /* a closing session that cannot flush is dropped after this */

static const char page[] =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<title>statusrelay dashboard</title></head>\n"
    "<body style=\"font-family:system-ui,sans-serif;margin:3em\">"
    "<h1>statusrelay dashboard (coming soon)</h1>\n"
    "<p>The live stream is on this port: connect a websocket to <code>/</code>.</p>"
    "</body></html>\n";

struct session {
    struct lws *wsi;
    uint64_t id;                 /* 0: plain HTTP connection, not in the hash */
    struct session *hnext;
    struct xmsg *out_head, *out_tail;
    size_t out_count;
    unsigned char *rx;           /* message being reassembled */
    size_t rx_len;
    int close_code;              /* != 0: close once the outbox is flushed */
    char close_reason[64];
    int http_body_due;
};

struct counters {
    _Atomic uint64_t sessions, opened, closed, msgs_in, frames_out, dropped, unrouted,
        slow_closed, http_requests;
};

struct ws_server {
    struct xq *to_core;
    size_t queue_max;
    uint64_t next_id;
    struct session **tab;        /* chained hash on id; size is a power of two */
    size_t tab_size, count;
    int shutting_down;
    struct counters st;
};

static void count(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* ---- id -> session ------------------------------------------------------------------- */

static size_t slot(const struct ws_server *s, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 32) & (s->tab_size - 1);
}

static struct session *find(const struct ws_server *s, uint64_t id)
{
    for (struct session *x = s->tab[slot(s, id)]; x != NULL; x = x->hnext)
        if (x->id == id)
            return x;
    return NULL;
}

static void insert(struct ws_server *s, struct session *x)
{
    if (s->count + 1 > s->tab_size) { /* grow: load factor <= 1 */
        size_t old_size = s->tab_size;
        struct session **old = s->tab;
        s->tab_size *= 2;
        s->tab = xcalloc(s->tab_size, sizeof(*s->tab));
        for (size_t i = 0; i < old_size; i++)
            for (struct session *y = old[i], *next; y != NULL; y = next) {
                next = y->hnext;
                size_t k = slot(s, y->id);
                y->hnext = s->tab[k];
                s->tab[k] = y;
            }
        free(old);
    }
    size_t k = slot(s, x->id);
    x->hnext = s->tab[k];
    s->tab[k] = x;
    s->count++;
}

static void unlink_session(struct ws_server *s, struct session *x)
{
    for (struct session **pp = &s->tab[slot(s, x->id)]; *pp != NULL; pp = &(*pp)->hnext)
        if (*pp == x) {
            *pp = x->hnext;
            s->count--;
            return;
        }
}

/* ---- sessions ------------------------------------------------------------------------ */

static void push(struct ws_server *s, enum xmsg_type type, uint64_t id, const void *data,
                 size_t len)
{
    xq_push(s->to_core, xmsg_new(type, id, data, len));
}

static void drop_outbox(struct session *x)
{
    for (struct xmsg *m = x->out_head, *next; m != NULL; m = next) {
        next = m->next;
        xmsg_free(m);
    }
    x->out_head = x->out_tail = NULL;
    x->out_count = 0;
}

/* Close after the outbox is flushed (or at once when drop is set). */
static void close_session(struct session *x, int code, const char *reason, int drop)
{
    if (drop)
        drop_outbox(x);
    if (x->close_code == 0) {
        x->close_code = code;
        snprintf(x->close_reason, sizeof(x->close_reason), "%s", reason);
        lws_set_timeout(x->wsi, PENDING_TIMEOUT_CLOSE_SEND, CLOSE_GRACE_SECS);
    }
    lws_callback_on_writable(x->wsi);
}

static void enqueue(struct ws_server *s, struct session *x, struct xmsg *m)
{
    m->next = NULL;
    if (x->out_tail)
        x->out_tail->next = m;
    else
        x->out_head = m;
    x->out_tail = m;
    x->out_count++;
    if (x->out_count > s->queue_max) {
        count(&s->st.slow_closed);
        log_info("dashboard session too slow: closed", "session=%llu queued=%zu",
                 (unsigned long long)x->id, x->out_count);
        close_session(x, WS_SERVER_CLOSE_SLOW, "send queue full", 1);
        return;
    }
    lws_callback_on_writable(x->wsi);
}

static int write_some(struct ws_server *s, struct session *x)
{
    for (int n = 0; x->out_head != NULL; n++) {
        if (n == WRITE_BURST || (n > 0 && lws_send_pipe_choked(x->wsi))) {
            lws_callback_on_writable(x->wsi);
            return 0;
        }
        struct xmsg *m = x->out_head;
        x->out_head = m->next;
        if (x->out_head == NULL)
            x->out_tail = NULL;
        x->out_count--;
        /* a shared frame's headroom is rewritten by each write: fine, one thread writes */
        unsigned char *p = m->shared ? m->shared->data : m->data;
        size_t len = m->shared ? m->shared->len : m->len;
        int w = lws_write(x->wsi, p, len, LWS_WRITE_TEXT);
        xmsg_free(m);
        if (w < (int)len)
            return -1;
        count(&s->st.frames_out);
    }
    if (x->close_code != 0) {
        lws_close_reason(x->wsi, (enum lws_close_status)x->close_code,
                         (unsigned char *)x->close_reason, strlen(x->close_reason));
        return -1;
    }
    return 0;
}

static int on_receive(struct ws_server *s, struct session *x, const void *in, size_t len)
{
    if (x->close_code != 0)
        return 0;
    if (x->rx_len + len > WS_SERVER_MAX_MSG) {
        static const char why[] = "message too big";
        lws_close_reason(x->wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, (unsigned char *)why,
                         sizeof(why) - 1);
        return -1;
    }
    if (lws_is_final_fragment(x->wsi) && x->rx_len == 0) {
        count(&s->st.msgs_in);
        push(s, XMSG_DASH_MSG, x->id, in, len);
        return 0;
    }
    x->rx = xrealloc(x->rx, x->rx_len + len);
    memcpy(x->rx + x->rx_len, in, len);
    x->rx_len += len;
    if (lws_is_final_fragment(x->wsi)) {
        count(&s->st.msgs_in);
        push(s, XMSG_DASH_MSG, x->id, x->rx, x->rx_len);
        free(x->rx);
        x->rx = NULL;
        x->rx_len = 0;
    }
    return 0;
}

/* ---- plain HTTP ------------------------------------------------------------------------ */

static int on_http(struct ws_server *s, struct lws *wsi, struct session *x, const char *uri)
{
    count(&s->st.http_requests);
    if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0 && strcmp(uri, "/") == 0) {
        unsigned char buf[LWS_PRE + 512], *start = buf + LWS_PRE, *p = start,
                                          *end = buf + sizeof(buf) - 1;
        if (lws_add_http_common_headers(wsi, HTTP_STATUS_OK, "text/html; charset=utf-8",
                                        sizeof(page) - 1, &p, end) ||
            lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
                                        (const unsigned char *)"no-store", 8, &p, end) ||
            lws_finalize_write_http_header(wsi, start, &p, end))
            return 1;
        x->http_body_due = 1;
        lws_callback_on_writable(wsi);
        return 0;
    }
    if (lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL))
        return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

static int on_http_writeable(struct lws *wsi, struct session *x)
{
    if (!x->http_body_due)
        return 0;
    unsigned char buf[LWS_PRE + sizeof(page)];
    memcpy(buf + LWS_PRE, page, sizeof(page) - 1);
    x->http_body_due = 0;
    if (lws_write(wsi, buf + LWS_PRE, sizeof(page) - 1, LWS_WRITE_HTTP_FINAL) !=
        (int)sizeof(page) - 1)
        return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* ---- the lws protocol callback ---------------------------------------------------------- */

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    const struct lws_protocols *proto = lws_get_protocol(wsi);
    struct ws_server *s = proto != NULL ? proto->user : NULL;
    struct session *x = user;
    if (s == NULL)
        return lws_callback_http_dummy(wsi, reason, user, in, len);

    switch (reason) {
    case LWS_CALLBACK_HTTP:
        return on_http(s, wsi, x, in != NULL ? in : "");
    case LWS_CALLBACK_HTTP_WRITEABLE:
        return on_http_writeable(wsi, x);

    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: {
        char uri[64];
        if (s->shutting_down || lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI) <= 0 ||
            strcmp(uri, "/") != 0)
            return 1; /* refuse the upgrade */
        return 0;
    }
    case LWS_CALLBACK_ESTABLISHED: {
        char peer[64] = "";
        x->wsi = wsi;
        x->id = ++s->next_id;
        insert(s, x);
        count(&s->st.opened);
        atomic_fetch_add(&s->st.sessions, 1);
        lws_get_peer_simple(wsi, peer, sizeof(peer));
        log_debug("dashboard session opened", "session=%llu peer=%s",
                  (unsigned long long)x->id, peer);
        push(s, XMSG_DASH_OPEN, x->id, peer, strlen(peer));
        return 0;
    }
    case LWS_CALLBACK_RECEIVE:
        return x->id != 0 ? on_receive(s, x, in, len) : 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return x->id != 0 ? write_some(s, x) : 0;
    case LWS_CALLBACK_CLOSED:
        if (x->id != 0) {
            unlink_session(s, x);
            drop_outbox(x);
            free(x->rx);
            x->rx = NULL;
            count(&s->st.closed);
            atomic_fetch_sub(&s->st.sessions, 1);
            log_debug("dashboard session closed", "session=%llu", (unsigned long long)x->id);
            push(s, XMSG_DASH_GONE, x->id, NULL, 0);
            x->id = 0;
        }
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

/* ---- module ------------------------------------------------------------------------------ */

struct ws_server *ws_server_new(struct xq *to_core, int64_t queue_max)
{
    struct ws_server *s = xcalloc(1, sizeof(*s));
    s->to_core = to_core;
    s->queue_max = queue_max > 0 ? (size_t)queue_max : 1024;
    s->tab_size = 64;
    s->tab = xcalloc(s->tab_size, sizeof(*s->tab));
    return s;
}

void ws_server_free(struct ws_server *s)
{
    if (s == NULL)
        return;
    /* sessions live in lws per-session memory: lws_context_destroy closed and freed them */
    free(s->tab);
    free(s);
}

void ws_server_protocol(struct ws_server *s, struct lws_protocols *out)
{
    memset(out, 0, sizeof(*out));
    out->name = "statusrelay-dashboard";
    out->callback = callback;
    out->per_session_data_size = sizeof(struct session);
    out->rx_buffer_size = 4096;
    out->user = s;
}

void ws_server_on_msg(struct ws_server *s, struct xmsg *m)
{
    struct session *x;
    switch (m->type) {
    case XMSG_DASH_SEND:
        x = find(s, m->session);
        if (x == NULL || x->close_code != 0)
            break;
        enqueue(s, x, m);
        return;
    case XMSG_DASH_CLOSE:
        x = find(s, m->session);
        if (x != NULL)
            close_session(x, m->code > 0 ? m->code : LWS_CLOSE_STATUS_NORMAL,
                          (const char *)m->data, 0);
        xmsg_free(m);
        return;
    case XMSG_DASH_EVENT:
    case XMSG_DASH_ACCEPT_SUB:
        if (atomic_fetch_add(&s->st.unrouted, 1) == 0)
            log_debug("dashboard fan-out not implemented yet: message dropped", "type=%d",
                      (int)m->type);
        xmsg_free(m);
        return;
    default:
        xmsg_free(m);
        return;
    }
    count(&s->st.dropped);
    xmsg_free(m);
}

void ws_server_shutdown(struct ws_server *s)
{
    s->shutting_down = 1;
    for (size_t i = 0; i < s->tab_size; i++)
        for (struct session *x = s->tab[i]; x != NULL; x = x->hnext)
            close_session(x, LWS_CLOSE_STATUS_GOINGAWAY, "shutdown", 1);
}

int ws_server_idle(const struct ws_server *s)
{
    return s->count == 0;
}

void ws_server_stats_read(const struct ws_server *s, struct ws_server_stats *out)
{
    struct counters *c = (struct counters *)&s->st;
    out->sessions = atomic_load(&c->sessions);
    out->opened = atomic_load(&c->opened);
    out->closed = atomic_load(&c->closed);
    out->msgs_in = atomic_load(&c->msgs_in);
    out->frames_out = atomic_load(&c->frames_out);
    out->dropped = atomic_load(&c->dropped);
    out->unrouted = atomic_load(&c->unrouted);
    out->slow_closed = atomic_load(&c->slow_closed);
    out->http_requests = atomic_load(&c->http_requests);
}
