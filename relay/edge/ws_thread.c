/* ws_thread.c - see ws_thread.h. runs on: the ws thread, except start/stop/stats.
 *
 * The context and both vhosts are created on the caller's thread before the ws thread
 * exists, so bind errors come back synchronously; from pthread_create on, only the ws thread
 * touches lws. The one call made from other threads is lws_cancel_service, through the to_ws
 * wake hook, guarded by wake_mu so that it never reaches a destroyed context. */
#include "relay/edge/ws_thread.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/edge/ws_listen.h"
#include "relay/edge/xq.h"

#include <errno.h>
#include <libwebsockets.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct ws_thread {
    struct xq *to_ws, *to_core;
    char *listen;
    char iface[INET6_ADDRSTRLEN + 8];    /* numeric listen host: lws keeps the pointer */
    struct lws_context *ctx;
    struct lws_protocols up_protos[3];   /* upstream client, wake handler, terminator */
    struct lws_protocols dash_protos[3]; /* dashboard, accept (ws_listen.c), terminator */
    struct ws_listen *lsn;               /* the dashboard's listening socket and its cap */
    struct upstream_ws *up;
    struct ws_server *dash;
    int dash_port;
    pthread_t tid;
    pthread_mutex_t wake_mu;
    struct lws_context *wake_ctx;        /* NULL once the context is going away */
    int stopping;
    int64_t stop_deadline;
    lws_sorted_usec_list_t sul_stop;
};

/* ---- the ws thread ------------------------------------------------------------------- */

static void on_stop_deadline(lws_sorted_usec_list_t *sul)
{
    (void)sul; /* only wakes lws_service so the loop sees the deadline */
}

static void begin_stop(struct ws_thread *t)
{
    if (t->stopping)
        return;
    t->stopping = 1;
    t->stop_deadline = mono_ms() + WS_THREAD_STOP_GRACE_MS;
    upstream_ws_shutdown(t->up);
    ws_listen_stop(t->lsn);
    if (t->dash)
        ws_server_shutdown(t->dash);
    lws_sul_schedule(t->ctx, 0, &t->sul_stop, on_stop_deadline,
                     (lws_usec_t)WS_THREAD_STOP_GRACE_MS * LWS_US_PER_MS);
}

static void drain(struct ws_thread *t)
{
    for (struct xmsg *m = xq_take_all(t->to_ws), *next; m != NULL; m = next) {
        next = m->next;
        m->next = NULL;
        if (t->stopping) {
            xmsg_free(m);
            continue;
        }
        switch (m->type) {
        case XMSG_UP_START:
        case XMSG_UP_STOP:
        case XMSG_UP_SEND:
        case XMSG_UP_RECONNECT:
            upstream_ws_on_msg(t->up, m);
            break;
        case XMSG_DASH_SEND:
        case XMSG_DASH_EVENT:
        case XMSG_DASH_CLOSE:
        case XMSG_DASH_ACCEPT_SUB:
            if (t->dash)
                ws_server_on_msg(t->dash, m);
            else
                xmsg_free(m);
            break;
        case XMSG_SHUTDOWN:
            xmsg_free(m);
            begin_stop(t);
            break;
        default: /* ws -> core types have no business here */
            log_warn("unexpected message on the ws queue", "type=%d", (int)m->type);
            xmsg_free(m);
            break;
        }
    }
}

/* Second protocol of the client vhost: lws broadcasts EVENT_WAIT_CANCELLED to every protocol
 * of every vhost, and this is the one that acts on it. */
