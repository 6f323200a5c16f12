/* xq.h - the two cross-thread queues between the core (libevent) thread and the ws (lws)
 * thread, and the messages they carry.
 *
 * A message is bytes plus a session id, never a pointer into the other thread's objects (the
 * session may be gone). A push hands over ownership of the message; xq_take_all hands the
 * whole FIFO list to the caller. Payloads have LWS_PRE bytes of headroom so the ws thread can
 * lws_write() them in place. Shared frames (one event to many dashboard clients) are an
 * xbuf: refcounted, immutable once published, freed by the last xbuf_unref.
 * runs on: any thread (the queue is mutex-guarded; the wake hook runs on the pushing thread
 * and must be thread-safe: event_active() or lws_cancel_service()). */
#ifndef RELAY_XQ_H
#define RELAY_XQ_H

#include <stddef.h>
#include <stdint.h>

#define XQ_PRE 16 /* == LWS_PRE in libwebsockets 4.1 (checked by a static assert in xq.c) */

enum xmsg_type {
    /* core -> ws: upstream client */
    XMSG_UP_START = 1,  /* this process holds the upstream lease: connect (data = nothing) */
    XMSG_UP_STOP,       /* lease lost or shutdown: close the upstream connection */
    XMSG_UP_SEND,       /* text frame for the upstream; dropped unless gen == current conn */
    XMSG_UP_RECONNECT,  /* drop the current connection and reconnect at once (silence) */
    /* ws -> core: upstream client */
    XMSG_UP_READY,      /* ready greeting received on connection gen; data = socket id */
    XMSG_UP_FRAME,      /* one text frame received on connection gen; data = raw bytes */
    XMSG_UP_DOWN,       /* connection gen closed; code = close code or 0; data = reason */
    /* core -> ws: dashboard server (relay/dash/ decides, relay/edge/ws_server.c moves frames) */
    XMSG_DASH_SEND,     /* frame to one session (data). key = conflation key: a request id
                           (snapshots) or "~stats"; "" = never conflated (acks, errors, ...) */
    XMSG_DASH_EVENT,    /* shared event frame (shared) for every session whose filter matches
                           (request id in key, status/chains in the meta fields); conflation
                           key = the request id */
    XMSG_DASH_CLOSE,    /* close one session with code; data = reason */
    XMSG_DASH_ACCEPT_SUB, /* core approved a filter change of one session: code = enum
                             dash_op; DASH_OP_*_ID: key = request id; DASH_OP_*_BROAD: gen =
                             the session's subscription number, data = filter JSON (ADD).
                             session 0 + DASH_OP_CONFIG: server settings, see dash_op */
    /* ws -> core: dashboard server */
    XMSG_DASH_OPEN,     /* new session; data = peer address text, key = the "token" URL query
                           parameter ("" when absent or longer than the field), code = 1 when
                           the upgrade came from a cross-origin page (Origin host != Host) */
    XMSG_DASH_MSG,      /* text message from a session */
    XMSG_DASH_GONE,     /* session closed */
    /* both */
    XMSG_SHUTDOWN,      /* core -> ws: close everything (dashboard clients with 1001), exit */
};

/* XMSG_DASH_ACCEPT_SUB operations (in xmsg.code). */
enum dash_op {
    DASH_OP_ADD_ID = 1, /* route events of request key to the session */
    DASH_OP_DEL_ID,     /* stop routing key */
    DASH_OP_ADD_BROAD,  /* add broad filter number gen: data = {"status":[..],
                           "originChainIds":[..],"destinationChainIds":[..]} ({} = all) */
    DASH_OP_DEL_BROAD,  /* remove broad filter number gen */
    DASH_OP_CONFIG,     /* session 0: data = "<ping interval ms> <ping timeout ms>" */
    DASH_OP_CHAINS,     /* session 0: data = the chain list served at GET /chains.json
                           (relay/ingest/chains.c: chains_slim) */
};

/* A refcounted immutable byte buffer with XQ_PRE headroom. */
struct xbuf {
    int refs;          /* atomic */
    size_t len;
    unsigned char *data; /* = mem + XQ_PRE */
    unsigned char mem[];
};
struct xbuf *xbuf_new(const void *data, size_t len); /* refs = 1; aborts on OOM */
struct xbuf *xbuf_ref(struct xbuf *b);
void xbuf_unref(struct xbuf *b); /* NULL-safe */

struct xmsg {
    struct xmsg *next;
    enum xmsg_type type;
    uint64_t session;  /* dashboard session id (0 = none) */
    uint64_t gen;      /* upstream connection generation */
    int code;          /* close code */
    /* routing meta for XMSG_DASH_EVENT */
    char key[136];     /* request id */
    char status[32];
    int64_t origin_chain_id, destination_chain_id;
    int ev_type;         /* protocol/event.h enum proto_event_type (0: a status event) */
    struct xbuf *shared; /* owned reference, or NULL */
    size_t len;
    unsigned char *data; /* = buf + XQ_PRE, NUL-terminated, len bytes */
    unsigned char buf[];
};

/* New message with a copy of data (may be NULL/0). Aborts on OOM. */
struct xmsg *xmsg_new(enum xmsg_type type, uint64_t session, const void *data, size_t len);
/* Free a message and drop its shared reference. NULL-safe. */
void xmsg_free(struct xmsg *m);

struct xq;
typedef void xq_wake_cb(void *arg);
struct xq *xq_new(xq_wake_cb *wake, void *arg);
/* Free the queue and any messages still in it. */
void xq_free(struct xq *q);
/* Set or replace the wake hook (e.g. once the lws context exists). */
void xq_set_wake(struct xq *q, xq_wake_cb *wake, void *arg);
/* Append m (takes ownership) and call the wake hook if the queue was empty. */
void xq_push(struct xq *q, struct xmsg *m);
/* Take every queued message, oldest first (NULL when empty). Caller owns the list. */
struct xmsg *xq_take_all(struct xq *q);

#endif
