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
 *     install the connection close callback (api_on_conn_close in server.c, which
 *     calls api_listen_closed). A connection evhttp freed before that step shows callbacks cleared;
 *     it is counted closed there. Dropping our reference then frees it (closing the socket).
 *     evhttp calls the close callback of an incoming connection exactly once, when it frees
 *     it (evhttp_connection_free; reset_ only runs for outgoing connections). */
#include "relay/api/internal.h"
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct api_listen {
    struct api *a;
    struct evconnlistener *lev;     /* owned by evhttp once bound (freed with the socket) */
    struct evhttp_bound_socket *sock;
    struct accept_guard *guard;     /* freed by accept_guard_free (after the last close) */
    struct event *timer;            /* the guard's backoff */
    struct event *attach_ev;        /* zero-delay: install close callbacks */
    struct bufferevent **fresh;     /* accepted, close callback not installed yet (ref held) */
    size_t nfresh, capfresh;
};

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

/* Install the close callback of every connection accepted since the last run. */
static void attach_fresh(struct api_listen *l)
{
    for (size_t i = 0; i < l->nfresh; i++) {
        struct bufferevent *bev = l->fresh[i];
        bufferevent_data_cb rcb = NULL, wcb = NULL;
        bufferevent_event_cb ecb = NULL;
        void *cbarg = NULL;
        bufferevent_getcb(bev, &rcb, &wcb, &ecb, &cbarg);
        if (rcb == NULL && wcb == NULL && ecb == NULL)
            accept_guard_closed(l->guard); /* evhttp already freed the connection */
        else
            evhttp_connection_set_closecb(cbarg, api_on_conn_close, l->a);
        bufferevent_decref(bev);
    }
    l->nfresh = 0;
}

static void on_attach(evutil_socket_t fd, short what, void *arg)
{
    attach_fresh(arg);
}

static struct bufferevent *on_new_bev(struct event_base *base, void *arg)
{
    struct api_listen *l = arg;
    struct bufferevent *bev = api_gate_bev_new(base, l->a); /* gate.c: heads judged first */
    if (l->nfresh == l->capfresh) {
        l->capfresh = l->capfresh ? 2 * l->capfresh : 16;
        l->fresh = xrealloc(l->fresh, l->capfresh * sizeof(*l->fresh));
    }
    bufferevent_incref(bev);
    l->fresh[l->nfresh++] = bev;
    event_active(l->attach_ev, EV_TIMEOUT, 0);
    accept_guard_opened(l->guard);
    return bev;
}

int api_listen_start(struct api *a, const char *host, int port)
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
    l->timer = evtimer_new(base, on_guard_timer, l);
    l->attach_ev = event_new(base, -1, 0, on_attach, l);
    if (l->timer == NULL || l->attach_ev == NULL) {
        log_err("out of memory", "what=listener events");
        abort();
    }
    l->guard = accept_guard_new("http", a->c->cfg->http_max_connections, &guard_ops, l);
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

void api_listen_closed(struct api *a)
{
    if (a->lsn != NULL)
        accept_guard_closed(a->lsn->guard);
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
    accept_guard_free(l->guard); /* evhttp_free reported every close (attach_fresh the rest) */
    free(l);
}