static int on_thread_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                        void *in, size_t len)
{
    if (reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED) {
        const struct lws_protocols *p = lws_get_protocol(wsi);
        if (p != NULL && p->user != NULL)
            drain(p->user);
        return 0;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static void *ws_main(void *arg)
{
    struct ws_thread *t = arg;
    log_thread_name("ws");
    drain(t); /* anything pushed before the wake hook existed */
    while (!t->stopping || (mono_ms() < t->stop_deadline &&
                            !(upstream_ws_idle(t->up) && (!t->dash || ws_server_idle(t->dash))))) {
        if (lws_service(t->ctx, 0) < 0) {
            log_err("websocket service loop failed", "");
            break;
        }
    }
    begin_stop(t); /* no-op unless the loop failed */
    lws_sul_cancel(&t->sul_stop);
    pthread_mutex_lock(&t->wake_mu);
    t->wake_ctx = NULL;
    pthread_mutex_unlock(&t->wake_mu);
    lws_context_destroy(t->ctx); /* calls back into the modules one last time */
    t->ctx = NULL;
    log_info("websocket thread stopped", "");
    return NULL;
}

static void wake_ws(void *arg)
{
    struct ws_thread *t = arg;
    pthread_mutex_lock(&t->wake_mu);
    if (t->wake_ctx != NULL)
        lws_cancel_service(t->wake_ctx);
    pthread_mutex_unlock(&t->wake_mu);
}

/* ---- start / stop ------------------------------------------------------------------- */

/* Resolve host to a numeric address and listen there ourselves (ws_listen.c: accepting that
 * pauses at the cap of cap connections or out of descriptors), so that "in use" is reported
 * clearly. Returns 0, the numeric host, the bound port and the listener, or -1 after
 * logging. */
static int check_listen(const char *listen, char *numeric, size_t n, int *port, int *family,
                        struct ws_listen **lsn, int64_t cap)
{
    char host[256];
    if (parse_hostport(listen, host, sizeof(host), port) != 0) {
        log_err("dashboard listen address is not host:port", "listen=%s", listen);
        return -1;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || res == NULL) {
        log_err("dashboard listen host does not resolve", "listen=%s error=\"%s\"", listen,
                gai_strerror(rc));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = (socklen_t)res->ai_addrlen;
    memcpy(&ss, res->ai_addr, res->ai_addrlen);
    *family = res->ai_family;
    freeaddrinfo(res);
    if (getnameinfo((struct sockaddr *)&ss, sl, numeric, (socklen_t)n, NULL, 0,
                    NI_NUMERICHOST) != 0) {
        log_err("dashboard listen host does not resolve", "listen=%s", listen);
        return -1;
    }
    if (*family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)*port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)*port);
    if ((*lsn = ws_listen_new((struct sockaddr *)&ss, sl, cap, listen)) == NULL)
        return -1;
    *port = ws_listen_port(*lsn);
    return 0;
}

static void free_parts(struct ws_thread *t)
{
    upstream_ws_free(t->up);
    ws_listen_free(t->lsn);
    ws_server_free(t->dash);
    free(t->listen);
    pthread_mutex_destroy(&t->wake_mu);
    free(t);
}

/* The modules the thread runs: the upstream client and, with a listen address, the
 * dashboard listener (bound now: errors come back here) and server. *family is the listen
 * address's. Returns 0, or -1 after logging. */
static int make_modules(struct ws_thread *t, const struct ws_thread_opts *o, int *family)
{
    struct upstream_ws_opts uo = {
        .url = o->upstream_url,
        .api_key = o->api_key,
        .ping_interval_ms = o->ping_interval_ms,
        .ping_timeout_ms = o->ping_timeout_ms,
        .connect_timeout_ms = o->connect_timeout_ms,
    };
    if ((t->up = upstream_ws_new(&uo, o->to_core)) == NULL)
        return -1;
    if (o->listen == NULL)
        return 0;
    int port = 0;
    if (check_listen(o->listen, t->iface, sizeof(t->iface), &port, family, &t->lsn,
                     o->dash_max_connections > 0 ? o->dash_max_connections : INT64_MAX) != 0)
        return -1;
    t->dash_port = port;
    t->listen = xstrdup(o->listen);
    t->dash = ws_server_new(o->to_core, o->dash_queue_max, o->dash_queue_bytes);
    ws_server_set_cors_origins(t->dash, o->dash_cors_origins);
    ws_server_set_host_rule(t->dash, o->dash_host_check, o->dash_allowed_hosts);
    ws_server_set_trusted(t->dash, o->trusted);
    ws_listen_set_policy(t->lsn, o->dash_max_per_address, o->trusted);
    return 0;
}

/* The upstream client vhost. It comes first: lws sends OPENSSL_PERFORM_SERVER_CERT_VERIFICATION
 * to the first vhost's protocols[0], and that should be the upstream client. Its second
 * protocol drains to_ws (on_thread_cb). Returns 0, or -1 after logging. */
static int add_upstream_vhost(struct ws_thread *t, int tls)
{
    upstream_ws_protocol(t->up, &t->up_protos[0]);
    t->up_protos[1].name = "statusrelay-ws-thread";
    t->up_protos[1].callback = on_thread_cb;
    t->up_protos[1].user = t;
    struct lws_context_creation_info vi;
    memset(&vi, 0, sizeof(vi));
    vi.vhost_name = "upstream";
    vi.port = CONTEXT_PORT_NO_LISTEN;
    vi.protocols = t->up_protos;
    vi.options = tls ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0;
#if !defined(LWS_SSL_CLIENT_USE_OS_CA_CERTS)
#error "libwebsockets must load the OS CA store (LWS_SSL_CLIENT_USE_OS_CA_CERTS)"
#endif
    struct lws_vhost *uvh = lws_create_vhost(t->ctx, &vi);
    if (uvh == NULL) {
        log_err("libwebsockets client vhost creation failed", "");
        return -1;
    }
    upstream_ws_attach(t->up, t->ctx, uvh);
    return 0;
}

/* The dashboard vhost on the listener of make_modules: protocols[0] takes plain HTTP and
 * protocol-less upgrades. Returns 0, or -1 after logging. */
static int add_dash_vhost(struct ws_thread *t, int family)
{
    ws_server_protocol(t->dash, &t->dash_protos[0]);
    ws_listen_protocols(t->lsn, t->dash_protos); /* counts; adds the accept protocol */
    struct lws_context_creation_info dv;
    memset(&dv, 0, sizeof(dv));
    dv.vhost_name = "dashboard";
    dv.port = CONTEXT_PORT_NO_LISTEN_SERVER; /* we listen and accept (ws_listen.c) */
    dv.user = t->lsn;
    dv.protocols = t->dash_protos;
    /* lws binds an IPv4 literal on an IPv6 socket as "any address": keep IPv4 on IPv4 */
    dv.options = LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND |
                 (family == AF_INET ? LWS_SERVER_OPTION_DISABLE_IPV6 : 0);
    struct lws_vhost *vh = lws_create_vhost(t->ctx, &dv);
    if (vh == NULL) {
        log_err("dashboard listen failed", "listen=%s", t->listen);
        return -1;
    }
    return ws_listen_attach(t->lsn, t->ctx, vh);
}

struct ws_thread *ws_thread_start(const struct ws_thread_opts *o)
{
    struct ws_thread *t = xcalloc(1, sizeof(*t));
    pthread_mutex_init(&t->wake_mu, NULL);
    t->to_ws = o->to_ws;
    t->to_core = o->to_core;
    int family = AF_INET;
    if (make_modules(t, o, &family) != 0)
        goto fail;
    int tls = upstream_ws_uses_tls(t->up);

    log_route_libs();
    struct lws_context_creation_info ci;
    memset(&ci, 0, sizeof(ci));
    ci.options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
                 (tls ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0);
    ci.port = CONTEXT_PORT_NO_LISTEN;
    ci.gid = -1;
    ci.uid = -1;
    ci.user = t;
    if ((t->ctx = lws_create_context(&ci)) == NULL) {
        log_err("libwebsockets context creation failed", "");
        goto fail;
    }
    if (add_upstream_vhost(t, tls) != 0 || (t->dash != NULL && add_dash_vhost(t, family) != 0))
        goto fail;

    t->wake_ctx = t->ctx;
    xq_set_wake(t->to_ws, wake_ws, t);
    int rc = pthread_create(&t->tid, NULL, ws_main, t);
    if (rc != 0) {
        log_err("websocket thread start failed", "error=\"%s\"", strerror(rc));
        xq_set_wake(t->to_ws, NULL, NULL);
        goto fail;
    }
    if (t->dash != NULL)
        log_info("dashboard listening", "listen=%s port=%d max_connections=%lld", o->listen,
                 t->dash_port, (long long)o->dash_max_connections);
    return t;
fail:
    if (t->ctx != NULL)
        lws_context_destroy(t->ctx);
    free_parts(t);
    return NULL;
}

void ws_thread_stop(struct ws_thread *t)
{
    if (t == NULL)
        return;
    xq_push(t->to_ws, xmsg_new(XMSG_SHUTDOWN, 0, NULL, 0));
    pthread_join(t->tid, NULL);
    xq_set_wake(t->to_ws, NULL, NULL);
    free_parts(t);
}

int ws_thread_dash_port(const struct ws_thread *t)
{
    return t->dash != NULL ? t->dash_port : 0;
}

void ws_thread_stats(const struct ws_thread *t, struct ws_thread_stats *out)
{
    memset(out, 0, sizeof(*out));
    upstream_ws_stats_read(t->up, &out->up);
    if (t->dash != NULL)
        ws_server_stats_read(t->dash, &out->dash);
}
