/* upstream_ws.c - see upstream_ws.h. runs on: ws thread (stats: any thread).
 *
 * Which lws callbacks belong to the current connection: the connect info carries the attempt's
 * gen as the wsi's opaque user data. A callback is for the current connection when that gen
 * is u->gen and u->state is CONNECTING, OPEN or READY. conn_end() is the one place that ends
 * a connection: it pushes DOWN exactly once, moves the state out of that range (so later
 * callbacks of the old wsi are stale and ignored), and - when we end it ourselves - orphans
 * the wsi: a graceful close frame when upgraded, else an asynchronous kill. An orphan's gen
 * gets ORPHAN_BIT so upstream_ws_idle() can wait for it during shutdown.
 *
 * Timers are lws sorted-usec-list entries embedded here (lws_sul_*), all on this thread:
 * sul_retry (next attempt), sul_connect (connect timeout), sul_ping (ping period),
 * sul_deadline (no pong/data within ping_timeout of the first unanswered ping). */
#include "relay/edge/upstream_ws.h"
#include "protocol/normalize.h"
#include "protocol/ws_url.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/edge/xq.h"

#include <libwebsockets.h>
#include <openssl/x509_vfy.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ORPHAN_BIT ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1))
#define WRITE_BURST 32           /* frames per WRITEABLE callback, keeps the loop fair */
#define GREETING_MAX 4096        /* a ready greeting is small; bigger frames are not one */
#define CLOSE_GRACE_SECS 2       /* an orphan that cannot send its close frame is killed */

enum retry_how {
    RETRY_BACKOFF = 0,  /* capped exponential backoff with full jitter */
    RETRY_NOW,          /* at once (XMSG_UP_RECONNECT) */
    RETRY_RESTART,      /* the peer closed for a restart: at once, unless it did so recently */
};

enum end_how {
    END_BY_LWS,   /* lws reported the end (closed / connection error): the wsi is going away */
    END_KILL,     /* we drop it abruptly (timeouts) */
    END_CLOSE,    /* we close it with a close frame when upgraded (stop, reconnect, shutdown) */
};

struct up_counters {
    _Atomic int state;
    _Atomic uint64_t gen, attempts, reconnects, readies, downs, ping_timeouts, connect_timeouts,
        frames_in, bytes_in, frames_out, dropped_oversize, dropped_sends;
};

struct upstream_ws {
    struct lws_context *ctx;
    struct lws_vhost *vh;
    struct xq *to_core;
    /* settings, parsed once */
    int tls;
    int port;
    char *address;        /* host for connect(): name or literal, no brackets */
    char *host_hdr;       /* Host header: host[:port] */
    char *path;           /* path + query including apiKey= (secret: never logged) */
    char *log_url;        /* scheme://host:port/path without the query: safe to log */
    int64_t ping_interval_ms, ping_timeout_ms, connect_timeout_ms;
    lws_retry_bo_t retry; /* no lws validity pings: we run our own (ms resolution) */
    /* the connection */
    enum upstream_ws_state state;
    int wanted;           /* START seen and no STOP since */
    int first_attempt;    /* the next attempt is the first since START (not a reconnect) */
    int shutting_down;
    uint64_t gen;
    struct lws *wsi;      /* current connection, NULL when none */
    int orphans;          /* wsi we let go of that lws has not destroyed yet */
    int64_t ready_ms, last_restart_ms;
    unsigned fails;       /* consecutive failed attempts: backoff exponent */
    int peer_code;
    char peer_reason[124];
    char tls_error[112];  /* certificate verification failure of this attempt, for DOWN */
    int warned_preready;
    /* receive: one message being reassembled */
    unsigned char *rx;
    size_t rx_len, rx_cap;
    int rx_drop;
    /* send */
    struct xmsg *out_head, *out_tail;
    size_t out_count;
    int outbox_warned;
    int ping_due;
    int deadline_armed;
    lws_sorted_usec_list_t sul_retry, sul_connect, sul_ping, sul_deadline;
    struct up_counters st;
};

static const char *const state_names[] = {"idle", "backoff", "connecting", "open", "ready"};

const char *upstream_ws_state_name(int state)
{
    return state >= 0 && (size_t)state < ARRAY_LEN(state_names) ? state_names[state] : "?";
}

static void set_state(struct upstream_ws *u, enum upstream_ws_state s)
{
    u->state = s;
    atomic_store(&u->st.state, (int)s);
}

