/* listen.c (api) - the REST listener: binds STATUSRELAY_HTTP_LISTEN with our own
 * evconnlistener handed to evhttp, counts open connections against
 * STATUSRELAY_HTTP_MAX_CONNECTIONS and pauses accepting at the cap or when accept() runs out
 * of descriptors (relay/common/accept_guard.h). runs on: core thread.
 *
 * Why this shape (libevent 2.1.12): evhttp_bind_listener replaces the listener's callback
 * with its own (static) accept function, and evhttp offers no "new connection" hook, so:
 *   - accept errors: evconnlistener's error callback (set on our listener) is called for
 *     every non-retriable accept() error; without it libevent logs "Error from accept()" and
 *     returns to a socket that stays readable: a spin and a flood under EMFILE. The guard
 *     disables the listener and re-enables it on a timer or when a connection closes.
 *   - counting: evhttp asks the bufferevent callback (evhttp_set_bevcb) for each accepted
 *     connection's bufferevent (the request gate's filter, gate.c), before any request is read, so a connection that never sends
 *     a byte is counted too. We create it, hold one extra reference and, from a zero-delay
 *     event right after, read its callback argument (the evhttp_connection evhttp set) and
 *     install the connection close callback (on_conn_close: the connection counted closed,
 *     then the owner's hook, server.c). A connection evhttp freed before that step shows callbacks cleared;
 *     it is counted closed there. Dropping our reference then frees it (closing the socket).
 *     evhttp calls the close callback of an incoming connection exactly once, when it frees
 *     it (evhttp_connection_free; reset_ only runs for outgoing connections).
 *
 * Per address (issue 22): at that same step the peer's address is read (getpeername) and
 * counted against STATUSRELAY_HTTP_MAX_CONNECTIONS_PER_ADDRESS (accept_guard.h; IPv6 by its
 * /64); a connection past it is closed at once. A peer in STATUSRELAY_TRUSTED_PROXIES is not
 * counted at accept: each request head it forwards (the gate calls on_head before evhttp
 * reads it) counts its forwarded client instead (the count moves with the client of the
 * latest head: a proxy reusing one upstream connection for several clients), and a head whose
 * client is at its cap closes that connection. A connection accepted into the listener's
 * reserve (its last cap/8 slots) serves only heads naming /v1/ingest/upstream or carrying the
 * admin token (any other head is answered 503 server_busy with Retry-After: 1, then closed), so that the upstream's signed webhooks and operators get in while a crowd
 * holds the rest (such a connection is also closed when idle for RESERVE_IDLE_MS, so silent
 * clients do not sit in the reserve). Each connection's record (struct lconn, by bufferevent)
 * lives from that step to its close callback.
 *
 * Client addresses (api_client_addr): the peer, or for a trusted proxy the forwarded client
 * (protocol/forwarded.h); a malformed forwarded header falls back to the proxy's address and
 * is logged at most every 10 s with the count folded in. */
#include "relay/api/listen.h"
#include "relay/api/admit.h"
#include "relay/api/gate.h"
#include "relay/api/internal.h"
#include "protocol/forwarded.h"
#include "protocol/rest_req.h"
#include "relay/common/accept_guard.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/config.h"
#include "relay/core.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

struct api_listen {
    struct api *a;
    struct evconnlistener *lev;     /* owned by evhttp once bound (freed with the socket) */
    struct evhttp_bound_socket *sock;
    struct accept_guard *guard;     /* freed by accept_guard_free (after the last close) */
    struct event *timer;            /* the guard's backoff */
    struct event *attach_ev;        /* zero-delay: install close callbacks */
    struct fresh *fresh;            /* accepted, close callback not installed yet (ref held) */
    size_t nfresh, capfresh;
    struct lconn **tab;             /* open connections by bufferevent (chained hash) */
    size_t tab_size, nconn;
    int64_t bad_last_ms;            /* malformed forwarded headers: last log line */
    uint64_t bad_quiet;
    struct gate_opts gate;          /* every connection's gate reads these */
    api_conn_close_cb *on_close;    /* the owner's close hook, and its argument */
    void *close_arg;
};

static int on_head(void *arg, struct bufferevent *bev, const struct proto_rest_head *h);

#define RESERVE_IDLE_MS 2000 /* a connection in the reserve: idle (no byte) at most this long */

/* A connection accepted, waiting for attach_fresh. */
struct fresh {
    struct bufferevent *bev;
    struct lconn *c; /* attach_fresh: its record, NULL when closed at once */
};

