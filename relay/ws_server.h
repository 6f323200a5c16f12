/* ws_server.h - the dashboard websocket server on STATUSRELAY_WS_LISTEN (minimal for now).
 *
 * What it does today: websocket sessions on "/" (any other path is refused at the upgrade),
 * and plain HTTP GET / answered with a tiny placeholder page (everything else 404). Each
 * websocket session gets a uint64 id (1, 2, ...; never reused in a process) and the core
 * hears about it as XMSG_DASH_OPEN (data = peer address), XMSG_DASH_MSG (one complete
 * client message, fragments reassembled, at most WS_SERVER_MAX_MSG bytes - bigger closes the
 * session with 1009) and XMSG_DASH_GONE (exactly once per OPEN). The core answers with
 * XMSG_DASH_SEND (one text frame to one session, queued in the session's outbox, written in
 * order) and XMSG_DASH_CLOSE (code, data = reason; frames queued before it are sent first).
 * An outbox longer than queue_max closes the session with WS_SERVER_CLOSE_SLOW.
 *
 * Not yet (issue 6): XMSG_DASH_EVENT fan-out by per-session filters and XMSG_DASH_ACCEPT_SUB
 * (both are accepted and dropped, counted as unrouted), server pings, the real page.
 * Where to grow: the session struct and lookup (id -> session hash) are in ws_server.c; the
 * outbox already writes shared xbuf frames (m->shared) so fan-out can queue one buffer to
 * many sessions.
 * runs on: ws thread, except ws_server_stats_read (any thread). */
#ifndef RELAY_WS_SERVER_H
#define RELAY_WS_SERVER_H

#include <stddef.h>
#include <stdint.h>

#define WS_SERVER_MAX_MSG (64 * 1024)   /* one client message */
#define WS_SERVER_CLOSE_SLOW 1013      /* "try again later": the client fell too far behind */

struct lws_protocols;
struct xmsg;
struct xq;
struct ws_server;

struct ws_server_stats {
    uint64_t sessions;       /* open websocket sessions now */
    uint64_t opened, closed;
    uint64_t msgs_in;        /* XMSG_DASH_MSG pushed */
    uint64_t frames_out;
    uint64_t dropped;        /* XMSG_DASH_SEND for unknown / closing sessions */
    uint64_t unrouted;       /* XMSG_DASH_EVENT / ACCEPT_SUB (not implemented yet) */
    uint64_t slow_closed;    /* sessions closed because their outbox overflowed */
    uint64_t http_requests;
};

/* queue_max: outbox frames per session (<= 0: 1024). Pushes go to to_core. */
struct ws_server *ws_server_new(struct xq *to_core, int64_t queue_max);
/* Free. Call after lws_context_destroy (lws calls back until then). NULL-safe. */
void ws_server_free(struct ws_server *s);
/* Fill one lws protocol entry (name "statusrelay-dashboard", user = s). It must be first in
 * the dashboard vhost's list: lws binds plain HTTP and protocol-less upgrades to protocols[0]. */
void ws_server_protocol(struct ws_server *s, struct lws_protocols *out);
/* Handle one XMSG_DASH_* message from the core. Takes m. */
void ws_server_on_msg(struct ws_server *s, struct xmsg *m);
/* Shutdown: refuse new sessions, close every session with 1001 (GONE pushed as they close). */
void ws_server_shutdown(struct ws_server *s);
/* 1 when no websocket session is left. */
int ws_server_idle(const struct ws_server *s);
/* Copy the counters. Any thread, as long as s is alive. */
void ws_server_stats_read(const struct ws_server *s, struct ws_server_stats *out);

#endif
