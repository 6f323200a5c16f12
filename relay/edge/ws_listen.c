/* ws_listen.c - see ws_listen.h. runs on: the ws thread (set-up before it exists). */
#define _GNU_SOURCE /* accept4 */
#include "relay/edge/ws_listen.h"
#include "protocol/forwarded.h"
#include "relay/common/accept_guard.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <errno.h>
#include <libwebsockets.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ACCEPTS_PER_WAKE 32 /* connections taken per readable event (others wait a round) */

struct ws_listen {
    int fd;                      /* the listening socket; owned by lws once attached */
    int port;
    struct lws *lwsi;            /* its raw-file wsi; NULL before attach and once closed */
    struct lws_vhost *vh;
    struct lws_context *ctx;
    struct accept_guard *guard;
    lws_callback_function *inner; /* the dashboard protocol's own callback */
    int creating;                /* the listener's own WSI_CREATE is under way */
    int stopped;
    lws_sorted_usec_list_t sul;  /* the guard's backoff */
    struct proto_cidr_list trusted; /* proxies not counted at accept */
};

/* Each counted connection's address key: a string (owned) in the wsi's opaque user data,
 * freed and uncounted at LWS_CALLBACK_WSI_DESTROY. A trusted proxy's connection has none
 * until its upgrade names a client (ws_listen_count_client). */
static void key_drop(struct ws_listen *l, struct lws *wsi)
{
    char *key = lws_get_opaque_user_data(wsi);
    if (key == NULL)
        return;
    accept_guard_addr_put(l->guard, key);
    free(key);
    lws_set_opaque_user_data(wsi, NULL);
}

static void on_pause(void *arg)
{
    struct ws_listen *l = arg;
    if (l->lwsi != NULL)
        lws_rx_flow_control(l->lwsi, 0);
}

static void on_resume(void *arg)
{
    struct ws_listen *l = arg;
    if (l->lwsi != NULL && !l->stopped)
        lws_rx_flow_control(l->lwsi, 1);
}

static void on_timer(lws_sorted_usec_list_t *sul)
{
    struct ws_listen *l = lws_container_of(sul, struct ws_listen, sul);
    accept_guard_on_timer(l->guard);
}

static void on_arm(void *arg, int64_t ms)
{
    struct ws_listen *l = arg;
    if (l->ctx != NULL)
        lws_sul_schedule(l->ctx, 0, &l->sul, on_timer, (lws_usec_t)ms * LWS_US_PER_MS);
}

static const struct accept_guard_ops guard_ops = {on_pause, on_resume, on_arm};

/* The dashboard callback, for a call that names no vhost (one dashboard per process). */
static lws_callback_function *inner_any;

static struct ws_listen *of_wsi(struct lws *wsi)
{
    struct lws_vhost *vh = wsi != NULL ? lws_get_vhost(wsi) : NULL;
    return vh != NULL ? lws_vhost_user(vh) : NULL;
}

/* The dashboard protocol's callback, counting the vhost's connections on the way. Every wsi
 * of the vhost is announced to protocols[0] when created and when destroyed; the listener's
 * own wsi is not a connection and is not shown to the dashboard. */
static int on_dash(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                   size_t len)
{
    struct ws_listen *l = of_wsi(wsi);
    if (l != NULL && reason == LWS_CALLBACK_WSI_CREATE) {
        if (l->creating)
            return 0;
        accept_guard_opened(l->guard);
    } else if (l != NULL && reason == LWS_CALLBACK_WSI_DESTROY) {
        if (wsi == l->lwsi) {
            l->lwsi = NULL; /* context destruction closes the listener */
            return 0;
        }
        key_drop(l, wsi);
        accept_guard_closed(l->guard);
    }
    return (l != NULL ? l->inner : inner_any)(wsi, reason, user, in, len);
}