/* One open connection, from attach to its close callback. */
struct lconn {
    struct lconn *next;
    const struct bufferevent *bev;
    struct proto_ip peer;
    char key[PROTO_IP_KEY_MAX]; /* the address counted for it; "" = none */
    unsigned trusted : 1;       /* the peer is a trusted proxy */
    unsigned reserved : 1;      /* accepted into the reserve: privileged heads only */
};

static size_t lslot(const struct api_listen *l, const void *p)
{
    uint64_t h = (uint64_t)(uintptr_t)p;
    h = (h ^ (h >> 29)) * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 32) & (l->tab_size - 1);
}

static struct lconn *lfind(const struct api_listen *l, const void *bev)
{
    if (l == NULL || l->tab == NULL || bev == NULL)
        return NULL;
    for (struct lconn *c = l->tab[lslot(l, bev)]; c != NULL; c = c->next)
        if (c->bev == bev)
            return c;
    return NULL;
}

static void linsert(struct api_listen *l, struct lconn *c)
{
    if (l->nconn + 1 > l->tab_size) { /* grow: load factor <= 1 */
        size_t old = l->tab_size;
        struct lconn **t = l->tab;
        l->tab_size = old ? 2 * old : 64;
        l->tab = xcalloc(l->tab_size, sizeof(*l->tab));
        for (size_t i = 0; i < old; i++)
            for (struct lconn *y = t[i], *n; y != NULL; y = n) {
                n = y->next;
                size_t k = lslot(l, y->bev);
                y->next = l->tab[k];
                l->tab[k] = y;
            }
        free(t);
    }
    size_t k = lslot(l, c->bev);
    c->next = l->tab[k];
    l->tab[k] = c;
    l->nconn++;
}

/* Unlink and free the record of bev (its address count returned); 0 when there was none. */
static int lremove(struct api_listen *l, const void *bev)
{
    if (l->tab == NULL || bev == NULL)
        return 0;
    for (struct lconn **pp = &l->tab[lslot(l, bev)]; *pp != NULL; pp = &(*pp)->next)
        if ((*pp)->bev == bev) {
            struct lconn *c = *pp;
            *pp = c->next;
            if (c->key[0] != '\0')
                accept_guard_addr_put(l->guard, c->key);
            free(c);
            l->nconn--;
            return 1;
        }
    return 0;
}

/* evconnlistener hands the error callback evhttp's argument (the struct evhttp): the one
 * REST listener of the process is found here. */
static struct api_listen *the_listener;

static void on_pause(void *arg)
{
    struct api_listen *l = arg;
    if (l->lev != NULL)
        evconnlistener_disable(l->lev);
}

static void on_resume(void *arg)
{
    struct api_listen *l = arg;
    if (l->lev != NULL)
        evconnlistener_enable(l->lev);
}

static void on_arm(void *arg, int64_t ms)
{
    struct api_listen *l = arg;
    if (l->lev == NULL)
        return;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    evtimer_add(l->timer, &tv);
}

static const struct accept_guard_ops guard_ops = {on_pause, on_resume, on_arm};

static void on_guard_timer(evutil_socket_t fd, short what, void *arg)
{
    struct api_listen *l = arg;
    accept_guard_on_timer(l->guard);
}

static void on_accept_error(struct evconnlistener *lev, void *arg)
{
    int err = EVUTIL_SOCKET_ERROR();
    if (the_listener != NULL && the_listener->lev == lev)
        accept_guard_failed(the_listener->guard, err);
}

/* Record a new connection: its peer, trust, reserve, and its address counted (untrusted
 * peers). 0, or -1 when its address is at the per-address cap (nothing recorded). */
static int track(struct api_listen *l, struct bufferevent *bev, struct lconn **out)
{
    struct lconn *c = xcalloc(1, sizeof(*c));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    struct bufferevent *under = bufferevent_get_underlying(bev);
    evutil_socket_t fd = bufferevent_getfd(under != NULL ? under : bev);
    c->bev = bev;
    if (fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        proto_ip_from_sockaddr((struct sockaddr *)&ss, &c->peer) == 0) {
        c->trusted = proto_cidr_list_match(&l->a->c->cfg->trusted, &c->peer) != 0;
        if (!c->trusted) {
            proto_ip_key(&c->peer, c->key, sizeof(c->key));
            if (accept_guard_addr_take(l->guard, c->key) != 0) {
                free(c);
                return -1;
            }
        }
    }
    linsert(l, c);
    *out = c;
    return 0;
}