static void count(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* ---- settings ------------------------------------------------------------------------ */

/* The URL's parts into u (protocol/ws_url.h); u owns them. Returns 0 or -1. */
static int parse_url(struct upstream_ws *u, const char *url, const char *api_key)
{
    struct proto_ws_url w;
    if (proto_ws_url_parse(url, api_key, &w) != 0)
        return -1;
    u->tls = w.tls;
    u->port = w.port;
    u->address = w.address;
    u->host_hdr = w.host_hdr;
    u->path = w.target;
    u->log_url = w.log_url;
    return 0;
}

struct upstream_ws *upstream_ws_new(const struct upstream_ws_opts *o, struct xq *to_core)
{
    struct upstream_ws *u = xcalloc(1, sizeof(*u));
    u->to_core = to_core;
    if (o->url == NULL || parse_url(u, o->url, o->api_key) != 0) {
        log_err("upstream websocket URL is not usable (want ws:// or wss://host[:port][/path])",
                "url=%.*s", o->url ? (int)strcspn(o->url, "?#") : 6,
                o->url ? o->url : "(null)"); /* no query: it may hold a key */
        upstream_ws_free(u);
        return NULL;
    }
    u->ping_interval_ms = o->ping_interval_ms > 0 ? o->ping_interval_ms : 15000;
    u->ping_timeout_ms = o->ping_timeout_ms > 0 ? o->ping_timeout_ms : 2 * u->ping_interval_ms;
    u->connect_timeout_ms =
        o->connect_timeout_ms > 0 ? o->connect_timeout_ms : UPSTREAM_WS_CONNECT_TIMEOUT_MS;
    /* secs_since_valid_hangup = 0 switches lws's own validity pings off for this client */
    memset(&u->retry, 0, sizeof(u->retry));
    atomic_init(&u->st.state, UPSTREAM_WS_IDLE);
    return u;
}

static void free_outbox(struct upstream_ws *u)
{
    for (struct xmsg *m = u->out_head, *next; m != NULL; m = next) {
        next = m->next;
        xmsg_free(m);
    }
    u->out_head = u->out_tail = NULL;
    u->out_count = 0;
}

static void free_rx(struct upstream_ws *u)
{
    free(u->rx);
    u->rx = NULL;
    u->rx_len = u->rx_cap = 0;
    u->rx_drop = 0;
}

void upstream_ws_free(struct upstream_ws *u)
{
    if (u == NULL)
        return;
    free_outbox(u);
    free_rx(u);
    free(u->address);
    free(u->host_hdr);
    free(u->path);
    free(u->log_url);
    free(u);
}

int upstream_ws_uses_tls(const struct upstream_ws *u)
{
    return u->tls;
}

void upstream_ws_attach(struct upstream_ws *u, struct lws_context *ctx, struct lws_vhost *vh)
{
    u->ctx = ctx;
    u->vh = vh;
}

/* ---- to the core ---------------------------------------------------------------------- */

static void push(struct upstream_ws *u, enum xmsg_type type, int code, const void *data,
                 size_t len)
{
    struct xmsg *m = xmsg_new(type, 0, data, len);
    m->gen = u->gen;
    m->code = code;
    xq_push(u->to_core, m);
}

/* ---- timers and connection life -------------------------------------------------------- */

static void schedule(struct upstream_ws *u, lws_sorted_usec_list_t *sul, sul_cb_t cb,
                     int64_t ms)
{
    lws_sul_schedule(u->ctx, 0, sul, cb, (lws_usec_t)ms * LWS_US_PER_MS);
}

static void cancel_conn_timers(struct upstream_ws *u)
{
    lws_sul_cancel(&u->sul_connect);
    lws_sul_cancel(&u->sul_ping);
    lws_sul_cancel(&u->sul_deadline);
    u->deadline_armed = 0;
    u->ping_due = 0;
}

static int64_t backoff_ms(unsigned fails)
{
    int64_t ceil = UPSTREAM_WS_BACKOFF_BASE_MS;
    for (unsigned i = 0; i < fails && ceil < UPSTREAM_WS_BACKOFF_CAP_MS; i++)
        ceil *= 2;
    if (ceil > UPSTREAM_WS_BACKOFF_CAP_MS)
        ceil = UPSTREAM_WS_BACKOFF_CAP_MS;
    return (int64_t)jitter_rand((uint64_t)ceil + 1); /* full jitter: uniform in [0, ceil] */
}

static void on_retry(lws_sorted_usec_list_t *sul);

static int active(const struct upstream_ws *u)
{
    return u->state == UPSTREAM_WS_CONNECTING || u->state == UPSTREAM_WS_OPEN ||
           u->state == UPSTREAM_WS_READY;
}

static void wait_then_connect(struct upstream_ws *u, int64_t delay_ms)
{
    set_state(u, UPSTREAM_WS_BACKOFF);
    schedule(u, &u->sul_retry, on_retry, delay_ms);
}

/* The one way a connection ends. Pushes DOWN, lets go of the wsi unless lws already is
 * closing it, and schedules the next attempt when still wanted. */
static void conn_end(struct upstream_ws *u, int code, const char *reason, enum end_how how,
                     enum retry_how retry)
{
    int was_ready = u->state == UPSTREAM_WS_READY;
    int64_t now = mono_ms();
    cancel_conn_timers(u);
    free_outbox(u);
    free_rx(u);
    if (u->wsi != NULL && how != END_BY_LWS) {
        struct lws *w = u->wsi;
        lws_set_opaque_user_data(w, (void *)(uintptr_t)(u->gen | ORPHAN_BIT));
        u->orphans++;
        if (how == END_CLOSE && u->state != UPSTREAM_WS_CONNECTING) {
            lws_close_reason(w, (enum lws_close_status)code, (unsigned char *)reason,
                             strlen(reason));
            lws_set_timeout(w, PENDING_TIMEOUT_CLOSE_SEND, CLOSE_GRACE_SECS);
            lws_callback_on_writable(w); /* the orphan's WRITEABLE returns -1: close frame */
        } else {
            lws_set_timeout(w, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        }
    }
    u->wsi = NULL;
    count(&u->st.downs);
    push(u, XMSG_UP_DOWN, code, reason, strlen(reason));

    if (!u->wanted || u->shutting_down) {
        set_state(u, UPSTREAM_WS_IDLE);
        log_info("upstream websocket closed", "gen=%llu code=%d reason=\"%s\"",
                 (unsigned long long)u->gen, code, reason);
        return;
    }
    if (was_ready && now - u->ready_ms >= UPSTREAM_WS_STABLE_MS)
        u->fails = 0;
    int64_t delay;
    if (retry == RETRY_NOW) {
        delay = 0;
    } else if (retry == RETRY_RESTART && now - u->last_restart_ms >= UPSTREAM_WS_RESTART_GAP_MS) {
        delay = 0; /* rolling restart: the replacement is already up */
        u->last_restart_ms = now;
    } else {
        delay = backoff_ms(u->fails);
        if (u->fails < 32)
            u->fails++;
    }
    if (was_ready)
        log_warn("upstream websocket down", "gen=%llu code=%d reason=\"%s\" retry_in_ms=%lld",
                 (unsigned long long)u->gen, code, reason, (long long)delay);
    else
        log_warn("upstream websocket connect failed",
                 "gen=%llu url=%s code=%d reason=\"%s\" retry_in_ms=%lld",
                 (unsigned long long)u->gen, u->log_url, code, reason, (long long)delay);
    wait_then_connect(u, delay);
}

static void on_connect_timeout(lws_sorted_usec_list_t *sul)
{
    struct upstream_ws *u = container_of(sul, struct upstream_ws, sul_connect);
    if (u->state != UPSTREAM_WS_CONNECTING && u->state != UPSTREAM_WS_OPEN)
        return;
    count(&u->st.connect_timeouts);
    conn_end(u, 0, u->state == UPSTREAM_WS_OPEN ? "no ready greeting in time" : "connect timeout",
             END_KILL, RETRY_BACKOFF);
}

static void on_deadline(lws_sorted_usec_list_t *sul)
{
    struct upstream_ws *u = container_of(sul, struct upstream_ws, sul_deadline);
    u->deadline_armed = 0;
    if (u->state != UPSTREAM_WS_READY)
        return;
    count(&u->st.ping_timeouts);
    conn_end(u, 0, "ping timeout", END_KILL, RETRY_BACKOFF);
}

static void on_ping(lws_sorted_usec_list_t *sul)
{
    struct upstream_ws *u = container_of(sul, struct upstream_ws, sul_ping);
    if (u->state != UPSTREAM_WS_READY)
        return;
    u->ping_due = 1;
    lws_callback_on_writable(u->wsi);
    if (!u->deadline_armed) {
        u->deadline_armed = 1;
        schedule(u, &u->sul_deadline, on_deadline, u->ping_timeout_ms);
    }
    schedule(u, &u->sul_ping, on_ping, u->ping_interval_ms);
}

/* Anything received proves the peer alive. */
static void on_alive(struct upstream_ws *u)
{
    if (u->deadline_armed) {
        lws_sul_cancel(&u->sul_deadline);
        u->deadline_armed = 0;
    }
}

static void connect_now(struct upstream_ws *u)
{
    u->gen++;
    atomic_store(&u->st.gen, u->gen);
    count(&u->st.attempts);
    if (!u->first_attempt)
        count(&u->st.reconnects);
    u->first_attempt = 0;
    u->peer_code = 0;
    u->peer_reason[0] = '\0';
    u->tls_error[0] = '\0';
    u->warned_preready = 0;
    u->outbox_warned = 0;
    set_state(u, UPSTREAM_WS_CONNECTING);
    schedule(u, &u->sul_connect, on_connect_timeout, u->connect_timeout_ms);
    log_debug("upstream websocket connecting", "gen=%llu url=%s", (unsigned long long)u->gen,
              u->log_url);

    struct lws_client_connect_info i;
    memset(&i, 0, sizeof(i));
    i.context = u->ctx;
    i.vhost = u->vh;
    i.address = u->address;
    i.port = u->port;
    i.path = u->path;
    i.host = u->host_hdr;
    i.origin = NULL;
    i.protocol = NULL; /* no Sec-WebSocket-Protocol: the upstream speaks none */
    i.local_protocol_name = "statusrelay-upstream";
    i.ssl_connection = u->tls ? LCCSCF_USE_SSL : 0; /* verified: no self-signed, hostname check */
    i.retry_and_idle_policy = &u->retry;
    i.opaque_user_data = (void *)(uintptr_t)u->gen;
    struct lws *w = lws_client_connect_via_info(&i);
    if (w == NULL) {
        /* failed synchronously (DNS, socket): lws suppresses CONNECTION_ERROR in that case */
        if (active(u))
            conn_end(u, 0, "connect failed (name resolution or socket)", END_BY_LWS,
                     RETRY_BACKOFF);
        return;
    }
    if (active(u))
        u->wsi = w;
}

static void on_retry(lws_sorted_usec_list_t *sul)
{
    struct upstream_ws *u = container_of(sul, struct upstream_ws, sul_retry);
    if (u->state == UPSTREAM_WS_BACKOFF && u->wanted && !u->shutting_down)
        connect_now(u);
}

/* ---- receive ---------------------------------------------------------------------------- */

/* {"type":"connection","status":"ready","data":{"id":"..."}}: 1 and the socket id, else 0.
 * Read by the one upstream frame reader (protocol/normalize.c), as the core reads the rest. */
static int parse_greeting(const unsigned char *p, size_t n, char *sock, size_t sockn)
{
    if (n > GREETING_MAX) /* only frames before READY get here: parsing them is cheap */
        return 0;
    struct proto_ws_msg msg;
    struct status_event ev;
    struct proto_err err;
    int ok = proto_normalize_ws((const char *)p, n, 0, &msg, &ev, &err) == 0 &&
             msg.kind == PROTO_WS_READY;
    status_event_cleanup(&ev);
    if (ok) {
        size_t k = 0;
        for (; msg.ctl_id[k] != '\0' && k + 1 < sockn; k++) /* printable only: logged */
            sock[k] = msg.ctl_id[k] > 0x20 && msg.ctl_id[k] < 0x7f && msg.ctl_id[k] != '"'
                          ? msg.ctl_id[k]
                          : '?';
        sock[k] = '\0';
    }
    return ok;
}

static void on_message(struct upstream_ws *u, const unsigned char *p, size_t n)
{
    if (u->state == UPSTREAM_WS_OPEN) {
        char sock[80];
        if (parse_greeting(p, n, sock, sizeof(sock))) {
            lws_sul_cancel(&u->sul_connect);
            u->ready_ms = mono_ms();
            set_state(u, UPSTREAM_WS_READY);
            count(&u->st.readies);
            schedule(u, &u->sul_ping, on_ping, u->ping_interval_ms);
            log_info("upstream websocket connected", "gen=%llu url=%s socket=%s",
                     (unsigned long long)u->gen, u->log_url, sock);
            push(u, XMSG_UP_READY, 0, sock, strlen(sock));
            return;
        }
        if (!u->warned_preready) {
            u->warned_preready = 1;
            log_warn("upstream websocket frame before the ready greeting", "gen=%llu bytes=%zu",
                     (unsigned long long)u->gen, n);
        }
    }
    count(&u->st.frames_in);
    atomic_fetch_add_explicit(&u->st.bytes_in, n, memory_order_relaxed);
    push(u, XMSG_UP_FRAME, 0, p, n);
}

/* One RECEIVE chunk: a whole message, or a piece of a fragmented / large one. */
static void on_receive(struct upstream_ws *u, struct lws *wsi, const unsigned char *in,
                       size_t len)
{
    int final = lws_is_final_fragment(wsi);
    on_alive(u);
    if (final && u->rx_len == 0 && !u->rx_drop) { /* common case: no copy */
        on_message(u, in, len);
        return;
    }
    if (!u->rx_drop) {
        if (u->rx_len + len > UPSTREAM_WS_MAX_MSG) {
            u->rx_drop = 1;
            u->rx_len = 0;
        } else {
            if (u->rx_len + len > u->rx_cap) {
                size_t cap = u->rx_cap ? u->rx_cap : 4096;
                while (cap < u->rx_len + len)
                    cap *= 2;
                u->rx = xrealloc(u->rx, cap);
                u->rx_cap = cap;
            }
            memcpy(u->rx + u->rx_len, in, len);
            u->rx_len += len;
        }
    }
    if (!final)
        return;
    if (u->rx_drop) {
        uint64_t n = atomic_fetch_add(&u->st.dropped_oversize, 1) + 1;
        if (n == 1 || n % 100 == 0)
            log_warn("upstream websocket message over the size limit dropped",
                     "gen=%llu limit=%d dropped=%llu", (unsigned long long)u->gen,
                     UPSTREAM_WS_MAX_MSG, (unsigned long long)n);
        u->rx_drop = 0;
        u->rx_len = 0;
    } else {
        on_message(u, u->rx, u->rx_len);
        u->rx_len = 0;
    }
    if (u->rx_cap > 65536) { /* do not keep a big buffer around after a big message */
        free(u->rx);
        u->rx = NULL;
        u->rx_cap = 0;
    }
}

/* ---- send ------------------------------------------------------------------------------- */

static int on_writeable(struct upstream_ws *u, struct lws *wsi)
{
    if (u->ping_due) {
        unsigned char buf[LWS_PRE + 8];
        memcpy(buf + LWS_PRE, "sr", 2);
        u->ping_due = 0;
        if (lws_write(wsi, buf + LWS_PRE, 2, LWS_WRITE_PING) < 2)
            return -1;
        if (lws_partial_buffered(wsi)) {
            if (u->out_head != NULL)
                lws_callback_on_writable(wsi);
            return 0;
        }
    }
    /* lws_partial_buffered, not lws_send_pipe_choked: that one is a poll() per frame; a write
     * the kernel took only part of is kept by lws and sent first when writable again */
    for (int n = 0; u->out_head != NULL; n++) {
        if (n == WRITE_BURST || (n > 0 && lws_partial_buffered(wsi))) {
            lws_callback_on_writable(wsi);
            break;
        }
        struct xmsg *m = u->out_head;
        u->out_head = m->next;
        if (u->out_head == NULL)
            u->out_tail = NULL;
        u->out_count--;
        size_t len = m->len;
        int w = lws_write(wsi, m->data, len, LWS_WRITE_TEXT);
        xmsg_free(m);
        if (w < (int)len)
            return -1;
        count(&u->st.frames_out);
    }
    return 0;
}

static void enqueue(struct upstream_ws *u, struct xmsg *m)
{
    if (u->out_count >= UPSTREAM_WS_OUTBOX_MAX) {
        count(&u->st.dropped_sends);
        if (!u->outbox_warned) {
            u->outbox_warned = 1;
            log_warn("upstream websocket send queue full: frames dropped", "gen=%llu max=%d",
                     (unsigned long long)u->gen, UPSTREAM_WS_OUTBOX_MAX);
        }
        xmsg_free(m);
        return;
    }
    m->next = NULL;
    if (u->out_tail)
        u->out_tail->next = m;
    else
        u->out_head = m;
    u->out_tail = m;
    u->out_count++;
    lws_callback_on_writable(u->wsi);
}

/* ---- messages from the core ------------------------------------------------------------- */

void upstream_ws_on_msg(struct upstream_ws *u, struct xmsg *m)
{
    switch (m->type) {
    case XMSG_UP_START:
        if (!u->wanted && !u->shutting_down) {
            u->wanted = 1;
            u->first_attempt = 1;
            u->fails = 0;
            if (!active(u))
                wait_then_connect(u, 0); /* from a timer: never connect inside a broadcast */
        }
        break;
    case XMSG_UP_STOP:
        if (u->wanted) {
            u->wanted = 0;
            if (active(u)) {
                conn_end(u, 1000, "stopped", END_CLOSE, RETRY_BACKOFF); /* logs "closed" */
            } else {
                lws_sul_cancel(&u->sul_retry);
                set_state(u, UPSTREAM_WS_IDLE);
                log_info("upstream websocket stopped", "gen=%llu", (unsigned long long)u->gen);
            }
        }
        break;
    case XMSG_UP_RECONNECT:
        if (!u->wanted || u->shutting_down)
            break;
        if (active(u))
            conn_end(u, 1000, "reconnect requested", END_CLOSE, RETRY_NOW); /* logs "down" */
        else
            wait_then_connect(u, 0);
        break;
    case XMSG_UP_SEND:
        if (m->gen == u->gen && u->state == UPSTREAM_WS_READY && u->wsi != NULL) {
            enqueue(u, m);
            return;
        }
        count(&u->st.dropped_sends);
        break;
    default:
        break;
    }
    xmsg_free(m);
}

void upstream_ws_shutdown(struct upstream_ws *u)
{
    if (u->shutting_down)
        return;
    u->shutting_down = 1;
    u->wanted = 0;
    if (active(u))
        conn_end(u, 1001, "shutdown", END_CLOSE, RETRY_BACKOFF);
    if (u->ctx != NULL) {
        lws_sul_cancel(&u->sul_retry);
        cancel_conn_timers(u);
    }
    set_state(u, UPSTREAM_WS_IDLE);
}

int upstream_ws_idle(const struct upstream_ws *u)
{
    return !active(u) && u->orphans == 0;
}

/* ---- the lws protocol callback ---------------------------------------------------------- */

/* CLIENT_CONNECTION_ERROR of the current connection: end it with the best reason we have. */
static void on_connection_error(struct upstream_ws *u, const char *in, size_t len)
{
    char why[160];
    if (u->tls_error[0] != '\0') /* lws's own text for it is an opaque SSL error */
        snprintf(why, sizeof(why), "%s", u->tls_error);
    else if (in != NULL && len > 0)
        snprintf(why, sizeof(why), "%.*s", (int)strnlen(in, len), in);
    else
        snprintf(why, sizeof(why), "connection error");
    conn_end(u, 0, why, END_BY_LWS, RETRY_BACKOFF);
}

/* OPENSSL_PERFORM_SERVER_CERT_VERIFICATION of the current connection: user = X509_STORE_CTX,
 * preverify_ok = OpenSSL's verdict so far. Only notes the reason of a refusal for DOWN. */
static void on_cert_verify(struct upstream_ws *u, void *user, size_t preverify_ok)
{
    if (preverify_ok == 0 && user != NULL) {
        int err = X509_STORE_CTX_get_error((X509_STORE_CTX *)user);
        if (err != X509_V_OK)
            snprintf(u->tls_error, sizeof(u->tls_error), "certificate verify failed: %s",
                     X509_verify_cert_error_string(err));
    }
}

/* WS_PEER_INITIATED_CLOSE of the current connection: keep the peer's code and reason (len >= 2)
 * for CLIENT_CLOSED. */
static void on_peer_close(struct upstream_ws *u, const unsigned char *b, size_t len)
{
    u->peer_code = (b[0] << 8) | b[1];
    size_t rl = len - 2 < sizeof(u->peer_reason) - 1 ? len - 2 : sizeof(u->peer_reason) - 1;
    for (size_t k = 0; k < rl; k++) /* logged and sent to the core: printable only */
        u->peer_reason[k] = b[2 + k] >= 0x20 && b[2 + k] < 0x7f && b[2 + k] != '"'
                                ? (char)b[2 + k] : '?';
    u->peer_reason[rl] = '\0';
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    const struct lws_protocols *proto = lws_get_protocol(wsi);
    struct upstream_ws *u = proto != NULL ? proto->user : NULL;
    if (u == NULL)
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    uintptr_t tag = 0;
    int current = 0;
    switch (reason) {
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
    case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
    case LWS_CALLBACK_CLIENT_RECEIVE:
    case LWS_CALLBACK_CLIENT_RECEIVE_PONG:
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
    case LWS_CALLBACK_CLIENT_CLOSED:
    case LWS_CALLBACK_CLIENT_WRITEABLE:
    case LWS_CALLBACK_WSI_DESTROY:
    case LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION:
        tag = (uintptr_t)lws_get_opaque_user_data(wsi);
        current = tag != 0 && tag == u->gen && active(u);
        break;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }

    switch (reason) {
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        if (current)
            on_connection_error(u, in, len);
        return 0;
    case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
        return current ? 0 : -1;
    case LWS_CALLBACK_OPENSSL_PERFORM_SERVER_CERT_VERIFICATION:
        /* user = X509_STORE_CTX, len = OpenSSL's preverify_ok; lws sends this to the context's
         * first protocol, which is ours (ws_thread creates the client vhost first). Only
         * note the reason: returning 0 keeps OpenSSL's verdict. */
        if (current)
            on_cert_verify(u, user, len);
        return 0;
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        if (!current)
            return -1;
        if (u->wsi == NULL)
            u->wsi = wsi;
        set_state(u, UPSTREAM_WS_OPEN);
        return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        if (!current)
            return (tag & ORPHAN_BIT) ? 0 : -1; /* let a closing orphan finish its handshake */
        on_receive(u, wsi, in, len);
        return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE_PONG:
        if (current)
            on_alive(u);
        return 0;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        if (current && len >= 2)
            on_peer_close(u, in, len);
        return 0; /* lws answers the close */
    case LWS_CALLBACK_CLIENT_CLOSED:
        /* lws 4.1 hands PEER_INITIATED_CLOSE 1002 for a received 1012 (it folds 1012..1015
         * and other codes it deems reserved into 1002), so both mean "maybe a restart" */
        if (current)
            conn_end(u, u->peer_code, u->peer_code ? u->peer_reason : "connection lost",
                     END_BY_LWS,
                     u->peer_code == 1012 || u->peer_code == 1002 ? RETRY_RESTART
                                                                  : RETRY_BACKOFF);
        return 0;
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        if (!current)
            return -1; /* an orphan: lws sends the close frame set by lws_close_reason */
        return on_writeable(u, wsi);
    case LWS_CALLBACK_WSI_DESTROY:
        if (tag & ORPHAN_BIT)
            u->orphans--;
        else if (current && (u->wsi == wsi || u->wsi == NULL)) /* safety net: DOWN once */
            conn_end(u, u->peer_code, "connection destroyed", END_BY_LWS, RETRY_BACKOFF);
        return 0;
    default:
        return 0;
    }
}

void upstream_ws_protocol(struct upstream_ws *u, struct lws_protocols *out)
{
    memset(out, 0, sizeof(*out));
    out->name = "statusrelay-upstream";
    out->callback = callback;
    out->per_session_data_size = 0;
    out->rx_buffer_size = 16384;
    out->user = u;
}

void upstream_ws_stats_read(const struct upstream_ws *u, struct upstream_ws_stats *out)
{
    struct up_counters *c = (struct up_counters *)&u->st;
    out->state = atomic_load(&c->state);
    out->gen = atomic_load(&c->gen);
    out->attempts = atomic_load(&c->attempts);
    out->reconnects = atomic_load(&c->reconnects);
    out->readies = atomic_load(&c->readies);
    out->downs = atomic_load(&c->downs);
    out->ping_timeouts = atomic_load(&c->ping_timeouts);
    out->connect_timeouts = atomic_load(&c->connect_timeouts);
    out->frames_in = atomic_load(&c->frames_in);
    out->bytes_in = atomic_load(&c->bytes_in);
    out->frames_out = atomic_load(&c->frames_out);
    out->dropped_oversize = atomic_load(&c->dropped_oversize);
    out->dropped_sends = atomic_load(&c->dropped_sends);
}
