/* ws_thread.h - the libwebsockets service thread ("ws" in logs).
 *
 * Debian's libwebsockets is not built with libevent, so lws runs its own loop in this one
 * thread. It owns the lws_context, the dashboard server vhost (relay/edge/ws_server.c) and the
 * upstream client vhost (relay/edge/upstream_ws.c); it holds no business logic, it moves frames.
 * It talks to the core only through the two queues of relay/edge/xq.h:
 *
 *   core -> to_ws  : XMSG_UP_*    -> upstream_ws_on_msg
 *                    XMSG_DASH_*  -> ws_server_on_msg
 *                    XMSG_SHUTDOWN: close everything (upstream 1001, dashboards 1001), wait up
 *                                   to WS_THREAD_STOP_GRACE_MS for the close handshakes, exit
 *   ws -> to_core  : XMSG_UP_READY / UP_FRAME / UP_DOWN, XMSG_DASH_OPEN / DASH_MSG / DASH_GONE
 *
 * ws_thread_start installs the to_ws wake hook (lws_cancel_service); the thread drains to_ws
 * on LWS_CALLBACK_EVENT_WAIT_CANCELLED. Messages pushed before the start are handled first.
 * runs on: ws_thread_start / ws_thread_stop / ws_thread_stats on the core thread; everything
 * else on the ws thread. */
#ifndef RELAY_WS_THREAD_H
#define RELAY_WS_THREAD_H

#include "relay/edge/upstream_ws.h"
#include "relay/edge/ws_server.h"

#include <stdint.h>

#define WS_THREAD_STOP_GRACE_MS 1000

struct xq;
struct ws_thread;

struct ws_thread_opts {
    const char *listen;           /* dashboard "host:port" / "[v6]:port" (port 0: any free
                                     port); NULL: no dashboard vhost (tools, tests) */
    const char *upstream_url;     /* ws:// or wss:// */
    const char *api_key;          /* NULL: none */
    int64_t ping_interval_ms;     /* upstream websocket pings (<= 0: 15 s) */
    int64_t ping_timeout_ms;      /* no pong/data this long after a ping: reconnect */
    int64_t connect_timeout_ms;   /* <= 0: UPSTREAM_WS_CONNECT_TIMEOUT_MS (10 s) */
    int64_t dash_queue_max;       /* frames queued per dashboard session (<= 0: 1024) */
    int64_t dash_queue_bytes;     /* bytes queued per dashboard session (<= 0: 4 MiB) */
    int64_t dash_max_connections; /* open dashboard connections at most (<= 0: no cap) */
    const char *dash_cors_origins; /* CORS origins of the page's HTTP answers (relay/common/
                                      cors.h); NULL: none */
    int dash_host_check;          /* refuse foreign Host headers (ws_server_set_host_rule) */
    const char *dash_allowed_hosts; /* names besides loopback ones; NULL: none */
    int64_t dash_max_per_address; /* dashboard connections per client address (<= 0: any) */
    const struct proto_cidr_list *trusted; /* reverse proxies (copied); NULL: none */
    struct xq *to_ws, *to_core;   /* borrowed; must outlive the thread */
};

struct proto_cidr_list;

struct ws_thread_stats {
    struct upstream_ws_stats up;
    struct ws_server_stats dash;  /* zero without a dashboard vhost */
};

/* Create the lws context and its vhosts, start the thread. Returns once the dashboard port
 * is listening, or NULL after logging one line (bad URL, listen address in use or unusable,
 * lws failure). Strings in o are copied. Does not connect upstream: push XMSG_UP_START. */
struct ws_thread *ws_thread_start(const struct ws_thread_opts *o);
/* Push XMSG_SHUTDOWN (a second one, if the core already pushed it, is harmless), join the
 * thread, detach the to_ws wake hook and free. Messages still queued stay in the queues
 * (xq_free frees them). NULL-safe. */
void ws_thread_stop(struct ws_thread *t);
/* The port the dashboard listens on (useful with port 0), or 0 without a dashboard. */
int ws_thread_dash_port(const struct ws_thread *t);
/* Counters of both modules, read with atomics. Any thread while t is alive. */
void ws_thread_stats(const struct ws_thread *t, struct ws_thread_stats *out);

#endif
