/* ws_server.h - the dashboard websocket server and live page on STATUSRELAY_WS_LISTEN.
 *
 * The lws side of the dashboard stream: it moves frames and keeps each session's filters;
 * every decision (who may subscribe to what, snapshots, resume, error frames) is made by the
 * core (relay/dash/). Protocol and hand-off are documented in README "Dashboard stream".
 *
 * Sessions. A websocket upgrade on "/" (any other path is refused) gets a uint64 id (1, 2,
 * ...; never reused in a process). The core hears XMSG_DASH_OPEN (data = peer address, key
 * = the "token" URL query parameter, code = 1 for a cross-origin page), XMSG_DASH_MSG (one
 * complete client message, fragments reassembled, at most WS_SERVER_MAX_MSG bytes - bigger
 * closes with 1009) and XMSG_DASH_GONE (exactly once per OPEN).
 *
 * From the core: XMSG_DASH_SEND (one frame for one session), XMSG_DASH_EVENT (one shared
 * frame for every session whose filter matches), XMSG_DASH_ACCEPT_SUB (filter changes, enum
 * dash_op in xq.h), XMSG_DASH_CLOSE (code + reason, after the frames queued before it).
 *
 * Routing. Id subscriptions sit in one hash (request id -> subscribed sessions): O(1) per
 * event plus O(recipients). Sessions with broad filters (status/chains/all) are on one list
 * and matched with dash_broad_match. A session matching an event twice gets it once. The
 * event's xbuf is queued to every recipient by reference (a 24-byte outbox node each); it is
 * never copied or re-encoded per client.
 *
 * Backpressure. Each session's outbox holds at most queue_max frames and queue_bytes bytes
 * (counting the last frame written while lws still holds part of it: lws_partial_buffered;
 * one frame alone is always taken, however big). On overflow it is
 * conflated: for every request only the newest queued frame stays (frames without a
 * conflation key - acks, errors, gap/resumed notices - always stay), and a
 * {"type":"conflated","data":{"dropped":N,...}} notice goes to the front. A session that is
 * still over half the cap (frames or bytes) after conflating (it follows too many busy
 * requests - or asks for too many history answers - to keep even
 * their present), or overflows after taking no frame for WS_SERVER_STALL_MS, is closed with
 * WS_SERVER_CLOSE_SLOW (1013); its outbox is dropped and it can resume from its last
 * streamId. Socket send buffers are capped (WS_SERVER_SNDBUF) so a client that stops
 * reading shows up here within a few hundred frames, not megabytes later in the kernel.
 *
 * Liveness. Every ping interval without a frame or pong from the client, the server sends a
 * websocket ping; a client silent for the ping timeout is dropped (no close frame: the peer
 * is gone). Defaults below; the core sets them with DASH_OP_CONFIG.
 *
 * Plain HTTP: GET / serves relay/www/index.html, GET /<name> relay/www/<name> (embedded in
 * the binary), GET /chains.json the chain list the core handed over (DASH_OP_CHAINS; 503
 * with a JSON error until then), everything else 404. With the host rule on
 * (ws_server_set_host_rule), a request whose Host does not name the relay gets 403
 * forbidden_host instead, and such an upgrade is refused with 403. A request from an Origin the CORS setting allows gets
 * Access-Control-Allow-Origin on the files it is served.
 * runs on: ws thread, except ws_server_stats_read (any thread). */
#ifndef RELAY_WS_SERVER_H
#define RELAY_WS_SERVER_H

#include <stddef.h>
#include <stdint.h>

#define WS_SERVER_MAX_MSG (64 * 1024)        /* one client message */
#define WS_SERVER_QUEUE_BYTES (4 * 1024 * 1024) /* default outbox bytes per session */
#define WS_SERVER_CLOSE_SLOW 1013            /* "try again later": hopelessly behind */
#define WS_SERVER_CLOSE_POLICY 1008          /* flood of (bad) client messages */
#define WS_SERVER_SNDBUF (64 * 1024)         /* SO_SNDBUF of dashboard sockets */
#define WS_SERVER_STALL_MS 5000              /* overflowing and nothing taken this long */
#define WS_SERVER_PING_INTERVAL_MS 20000
#define WS_SERVER_PING_TIMEOUT_MS 60000
#define WS_SERVER_STATS_KEY "~stats"         /* conflation key of stats frames */

struct lws_protocols;
struct xmsg;
struct xq;
struct ws_server;

struct ws_server_stats {
    uint64_t sessions;       /* open websocket sessions now */
    uint64_t opened, closed;
    uint64_t msgs_in;        /* XMSG_DASH_MSG pushed */
    uint64_t frames_out;     /* frames written (all kinds) */
    uint64_t frame_writes;   /* writes of those frames: one per batch (ws_outbox.c) */
    uint64_t dropped;        /* XMSG_DASH_SEND/CLOSE/ACCEPT_SUB for unknown/closing sessions */
    uint64_t unrouted;       /* XMSG_DASH_EVENT that matched no session */
    uint64_t slow_closed;    /* sessions closed with 1013 */
    uint64_t http_requests;
    uint64_t events_in;      /* XMSG_DASH_EVENT routed */
    uint64_t deliveries;     /* event frames queued to sessions (one per recipient) */
    uint64_t conflated;      /* frames dropped by conflation */
    uint64_t conflations;    /* conflation rounds */
    uint64_t dead_peers;     /* sessions dropped by the ping timeout */
    uint64_t pings;          /* pings sent */
    uint64_t route_ns;       /* time spent routing events (match + enqueue), ns */
    uint64_t queued;         /* frames waiting in all outboxes now */
    uint64_t queued_bytes;   /* their payload bytes */
    uint64_t id_subs, broad_subs; /* filters installed now */
};

/* queue_max: outbox frames per session (<= 0: 1024); queue_bytes: outbox bytes per session
 * (<= 0: WS_SERVER_QUEUE_BYTES). Pushes go to to_core. */
struct ws_server *ws_server_new(struct xq *to_core, int64_t queue_max, int64_t queue_bytes);
/* The origins allowed cross-origin on the plain HTTP answers (relay/common/cors.h: "*", a list,
 * NULL or "": none); copied. Call before the lws thread runs. */
void ws_server_set_cors_origins(struct ws_server *s, const char *origins);
/* check != 0: refuse every request (page, /chains.json, upgrade) whose Host header does not
 * name the relay (protocol/addr.h proto_host_names_relay: loopback spellings or a name of
 * allowed_hosts, copied): 403 forbidden_host. Against DNS rebinding; the core asks for it when
 * no stream token is configured. Call before the lws thread runs. */
void ws_server_set_host_rule(struct ws_server *s, int check, const char *allowed_hosts);
/* Trusted reverse proxies (copied; NULL: none): a connection from one of them takes its client
 * address from X-Forwarded-For / Forwarded (protocol/forwarded.h) for the per-address limits
 * (the connection cap of ws_listen.c, the anonymous ids of the core) and the logs. */
struct proto_cidr_list;
void ws_server_set_trusted(struct ws_server *s, const struct proto_cidr_list *trusted);
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
