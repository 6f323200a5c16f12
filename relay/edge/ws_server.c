/* ws_server.c - see ws_server.h. runs on: ws thread (stats: any thread).
 *
 * Sessions are lws per-session data (struct session, zeroed by lws). A websocket session gets
 * its id at ESTABLISHED and sits in an id -> session hash until CLOSED; plain HTTP
 * connections use the same struct with id 0. Messages from the core name a session by id
 * only, so a message for a session that is gone is simply dropped.
 *
 * Ownership: an XMSG_DASH_EVENT becomes a struct wev (plain refcount: only this thread sees
 * it) referenced by one outbox slot per recipient; the last slot written or dropped frees
 * the message and so its xbuf. XMSG_DASH_SEND messages are owned by their one slot.
 * The outbox is ws_outbox.c's, plain HTTP and the Host rule ws_http.c's (ws_internal.h). */
#include "relay/edge/ws_internal.h"
#include "relay/edge/dash_filter.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/edge/xq.h"

#include <libwebsockets.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

/* ---- filters ------------------------------------------------------------------------- */

static void isub_add(struct ws_server *s, struct session *x, const char *id)
{
    if (s->icount + 1 > s->itab_size) {
        size_t old_size = s->itab_size;
        struct isub **old = s->itab;
        s->itab_size *= 2;
        s->itab = xcalloc(s->itab_size, sizeof(*s->itab));
        for (size_t i = 0; i < old_size; i++)
            for (struct isub *y = old[i], *next; y != NULL; y = next) {
                next = y->hnext;
                size_t k = y->h & (s->itab_size - 1);
                y->hnext = s->itab[k];
                s->itab[k] = y;
            }
        free(old);
    }
    size_t n = strlen(id);
    struct isub *u = xmalloc(sizeof(*u) + n + 1);
    memcpy(u->id, id, n + 1);
    u->h = hash_str(id);
    u->x = x;
    size_t k = u->h & (s->itab_size - 1);
    u->hnext = s->itab[k];
    s->itab[k] = u;
    u->snext = x->ids;
    x->ids = u;
    s->icount++;
    count(&s->st.id_subs);
}

static void isub_unhash(struct ws_server *s, struct isub *u)
{
    for (struct isub **pp = &s->itab[u->h & (s->itab_size - 1)]; *pp != NULL;
         pp = &(*pp)->hnext)
        if (*pp == u) {
            *pp = u->hnext;
            s->icount--;
            sub(&s->st.id_subs, 1);
            return;
        }
}

static void isub_del(struct ws_server *s, struct session *x, const char *id)
{
    for (struct isub **pp = &x->ids; *pp != NULL; pp = &(*pp)->snext)
        if (strcmp((*pp)->id, id) == 0) {
            struct isub *u = *pp;
            *pp = u->snext;
            isub_unhash(s, u);
            free(u);
            return;
        }
}

static void broad_link(struct ws_server *s, struct session *x)
{
    x->bprev = NULL;
    x->bnext = s->broad_head;
    if (s->broad_head)
        s->broad_head->bprev = x;
    s->broad_head = x;
}

static void broad_unlink(struct ws_server *s, struct session *x)
{
    if (x->bprev)
        x->bprev->bnext = x->bnext;
    else
        s->broad_head = x->bnext;
    if (x->bnext)
        x->bnext->bprev = x->bprev;
    x->bprev = x->bnext = NULL;
}

static void broad_add(struct ws_server *s, struct session *x, uint64_t no, const char *text,
                      size_t len)
{
    struct proto_filter f;
    if (dash_broad_parse(text, len, &f) != 0) {
        log_warn("dashboard filter unreadable, ignored", "session=%llu",
                 (unsigned long long)x->id);
        return;
    }
    x->broad = xrealloc(x->broad, (x->nbroad + 1) * sizeof(*x->broad));
    x->broad[x->nbroad].no = no;
    x->broad[x->nbroad].all = dash_broad_is_all(&f);
    x->broad[x->nbroad].f = f;
    if (x->nbroad++ == 0)
        broad_link(s, x);
    count(&s->st.broad_subs);
}