/* Install the close callback of every connection accepted since the last run, in three
 * passes: connections whose address is at its cap are closed first (so that they do not
 * count), then the others take their place in the reserve in the order they were accepted
 * (the k-th of S kept is the (open - S + k)-th connection), then our references go. */
static void attach_fresh(struct api_listen *l)
{
    size_t kept = 0;
    for (size_t i = 0; i < l->nfresh; i++) {
        struct bufferevent *bev = l->fresh[i].bev;
        bufferevent_data_cb rcb = NULL, wcb = NULL;
        bufferevent_event_cb ecb = NULL;
        void *cbarg = NULL;
        l->fresh[i].c = NULL;
        bufferevent_getcb(bev, &rcb, &wcb, &ecb, &cbarg);
        if (rcb == NULL && wcb == NULL && ecb == NULL) {
            accept_guard_closed(l->guard); /* evhttp already freed the connection */
            continue;
        }
        api_listen_watch(l, cbarg);
        if (track(l, bev, &l->fresh[i].c) != 0) /* its address is at its cap: evhttp frees it */
            bufferevent_trigger_event(bev, BEV_EVENT_READING | BEV_EVENT_EOF, 0);
        else
            kept++;
    }
    int64_t n = accept_guard_count(l->guard) - (int64_t)kept;
    for (size_t i = 0; i < l->nfresh; i++) {
        struct lconn *c = l->fresh[i].c;
        if (c == NULL)
            continue;
        c->reserved = accept_guard_reserved_at(l->guard, ++n) != 0;
        if (c->reserved) { /* a reserve slot is not held by a silent client */
            void *cbarg = NULL;
            bufferevent_data_cb rcb, wcb;
            bufferevent_event_cb ecb;
            bufferevent_getcb(l->fresh[i].bev, &rcb, &wcb, &ecb, &cbarg);
            struct timeval tv = {RESERVE_IDLE_MS / 1000, (RESERVE_IDLE_MS % 1000) * 1000};
            evhttp_connection_set_timeout_tv(cbarg, &tv);
        }
    }
    for (size_t i = 0; i < l->nfresh; i++)
        bufferevent_decref(l->fresh[i].bev);
    l->nfresh = 0;
}

static void on_attach(evutil_socket_t fd, short what, void *arg)
{
    attach_fresh(arg);
}

static struct bufferevent *on_new_bev(struct event_base *base, void *arg)
{
    struct api_listen *l = arg;
    struct bufferevent *bev = api_gate_bev_new(base, &l->gate); /* gate.c: heads judged first */
    if (l->nfresh == l->capfresh) {
        l->capfresh = l->capfresh ? 2 * l->capfresh : 16;
        l->fresh = xrealloc(l->fresh, l->capfresh * sizeof(*l->fresh));
    }
    bufferevent_incref(bev);
    event_active(l->attach_ev, EV_TIMEOUT, 0);
    accept_guard_opened(l->guard);
    l->fresh[l->nfresh].c = NULL;
    l->fresh[l->nfresh++].bev = bev;
    return bev;
}

int api_listen_start(struct api *a, const char *host, int port, api_conn_close_cb *on_close,
                     void *arg)
{
    struct api_listen *l = xcalloc(1, sizeof(*l));
    struct event_base *base = a->c->base;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    struct evutil_addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = EVUTIL_AI_PASSIVE | EVUTIL_AI_ADDRCONFIG;
    int rc = evutil_getaddrinfo(host, ps, &hints, &ai);
    if (rc != 0) {
        log_err("REST API cannot listen", "listen=%s:%d err=\"%s\"", host, port,
                evutil_gai_strerror(rc));
        free(l);
        return -1;
    }
    l->lev = evconnlistener_new_bind(base, NULL, NULL,
                                     LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE |
                                         LEV_OPT_CLOSE_ON_EXEC,
                                     -1, ai->ai_addr, (int)ai->ai_addrlen);
    int e = EVUTIL_SOCKET_ERROR();
    evutil_freeaddrinfo(ai);
    if (l->lev == NULL) {
        log_err("REST API cannot listen", "listen=%s:%d err=\"%s\"", host, port,
                e != 0 ? evutil_socket_error_to_string(e) : "bind failed");
        free(l);
        return -1;
    }
    l->a = a;
    l->on_close = on_close;
    l->close_arg = arg;
    l->gate = (struct gate_opts){a->rules, a->c->cfg->http_request_timeout_ms,
                                 a->c->cfg->http_keepalive_requests, on_head, l};
    l->timer = evtimer_new(base, on_guard_timer, l);
    l->attach_ev = event_new(base, -1, 0, on_attach, l);
    if (l->timer == NULL || l->attach_ev == NULL) {
        log_err("out of memory", "what=listener events");
        abort();
    }
    l->guard = accept_guard_new("http", a->c->cfg->http_max_connections, &guard_ops, l);
    accept_guard_set_per_address(l->guard, a->c->cfg->http_max_connections_per_address);
    evconnlistener_set_error_cb(l->lev, on_accept_error);
    evhttp_set_bevcb(a->http, on_new_bev, l);
    l->sock = evhttp_bind_listener(a->http, l->lev);
    if (l->sock == NULL) {
        log_err("REST API cannot listen", "listen=%s:%d err=\"evhttp_bind_listener failed\"",
                host, port);
        evconnlistener_free(l->lev);
        l->lev = NULL;
        api_listen_free(l);
        return -1;
    }
    a->lsn = l;
    a->sock = l->sock;
    the_listener = l;
    return 0;
}

