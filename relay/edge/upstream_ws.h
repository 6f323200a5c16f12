/* upstream_ws.h - the lws client to the upstream status websocket. It moves frames and keeps
 * the connection alive; it holds no business logic (relay/ingest/upstream.c on the core decides what
 * to subscribe and parses every frame).
 *
 * One connection at a time. Every attempt gets a new generation number `gen`; every message
 * to the core carries it, so the core never mixes frames of a dead connection with the new
 * one. Life of one attempt:
 *
 *   connect (TCP, TLS for wss://, upgrade; API key as ?apiKey=) -> wait for the ready greeting
 *   {"type":"connection","status":"ready",...} -> push XMSG_UP_READY(gen, data = socket id)
 *   -> push each received message as XMSG_UP_FRAME(gen) (text or binary, fragments
 *   reassembled, messages over UPSTREAM_WS_MAX_MSG dropped and counted) -> on any end push
 *   XMSG_UP_DOWN(gen, code = close code or 0, data = reason), then reconnect.
 *
 * Reconnects use capped exponential backoff with full jitter (delay uniform in
 * [0, min(30 s, 250 ms * 2^n)], n = consecutive failures; n resets once a connection stayed
 * ready for UPSTREAM_WS_STABLE_MS). XMSG_UP_RECONNECT reconnects at once. A close by the peer
 * with 1012 (service restart) reconnects at once too, at most once per
 * UPSTREAM_WS_RESTART_GAP_MS (else backoff). Caveat: libwebsockets 4.1 rewrites a received
 * 1012..1015 into 1002 before we see it, so a peer close 1002 is treated as a possible restart
 * and DOWN then carries code 1002 (the reason text is intact).
 * Liveness: a websocket ping every ping_interval; when neither a pong nor any data arrives
 * within ping_timeout of the first unanswered ping, the connection is dropped (DOWN, reason
 * "ping timeout"). An attempt not ready within connect_timeout is dropped the same way
 * ("connect timeout", or "no ready greeting in time" once upgraded).
 *
 * TLS (wss://): verified against the OS CA store (OpenSSL default paths, so SSL_CERT_FILE /
 * SSL_CERT_DIR apply) with host name / IP check; a failure ends the attempt with reason
 * "certificate verify failed: <OpenSSL's text>". DNS resolution is synchronous in Debian's
 * lws 4.1 (no async DNS): a slow resolver stalls the ws thread for that long.
 *
 * Messages handled (upstream_ws_on_msg): XMSG_UP_START (connect; idempotent), XMSG_UP_STOP
 * (close with 1000, no reconnect until the next START), XMSG_UP_RECONNECT (drop and reconnect
 * at once), XMSG_UP_SEND (text frame; dropped unless m->gen is the current connection and it
 * is ready - the core resubscribes everything on every READY).
 * runs on: ws thread, except upstream_ws_stats_read (any thread). */
#ifndef RELAY_UPSTREAM_WS_H
#define RELAY_UPSTREAM_WS_H

#include <stddef.h>
#include <stdint.h>

#define UPSTREAM_WS_MAX_MSG (1024 * 1024)  /* bigger messages are dropped and counted */
#define UPSTREAM_WS_BACKOFF_BASE_MS 250
#define UPSTREAM_WS_BACKOFF_CAP_MS 30000
#define UPSTREAM_WS_STABLE_MS 30000        /* ready this long: the backoff starts afresh */
#define UPSTREAM_WS_RESTART_GAP_MS 5000    /* 1012 reconnects at once at most this often */
#define UPSTREAM_WS_CONNECT_TIMEOUT_MS 10000
#define UPSTREAM_WS_OUTBOX_MAX 262144      /* frames queued for sending; beyond: dropped */

struct lws_context;
struct lws_vhost;
struct lws_protocols;
struct xmsg;
struct xq;
struct upstream_ws;

struct upstream_ws_opts {
    const char *url;              /* ws://host[:port][/path][?query] or wss://...; copied */
    const char *api_key;          /* NULL or "": none; sent url-encoded as apiKey=; copied */
    int64_t ping_interval_ms;     /* <= 0: 15 s */
    int64_t ping_timeout_ms;      /* <= 0: 2 * ping_interval */
    int64_t connect_timeout_ms;   /* <= 0: UPSTREAM_WS_CONNECT_TIMEOUT_MS */
};

enum upstream_ws_state {
    UPSTREAM_WS_IDLE = 0,         /* not started, or stopped */
    UPSTREAM_WS_BACKOFF,          /* waiting before the next attempt */
    UPSTREAM_WS_CONNECTING,       /* TCP / TLS / upgrade in progress */
    UPSTREAM_WS_OPEN,             /* upgraded, waiting for the ready greeting */
    UPSTREAM_WS_READY,
};

/* A consistent-enough copy of the counters (each read atomically). */
struct upstream_ws_stats {
    int state;                    /* enum upstream_ws_state */
    uint64_t gen;                 /* generation of the latest attempt */
    uint64_t attempts;            /* connection attempts */
    uint64_t reconnects;          /* attempts after the first one since START */
    uint64_t readies;             /* attempts that reached the ready greeting */
    uint64_t downs;               /* XMSG_UP_DOWN pushed */
    uint64_t ping_timeouts;       /* connections dropped for silence after a ping */
    uint64_t connect_timeouts;    /* attempts not ready within connect_timeout */
    uint64_t frames_in;           /* XMSG_UP_FRAME pushed */
    uint64_t bytes_in;
    uint64_t frames_out;          /* text frames written */
    uint64_t dropped_oversize;    /* received messages over UPSTREAM_WS_MAX_MSG */
    uint64_t dropped_sends;       /* XMSG_UP_SEND for a stale gen / not ready / outbox full */
};

/* Parse and keep the settings. Returns NULL after logging one line when the URL is not a
 * usable ws:// or wss:// URL. Nothing connects before attach + XMSG_UP_START. */
struct upstream_ws *upstream_ws_new(const struct upstream_ws_opts *o, struct xq *to_core);
/* Free everything. Call after lws_context_destroy (lws may call back until then). NULL-safe. */
void upstream_ws_free(struct upstream_ws *u);
/* 1 when the URL is wss:// (the client vhost then needs TLS). */
int upstream_ws_uses_tls(const struct upstream_ws *u);
/* Fill one lws protocol entry (name "statusrelay-upstream", user = u) for the client vhost's
 * protocol list; ws_thread wraps its callback to catch EVENT_WAIT_CANCELLED first. */
void upstream_ws_protocol(struct upstream_ws *u, struct lws_protocols *out);
/* Bind to the context and the client vhost once both exist. */
void upstream_ws_attach(struct upstream_ws *u, struct lws_context *ctx, struct lws_vhost *vh);
/* Handle one XMSG_UP_* message from the core. Takes m (frees or keeps it). */
void upstream_ws_on_msg(struct upstream_ws *u, struct xmsg *m);
/* Shutdown: close the connection with 1001 (DOWN pushed), cancel timers, never reconnect. */
void upstream_ws_shutdown(struct upstream_ws *u);
/* 1 when no connection (current or closing) is left. */
int upstream_ws_idle(const struct upstream_ws *u);
/* Copy the counters. Any thread, as long as u is alive. */
void upstream_ws_stats_read(const struct upstream_ws *u, struct upstream_ws_stats *out);
/* "idle", "backoff", "connecting", "open", "ready". */
const char *upstream_ws_state_name(int state);

#endif