static void broad_del(struct ws_server *s, struct session *x, uint64_t no)
{
    for (size_t i = 0; i < x->nbroad; i++)
        if (x->broad[i].no == no) {
            dash_broad_cleanup(&x->broad[i].f);
            x->broad[i] = x->broad[--x->nbroad];
            sub(&s->st.broad_subs, 1);
            if (x->nbroad == 0) {
                broad_unlink(s, x);
                free(x->broad);
                x->broad = NULL;
            }
            return;
        }
}

static void filters_clear(struct ws_server *s, struct session *x)
{
    for (struct isub *u = x->ids, *next; u != NULL; u = next) {
        next = u->snext;
        isub_unhash(s, u);
        free(u);
    }
    x->ids = NULL;
    while (x->nbroad > 0)
        broad_del(s, x, x->broad[x->nbroad - 1].no);
}

/* ---- routing ------------------------------------------------------------------------- */

static void deliver(struct ws_server *s, struct session *x, struct wev **ev, struct xmsg *m)
{
    if (x->close_code != 0 || x->serial == s->serial)
        return;
    x->serial = s->serial;
    if (*ev == NULL) {
        *ev = xcalloc(1, sizeof(**ev));
        (*ev)->refs = 1; /* ours until routing is done */
        (*ev)->m = m;
    }
    (*ev)->refs++;
    count(&s->st.deliveries);
    ws_outbox_push(s, x, *ev, NULL);
}

static void route_event(struct ws_server *s, struct xmsg *m)
{
    uint64_t t0 = mono_ns();
    struct wev *ev = NULL;
    s->serial++;
    count(&s->st.events_in);
    uint32_t h = hash_str(m->key);
    for (struct isub *u = s->itab[h & (s->itab_size - 1)]; u != NULL; u = u->hnext)
        if (m->ev_type == 0 && u->h == h && strcmp(u->id, m->key) == 0) /* status events */
            deliver(s, u->x, &ev, m);
    struct dash_frame fr;
    dash_frame_init(&fr, m->shared ? (const char *)m->shared->data : (const char *)m->data,
                    m->shared ? m->shared->len : m->len, m->status, m->key, m->origin_chain_id,
                    m->destination_chain_id);
    dash_frame_type(&fr, m->ev_type);
    /* "everything" filters (the common dashboard) all answer as the empty one: once per event */
    struct proto_filter none;
    memset(&none, 0, sizeof(none));
    int all = -1;
    for (struct session *x = s->broad_head; x != NULL; x = x->bnext)
        for (size_t i = 0; i < x->nbroad; i++) {
            int ok;
            if (x->broad[i].all)
                ok = all >= 0 ? all : (all = dash_broad_match(&none, &fr));
            else
                ok = dash_broad_match(&x->broad[i].f, &fr);
            if (ok) {
                deliver(s, x, &ev, m);
                break;
            }
        }
    dash_frame_cleanup(&fr);
    if (ev == NULL) {
        count(&s->st.unrouted);
        xmsg_free(m);
    } else {
        ws_wev_unref(ev);
    }
    add(&s->st.route_ns, mono_ns() - t0);
}

/* ---- liveness ------------------------------------------------------------------------ */

static int64_t sweep_period_ms(const struct ws_server *s)
{
    int64_t p = s->ping_interval_ms / 2;
    if (p > s->ping_timeout_ms / 4)
        p = s->ping_timeout_ms / 4;
    return p < 50 ? 50 : p > 1000 ? 1000 : p;
}