/* evhttp frees a connection (exactly once per incoming connection): it is counted closed,
 * then the owner hears of it. */
static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct api_listen *l = arg;
    lremove(l, evcon != NULL ? evhttp_connection_get_bufferevent(evcon) : NULL);
    accept_guard_closed(l->guard);
    if (l->on_close != NULL)
        l->on_close(evcon, l->close_arg);
}

void api_listen_watch(struct api_listen *l, struct evhttp_connection *evcon)
{
    if (l != NULL && evcon != NULL)
        evhttp_connection_set_closecb(evcon, on_conn_close, l);
}

/* ---- client addresses ------------------------------------------------------------------- */

/* The client of a request from peer with these forwarded header values (NULL: absent), as
 * out; quiet: do not log a malformed header (the gate: on_request logs it). */
static void resolve(struct api_listen *l, const struct lconn *c, const char *xff, size_t xl,
                    const char *fwd, size_t fl, int quiet, struct proto_ip *out)
{
    *out = c->peer;
    if (!c->trusted)
        return;
    enum proto_fwd_result r =
        proto_forwarded_client(xff, xl, fwd, fl, &l->a->c->cfg->trusted, out);
    if (r == PROTO_FWD_OK)
        return;
    *out = c->peer;
    if (r != PROTO_FWD_BAD || quiet)
        return;
    l->a->c->metrics.api_forwarded_malformed++;
    int64_t now = mono_ms();
    if (l->bad_last_ms != 0 && now - l->bad_last_ms < 10000) {
        l->bad_quiet++;
        return;
    }
    char p[64];
    proto_ip_format(&c->peer, p, sizeof(p));
    log_warn("malformed forwarded header from a trusted proxy: its own address is used",
             "proxy=%s suppressed=%llu", p, (unsigned long long)l->bad_quiet);
    l->bad_last_ms = now;
    l->bad_quiet = 0;
}

/* Every value of header name in in, joined with "," into a new string (NULL: none). */
static char *joined(struct evkeyvalq *in, const char *name, size_t *len)
{
    char *out = NULL;
    size_t n = 0;
    struct evkeyval *kv;
    TAILQ_FOREACH(kv, in, next)
    {
        if (strcasecmp(kv->key, name) != 0)
            continue;
        size_t vl = strlen(kv->value);
        out = xrealloc(out, n + vl + 2);
        if (n > 0)
            out[n++] = ',';
        memcpy(out + n, kv->value, vl);
        n += vl;
        out[n] = '\0';
    }
    *len = n;
    return out;
}

int api_client_addr(struct api *a, struct evhttp_request *req, struct proto_ip *out)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct lconn *c =
        lfind(a->lsn, evcon != NULL ? evhttp_connection_get_bufferevent(evcon) : NULL);
    memset(out, 0, sizeof(*out));
    if (c == NULL) {
        const struct sockaddr *sa = evcon != NULL ? evhttp_connection_get_addr(evcon) : NULL;
        return proto_ip_from_sockaddr(sa, out);
    }
    if (!c->trusted) {
        *out = c->peer;
        return c->peer.family != 0 ? 0 : -1;
    }
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    size_t xl = 0, fl = 0;
    char *xff = joined(in, "X-Forwarded-For", &xl), *fwd = joined(in, "Forwarded", &fl);
    resolve(a->lsn, c, xff, xl, fwd, fl, 0, out);
    free(xff);
    free(fwd);
    return out->family != 0 ? 0 : -1;
}