/* The listening socket is readable: accept what is queued, adopt each connection. */
static void accept_some(struct ws_listen *l)
{
    for (int i = 0; i < ACCEPTS_PER_WAKE && !accept_guard_paused(l->guard) && !l->stopped; i++) {
        struct lws_filter_network_conn_args filt;
        memset(&filt, 0, sizeof(filt));
        filt.clilen = sizeof(filt.cli_addr);
        int fd = accept4(l->fd, (struct sockaddr *)&filt.cli_addr, &filt.clilen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                accept_guard_failed(l->guard, errno);
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* as lws's listener */
        /* the same chance to refuse a peer by address that lws's own listener gives
         * protocols[0] (LWS_CALLBACK_FILTER_NETWORK_CONNECTION, wsi = the listener) */
        filt.accept_fd = fd;
        if (l->inner(l->lwsi, LWS_CALLBACK_FILTER_NETWORK_CONNECTION, NULL, &filt,
                     (size_t)fd) != 0) {
            close(fd);
            continue;
        }
        /* per address: an untrusted peer is counted now (a trusted proxy's client at its
         * upgrade, ws_listen_count_client) */
        struct proto_ip ip;
        char key[PROTO_IP_KEY_MAX] = "";
        if (proto_ip_from_sockaddr((struct sockaddr *)&filt.cli_addr, &ip) == 0 &&
            !proto_cidr_list_match(&l->trusted, &ip)) {
            proto_ip_key(&ip, key, sizeof(key));
            if (accept_guard_addr_take(l->guard, key) != 0) {
                close(fd);
                continue;
            }
        }
        /* counted by on_dash (WSI_CREATE); on failure lws closes fd (and the count follows
         * the wsi, if one was made; it had no key yet) */
        struct lws *wsi = lws_adopt_socket_vhost(l->vh, fd);
        if (wsi == NULL) {
            log_debug("dashboard connection not adopted", "");
            if (key[0] != '\0')
                accept_guard_addr_put(l->guard, key);
        } else if (key[0] != '\0') {
            lws_set_opaque_user_data(wsi, xstrdup(key));
        }
    }
}

static int on_accept_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                        size_t len)
{
    struct ws_listen *l = of_wsi(wsi);
    if (l == NULL)
        return 0;
    switch (reason) {
    case LWS_CALLBACK_RAW_RX_FILE:
        accept_some(l);
        return 0;
    case LWS_CALLBACK_RAW_CLOSE_FILE:
        if (wsi == l->lwsi)
            l->lwsi = NULL;
        return 0;
    default:
        return 0;
    }
}

struct ws_listen *ws_listen_new(const struct sockaddr *sa, socklen_t len, int64_t cap,
                                const char *name)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        (sa->sa_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) ||
        bind(fd, sa, len) != 0 || listen(fd, SOMAXCONN) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        if (err == EADDRINUSE)
            log_err("dashboard listen address in use", "listen=%s", name);
        else
            log_err("dashboard listen address unusable", "listen=%s error=\"%s\"", name,
                    strerror(err));
        return NULL;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    struct ws_listen *l = xcalloc(1, sizeof(*l));
    l->fd = fd;
    l->port = port;
    l->guard = accept_guard_new("ws", cap, &guard_ops, l);
    return l;
}

void ws_listen_set_policy(struct ws_listen *l, int64_t per_address,
                          const struct proto_cidr_list *trusted)
{
    accept_guard_set_per_address(l->guard, per_address);
    if (trusted != NULL)
        l->trusted = *trusted;
}

int ws_listen_count_client(struct lws *wsi, const char *key)
{
    struct ws_listen *l = of_wsi(wsi);
    if (l == NULL)
        return 0;
    const char *old = lws_get_opaque_user_data(wsi);
    if (old != NULL && strcmp(old, key) == 0)
        return 0;
    key_drop(l, wsi);
    if (accept_guard_addr_take(l->guard, key) != 0)
        return -1;
    lws_set_opaque_user_data(wsi, xstrdup(key));
    return 0;
}

int ws_listen_port(const struct ws_listen *l)
{
    return l->port;
}

void ws_listen_protocols(struct ws_listen *l, struct lws_protocols *protos)
{
    l->inner = inner_any = protos[0].callback;
    protos[0].callback = on_dash;
    memset(&protos[1], 0, sizeof(protos[1]));
    protos[1].name = "statusrelay-dash-accept";
    protos[1].callback = on_accept_cb;
    protos[1].user = protos[0].user; /* the dashboard finds itself from the listener's wsi */
}

int ws_listen_attach(struct ws_listen *l, struct lws_context *ctx, struct lws_vhost *vh)
{
    lws_sock_file_fd_type d;
    d.filefd = l->fd;
    l->vh = vh;
    l->ctx = ctx;
    l->creating = 1;
    l->lwsi = lws_adopt_descriptor_vhost(vh, LWS_ADOPT_RAW_FILE_DESC, d,
                                         "statusrelay-dash-accept", NULL);
    l->creating = 0;
    if (l->lwsi == NULL) {
        log_err("dashboard listener not adopted by libwebsockets", "");
        close(l->fd);
        l->fd = -1;
        return -1;
    }
    return 0;
}

void ws_listen_stop(struct ws_listen *l)
{
    if (l == NULL || l->stopped)
        return;
    l->stopped = 1;
    if (l->ctx != NULL)
        lws_sul_cancel(&l->sul);
    if (l->lwsi != NULL)
        lws_rx_flow_control(l->lwsi, 0);
}

void ws_listen_free(struct ws_listen *l)
{
    if (l == NULL)
        return;
    if (l->vh == NULL && l->fd >= 0)
        close(l->fd); /* never handed to lws */
    accept_guard_free(l->guard);
    free(l);
}