static void on_sweep(lws_sorted_usec_list_t *sul)
{
    struct ws_server *s = container_of(sul, struct ws_server, sul_sweep);
    int64_t now = mono_ms();
    for (size_t i = 0; i < s->tab_size; i++)
        for (struct session *x = s->tab[i]; x != NULL; x = x->hnext) {
            if (x->close_code != 0)
                continue;
            int64_t idle = now - x->last_rx_ms;
            if (idle >= s->ping_timeout_ms) {
                count(&s->st.dead_peers);
                log_info("dashboard session silent: dropped", "session=%llu silent_ms=%lld",
                         (unsigned long long)x->id, (long long)idle);
                ws_outbox_drop(s, x);
                x->close_code = LWS_CLOSE_STATUS_ABNORMAL_CLOSE; /* nothing more is sent */
                x->close_sent = 1;
                lws_set_timeout(x->wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
            } else if (idle >= s->ping_interval_ms &&
                       now - x->last_ping_ms >= s->ping_interval_ms) {
                x->last_ping_ms = now;
                x->ping_due = 1;
                lws_callback_on_writable(x->wsi);
            }
        }
    if (!s->shutting_down)
        lws_sul_schedule(s->ctx, 0, &s->sul_sweep, on_sweep,
                         (lws_usec_t)sweep_period_ms(s) * LWS_US_PER_MS);
}

static void on_config(struct ws_server *s, const struct xmsg *m)
{
    long long iv = 0, to = 0;
    if (sscanf((const char *)m->data, "%lld %lld", &iv, &to) != 2 || iv <= 0 || to <= iv)
        return;
    s->ping_interval_ms = iv;
    s->ping_timeout_ms = to;
    if (s->ctx != NULL && !s->shutting_down)
        lws_sul_schedule(s->ctx, 0, &s->sul_sweep, on_sweep,
                         (lws_usec_t)sweep_period_ms(s) * LWS_US_PER_MS);
}

/* ---- receiving ----------------------------------------------------------------------- */

/* Client control frames cost CPU like messages but never reach the core's message rate: lws
 * answers a ping itself and tells us nothing. What it does tell: after writing the pong it
 * leaves POLLOUT armed, so each answered ping shows as one SERVER_WRITEABLE with nothing of
 * ours to write (no frame queued or partly sent, no ping due, no close) - pings arriving while a pong is
 * pending are dropped by lws unanswered, so these count the pings that cost a write. Those
 * and every pong (RECEIVE_PONG) draw from a bucket of CTL_BURST refilled at CTL_RATE a
 * second; an empty bucket closes the session with 1008, like a message flood. 0: fine. */
static int control_rate_ok(struct ws_server *s, struct session *x)
{
    int64_t now = mono_ms();
    if (x->ctl_bucket_ms == 0) {
        x->ctl_tokens = CTL_BURST;
    } else {
        x->ctl_tokens += (double)(now - x->ctl_bucket_ms) / 1000.0 * CTL_RATE;
        if (x->ctl_tokens > CTL_BURST)
            x->ctl_tokens = CTL_BURST;
    }
    x->ctl_bucket_ms = now;
    x->ctl_tokens -= 1;
    if (x->ctl_tokens >= 0)
        return 0;
    if (x->close_code == 0) {
        log_info("dashboard session over its control frame rate: closed", "session=%llu",
                 (unsigned long long)x->id);
        ws_session_close(s, x, WS_SERVER_CLOSE_POLICY, "control frame rate exceeded", 1);
    }
    return -1;
}

static void push(struct ws_server *s, struct xmsg *m)
{
    xq_push(s->to_core, m);
}

static int on_receive(struct ws_server *s, struct session *x, const void *in, size_t len)
{
    x->last_rx_ms = mono_ms();
    if (x->close_code != 0)
        return 0;
    if (x->rx_len + len > WS_SERVER_MAX_MSG) {
        /* the lingering close (write_some), not a return of -1: the client is still sending
         * the rest of its message (many small fragments, say), and closing the socket on
         * unread data makes the kernel reset it - the client would see EOF, not 1009 */
        free(x->rx);
        x->rx = NULL;
        x->rx_len = 0;
        log_debug("dashboard message too big: closed", "session=%llu limit=%d",
                 (unsigned long long)x->id, WS_SERVER_MAX_MSG);
        ws_session_close(s, x, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, "message too big", 1);
        return 0;
    }
    if (lws_is_final_fragment(x->wsi) && x->rx_len == 0) {
        count(&s->st.msgs_in);
        push(s, xmsg_new(XMSG_DASH_MSG, x->id, in, len));
        return 0;
    }
    x->rx = xrealloc(x->rx, x->rx_len + len);
    memcpy(x->rx + x->rx_len, in, len);
    x->rx_len += len;
    if (lws_is_final_fragment(x->wsi)) {
        count(&s->st.msgs_in);
        push(s, xmsg_new(XMSG_DASH_MSG, x->id, x->rx, x->rx_len));
        free(x->rx);
        x->rx = NULL;
        x->rx_len = 0;
    }
    return 0;
}

/* 1 when a browser page of another origin opened the socket: a browser Origin
 * ("scheme://host[:port]" or "null") whose host:port differs from Host. Tools send no
 * Origin, or a bare host. */
static int cross_origin(struct lws *wsi)
{
    char origin[256], host[256];
    if (lws_hdr_copy(wsi, origin, sizeof(origin), WSI_TOKEN_ORIGIN) <= 0)
        return 0;
    if (strcmp(origin, "null") == 0)
        return 1;
    const char *o = strstr(origin, "://");
    if (o == NULL)
        return 0;
    if (lws_hdr_copy(wsi, host, sizeof(host), WSI_TOKEN_HOST) <= 0)
        return 1;
    return strcasecmp(o + 3, host) != 0;
}

static void on_established(struct ws_server *s, struct lws *wsi, struct session *x)
{
    char peer[64] = "", tokbuf[sizeof(((struct xmsg *)0)->key) + 8];
    x->wsi = wsi;
    x->id = ++s->next_id;
    x->last_rx_ms = x->last_ping_ms = mono_ms();
    insert(s, x);
    count(&s->st.opened);
    count(&s->st.sessions);
    int sndbuf = WS_SERVER_SNDBUF;
    setsockopt(lws_get_socket_fd(wsi), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    struct proto_ip client; /* the peer, or a trusted proxy's forwarded client */
    int proxied = 0;
    if (ws_http_client(s, wsi, &client, &proxied) == 0)
        proto_ip_format(&client, peer, sizeof(peer));
    else
        lws_get_peer_simple(wsi, peer, sizeof(peer));
    struct xmsg *m = xmsg_new(XMSG_DASH_OPEN, x->id, peer, strlen(peer));
    const char *tok = lws_get_urlarg_by_name(wsi, "token=", tokbuf, (int)sizeof(tokbuf));
    if (tok != NULL && strlen(tok) < sizeof(m->key))
        snprintf(m->key, sizeof(m->key), "%s", tok);
    m->code = cross_origin(wsi);
    log_debug("dashboard session opened", "session=%llu peer=%s cross_origin=%d",
              (unsigned long long)x->id, peer, m->code);
    push(s, m);
}

static void on_closed(struct ws_server *s, struct session *x)
{
    unlink_session(s, x);
    ws_outbox_drop(s, x);
    filters_clear(s, x);
    free(x->rx);
    x->rx = NULL;
    count(&s->st.closed);
    sub(&s->st.sessions, 1);
    log_debug("dashboard session closed", "session=%llu", (unsigned long long)x->id);
    push(s, xmsg_new(XMSG_DASH_GONE, x->id, NULL, 0));
    x->id = 0;
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
    case LWS_CALLBACK_PROTOCOL_INIT:
        s->ctx = lws_get_context(wsi);
        lws_sul_schedule(s->ctx, 0, &s->sul_sweep, on_sweep,
                         (lws_usec_t)sweep_period_ms(s) * LWS_US_PER_MS);
        return 0;
    case LWS_CALLBACK_PROTOCOL_DESTROY:
        lws_sul_cancel(&s->sul_sweep);
        return 0;
    case LWS_CALLBACK_HTTP:
        return ws_http_on_request(s, wsi, x, in != NULL ? in : "");
    case LWS_CALLBACK_HTTP_WRITEABLE:
        return ws_http_on_writeable(wsi, x);
    case LWS_CALLBACK_CLOSED_HTTP: /* a transfer cut short: drop its chain list reference */
        if (x != NULL) {
            xbuf_unref(x->blob);
            x->blob = NULL;
        }
        return lws_callback_http_dummy(wsi, reason, user, in, len);

    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: {
        char uri[64];
        if (s->shutting_down || lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI) <= 0 ||
            strcmp(uri, "/") != 0)
            return 1; /* refuse the upgrade */
        if (ws_http_host_refused(s, wsi)) {
            ws_http_log_refused_host(s, wsi, "upgrade");
            lws_return_http_status(wsi, HTTP_STATUS_FORBIDDEN, "forbidden_host");
            return 1;
        }
        if (ws_http_client_over_cap(s, wsi)) { /* a trusted proxy's client, per address */
            lws_return_http_status(wsi, HTTP_STATUS_SERVICE_UNAVAILABLE,
                                   "too many connections from this address");
            return 1;
        }
        return 0;
    }
    case LWS_CALLBACK_ESTABLISHED:
        on_established(s, wsi, x);
        return 0;
    case LWS_CALLBACK_RECEIVE:
        return x->id != 0 ? on_receive(s, x, in, len) : 0;
    case LWS_CALLBACK_RECEIVE_PONG:
        if (x->id != 0 && control_rate_ok(s, x) == 0)
            x->last_rx_ms = mono_ms();
        return 0;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        /* The peer's answer to the close frame write_some sent itself: lws does not know it
         * was ours and would echo a second close, which browsers reject ("Close received
         * after close") and report as 1006 instead of our code. Non-zero: close, no echo. */
        return x->id != 0 && x->close_sent ? 1 : 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (x->id == 0)
            return 0;
        if (x->out_count == 0 && !x->ping_due && x->close_code == 0 && x->held == 0)
            control_rate_ok(s, x); /* lws just answered a ping: see control_rate_ok */
        return ws_outbox_write(s, x);
    case LWS_CALLBACK_CLOSED:
        if (x->id != 0)
            on_closed(s, x);
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

/* ---- module ------------------------------------------------------------------------------ */

struct ws_server *ws_server_new(struct xq *to_core, int64_t queue_max, int64_t queue_bytes)
{
    struct ws_server *s = xcalloc(1, sizeof(*s));
    s->to_core = to_core;
    s->cors_origins = NULL;
    s->queue_max = queue_max > 0 ? (size_t)queue_max : 1024;
    s->queue_bytes = queue_bytes > 0 ? (size_t)queue_bytes : WS_SERVER_QUEUE_BYTES;
    s->tab_size = 64;
    s->tab = xcalloc(s->tab_size, sizeof(*s->tab));
    s->itab_size = 256;
    s->itab = xcalloc(s->itab_size, sizeof(*s->itab));
    s->ping_interval_ms = WS_SERVER_PING_INTERVAL_MS;
    s->ping_timeout_ms = WS_SERVER_PING_TIMEOUT_MS;
    return s;
}

void ws_server_free(struct ws_server *s)
{
    if (s == NULL)
        return;
    /* sessions live in lws per-session memory: lws_context_destroy closed and freed them
     * (CLOSED cleared their filters and outboxes) */
    xbuf_unref(s->chains);
    free(s->wbuf);
    free(s->tab);
    free(s->itab);
    free(s->cors_origins);
    free(s->allowed_hosts);
    free(s);
}

void ws_server_set_cors_origins(struct ws_server *s, const char *origins)
{
    free(s->cors_origins);
    s->cors_origins = origins != NULL && origins[0] != '\0' ? xstrdup(origins) : NULL;
}

void ws_server_set_host_rule(struct ws_server *s, int check, const char *allowed_hosts)
{
    s->host_check = check;
    free(s->allowed_hosts);
    s->allowed_hosts = allowed_hosts != NULL && allowed_hosts[0] != '\0'
                           ? xstrdup(allowed_hosts) : NULL;
}

void ws_server_set_trusted(struct ws_server *s, const struct proto_cidr_list *trusted)
{
    if (trusted != NULL)
        s->trusted = *trusted;
    else
        s->trusted.n = 0;
}

void ws_server_protocol(struct ws_server *s, struct lws_protocols *out)
{
    memset(out, 0, sizeof(*out));
    out->name = "statusrelay-dashboard";
    out->callback = callback;
    out->per_session_data_size = sizeof(struct session);
    out->rx_buffer_size = 4096;
    out->tx_packet_size = WRITE_BATCH_BYTES; /* a batch of frames in one send (ws_outbox.c) */
    out->user = s;
}

static void on_filter_op(struct ws_server *s, struct xmsg *m)
{
    if (m->session == 0) {
        if (m->code == DASH_OP_CONFIG)
            on_config(s, m);
        if (m->code == DASH_OP_CHAINS) { /* sessions sending the old list keep their ref */
            xbuf_unref(s->chains);
            s->chains = xbuf_new(m->data, m->len);
        }
        return;
    }
    struct session *x = find(s, m->session);
    if (x == NULL || x->close_code != 0) {
        count(&s->st.dropped);
        return;
    }
    switch (m->code) {
    case DASH_OP_ADD_ID:
        isub_add(s, x, m->key);
        break;
    case DASH_OP_DEL_ID:
        isub_del(s, x, m->key);
        break;
    case DASH_OP_ADD_BROAD:
        broad_add(s, x, m->gen, (const char *)m->data, m->len);
        break;
    case DASH_OP_DEL_BROAD:
        broad_del(s, x, m->gen);
        break;
    default:
        break;
    }
}

void ws_server_on_msg(struct ws_server *s, struct xmsg *m)
{
    struct session *x;
    switch (m->type) {
    case XMSG_DASH_SEND:
        x = find(s, m->session);
        if (x == NULL || x->close_code != 0)
            break;
        ws_outbox_push(s, x, NULL, m);
        return;
    case XMSG_DASH_EVENT:
        if (m->shared == NULL)
            break;
        route_event(s, m);
        return;
    case XMSG_DASH_CLOSE:
        x = find(s, m->session);
        if (x != NULL)
            ws_session_close(s, x, m->code > 0 ? m->code : LWS_CLOSE_STATUS_NORMAL,
                          (const char *)m->data, 0);
        xmsg_free(m);
        return;
    case XMSG_DASH_ACCEPT_SUB:
        on_filter_op(s, m);
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
            ws_session_close(s, x, LWS_CLOSE_STATUS_GOINGAWAY, "shutdown", 1);
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
    out->frame_writes = atomic_load(&c->frame_writes);
    out->dropped = atomic_load(&c->dropped);
    out->unrouted = atomic_load(&c->unrouted);
    out->slow_closed = atomic_load(&c->slow_closed);
    out->http_requests = atomic_load(&c->http_requests);
    out->events_in = atomic_load(&c->events_in);
    out->deliveries = atomic_load(&c->deliveries);
    out->conflated = atomic_load(&c->conflated);
    out->conflations = atomic_load(&c->conflations);
    out->dead_peers = atomic_load(&c->dead_peers);
    out->pings = atomic_load(&c->pings);
    out->route_ns = atomic_load(&c->route_ns);
    out->queued = atomic_load(&c->queued);
    out->queued_bytes = atomic_load(&c->queued_bytes);
    out->id_subs = atomic_load(&c->id_subs);
    out->broad_subs = atomic_load(&c->broad_subs);
}