/* Every value of header name in h joined with "," (NULL: none); *len its length. */
static char *head_joined(const struct proto_rest_head *h, const char *name, size_t *len)
{
    char *out = NULL;
    size_t n = 0, nl = strlen(name);
    for (size_t i = 0; i < h->nhdr; i++) {
        if (h->hdr[i].name_len != nl || strncasecmp(h->hdr[i].name, name, nl) != 0)
            continue;
        out = xrealloc(out, n + h->hdr[i].value_len + 2);
        if (n > 0)
            out[n++] = ',';
        memcpy(out + n, h->hdr[i].value, h->hdr[i].value_len);
        n += h->hdr[i].value_len;
        out[n] = '\0';
    }
    *len = n;
    return out;
}

/* A head the reserve lets through: the upstream's webhook path, or the admin token (not the
 * read token: the reserve is for operators, admit_token compares). */
static int privileged(const struct api *a, const struct proto_rest_head *h)
{
    static const char ingest[] = "/v1/ingest/upstream";
    size_t il = sizeof(ingest) - 1;
    if (h->target_len >= il && memcmp(h->target, ingest, il) == 0 &&
        (h->target_len == il || h->target[il] == '?'))
        return 1;
    const struct proto_rest_hdr *au = proto_rest_head_find(h, "Authorization");
    return au != NULL && admit_bearer(a->rules, au->value, au->value_len) == ADMIT_CRED_ADMIN;
}

/* The gate read head h on bev, before evhttp sees it (gate_opts.on_head): 0 to go on, 1 to
 * answer 503 server_busy and close (a connection of the reserve with a head that is neither
 * ingest nor token-bearing), -1 to close the connection (a trusted proxy forwarding a client
 * at its per-address cap). */
static int on_head(void *arg, struct bufferevent *bev, const struct proto_rest_head *h)
{
    struct api_listen *l = arg;
    struct api *a = l->a;
    struct lconn *c = lfind(l, bev);
    if (c == NULL)
        return 0;
    if (c->reserved && !privileged(a, h)) {
        log_debug("REST request in the reserve answered 503: not an ingest or token request", "");
        a->c->metrics.api_reserve_busy++;
        return 1;
    }
    if (!c->trusted)
        return 0;
    size_t xl = 0, fl = 0;
    char *xff = head_joined(h, "X-Forwarded-For", &xl), *fwd = head_joined(h, "Forwarded", &fl);
    struct proto_ip ip;
    char key[PROTO_IP_KEY_MAX];
    resolve(l, c, xff, xl, fwd, fl, 1, &ip);
    free(xff);
    free(fwd);
    if (proto_cidr_list_match(&a->c->cfg->trusted, &ip)) { /* the proxy itself: exempt */
        key[0] = '\0';
    } else {
        proto_ip_key(&ip, key, sizeof(key));
    }
    if (strcmp(key, c->key) == 0)
        return 0;
    if (c->key[0] != '\0')
        accept_guard_addr_put(l->guard, c->key);
    c->key[0] = '\0';
    if (key[0] != '\0' && accept_guard_addr_take(l->guard, key) != 0)
        return -1;
    snprintf(c->key, sizeof(c->key), "%s", key);
    return 0;
}

void api_listen_stop(struct api_listen *l)
{
    if (l == NULL)
        return;
    if (l->timer)
        evtimer_del(l->timer);
    if (the_listener == l)
        the_listener = NULL;
    l->lev = NULL; /* freed with its bound socket (evhttp_del_accept_socket / evhttp_free) */
}

void api_listen_free(struct api_listen *l)
{
    if (l == NULL)
        return;
    api_listen_stop(l);
    attach_fresh(l); /* connections evhttp_free closed: their references go now */
    free(l->fresh);
    if (l->timer)
        event_free(l->timer);
    if (l->attach_ev)
        event_free(l->attach_ev);
    for (size_t i = 0; i < l->tab_size; i++) /* none left after evhttp_free: to be sure */
        for (struct lconn *c = l->tab[i], *n; c != NULL; c = n) {
            n = c->next;
            free(c);
        }
    free(l->tab);
    accept_guard_free(l->guard); /* evhttp_free reported every close (attach_fresh the rest) */
    free(l);
}
