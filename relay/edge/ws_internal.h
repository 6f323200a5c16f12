/* ws_internal.h - private to relay/edge/ws_server*.c and ws_http.c: the dashboard server's
 * state (struct ws_server, struct session and the outbox slots) and the functions the three
 * files share. ws_server.c: sessions, filters, routing, liveness, the lws callback;
 * ws_outbox.c: per-session send queues, conflation, backpressure, writing frames;
 * ws_http.c: plain HTTP on the same port (page, /chains.json) and the Host rule.
 * runs on: ws thread (counters: read from any thread). */
#ifndef RELAY_EDGE_WS_INTERNAL_H
#define RELAY_EDGE_WS_INTERNAL_H

#include "relay/edge/ws_server.h"
#include "protocol/filter.h"
#include "protocol/forwarded.h"
#include "relay/common/siphash.h"
#include "relay/edge/xq.h"

#include <libwebsockets.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define WRITE_BURST 64       /* frames per WRITEABLE callback, written in one send */
#define WRITE_BATCH_BYTES 65536 /* bytes per WRITEABLE callback (a bigger frame goes alone);
                                 * also the protocol's tx_packet_size: lws sends up to this
                                 * much in one send() (its default is rx_buffer_size, 4 KiB) */
#define CTL_BURST 100        /* client control frames (pings, pongs): burst, then CTL_RATE/s */
#define CTL_RATE 20          /* (a client pings every few seconds at most; we ping every 20 s) */
#define CLOSE_GRACE_SECS 5   /* a closing session that cannot flush is dropped after this */
#define HTTP_CHUNK 16384     /* page bytes per HTTP WRITEABLE callback */
/* LWS_WRITE_CLOSE: 4 in enum lws_write_protocol (reserved in the public enum: "part of the
 * abi"), only named in lws's private headers */
#define LWS_SERVER_WRITE_CLOSE ((enum lws_write_protocol)4)

/* One event shared by its recipients. */
struct wev {
    int refs;
    struct xmsg *m; /* XMSG_DASH_EVENT: shared frame + routing meta */
};

/* One queued frame of one session: an event (ev), an own frame (m), or - both NULL - the
 * conflation notice, formatted when written. Held by value in the session's ring. */
struct oslot {
    struct wev *ev;
    struct xmsg *m;
};

/* One id subscription: in the server's id hash and on its session's list. */
struct isub {
    struct isub *hnext, *snext;
    struct session *x;
    uint32_t h;
    char id[];
};

struct bfilter {
    uint64_t no;
    int all;                     /* f matches what the empty filter matches (dash_broad_is_all) */
    struct proto_filter f;
};

struct session {
    struct lws *wsi;
    uint64_t id;                 /* 0: plain HTTP connection, not in the hash */
    struct session *hnext;
    struct oslot *q;             /* the outbox: a ring of q_cap slots (a power of two, 0 */
    size_t q_cap, q_head;        /* until the first frame), out_count of them from q_head */
    size_t out_count;
    size_t out_bytes;            /* payload bytes of the outbox */
    size_t held;                 /* the last write's bytes, while lws still holds part of it */
    unsigned char *rx;           /* message being reassembled */
    size_t rx_len;
    int close_code;              /* != 0: close once the outbox is flushed */
    char close_reason[64];
    /* filters */
    struct isub *ids;
    struct bfilter *broad;
    size_t nbroad;
    struct session *bprev, *bnext; /* on the server's broad list while nbroad > 0 */
    uint64_t serial;             /* last event queued here: one copy per event */
    /* liveness */
    int64_t last_rx_ms, last_ping_ms;
    /* control frames from the client (pings, pongs): a token bucket like the core's message
     * rate (ws_server.c control_rate_ok) */
    double ctl_tokens;
    int64_t ctl_bucket_ms;
    /* backpressure */
    uint64_t dropped_pending;    /* frames conflated since the last notice was written */
    int64_t progress_ms;         /* last write, or when the outbox stopped being empty */
    unsigned ping_due : 1, notice_queued : 1, close_sent : 1;
    /* plain HTTP: an embedded page file, or the chain list (a reference held while sent) */
    const struct embedded_file *file;
    struct xbuf *blob;
    size_t file_off;
};

/* A log line that repeats under attack, limited to one per interval (ws thread only). */
struct log_limit {
    int64_t last_ms;  /* mono ms of the last line written, 0 = never */
    uint64_t quiet;   /* lines suppressed since */
};

struct counters {
    _Atomic uint64_t sessions, opened, closed, msgs_in, frames_out, dropped, unrouted,
        slow_closed, http_requests, events_in, deliveries, conflated, conflations, dead_peers,
        pings, route_ns, queued, queued_bytes, id_subs, broad_subs, frame_writes;
};

struct ws_server {
    struct xq *to_core;
    size_t queue_max;
    size_t queue_bytes;          /* outbox + lws-held bytes per session before it is cut */
    uint64_t next_id, serial;
    struct session **tab;        /* chained hash on session id; size is a power of two */
    size_t tab_size, count;
    struct isub **itab;          /* request id -> subscriptions */
    size_t itab_size, icount;
    struct session *broad_head;
    int64_t ping_interval_ms, ping_timeout_ms;
    struct lws_context *ctx;
    lws_sorted_usec_list_t sul_sweep;
    struct xbuf *chains;         /* GET /chains.json (DASH_OP_CHAINS), NULL until the first */
    unsigned char *wbuf;         /* ws_outbox_write's batch: frames framed back to back */
    size_t wbuf_cap;
    int shutting_down;
    char *cors_origins;          /* plain HTTP: allowed origins (cors.h), NULL: none */
    int host_check;              /* refuse requests whose Host does not name us */
    char *allowed_hosts;         /* names besides loopback ones (protocol/addr.h), or NULL */
    struct proto_cidr_list trusted; /* reverse proxies whose forwarded headers are read */
    struct log_limit host_log;   /* ws_http_log_refused_host: one line a second */
    struct log_limit fwd_log;    /* ws_http_client: a trusted proxy's bad header, one per 10 s */
    struct counters st;
};

static inline void count(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static inline void add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static inline void sub(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_sub_explicit(c, n, memory_order_relaxed);
}

static inline uint32_t hash_str(const char *s)
{
    return sip_str32(s); /* keyed per process: client ids cannot be made to collide */
}

/* ws_outbox.c */
void ws_wev_unref(struct wev *ev);
/* Queue a frame for x: a reference to ev (taken) or m (taken); overflows conflate, then close
 * (1013). */
void ws_outbox_push(struct ws_server *s, struct session *x, struct wev *ev, struct xmsg *m);
/* Release every queued frame of x and free its ring. */
void ws_outbox_drop(struct ws_server *s, struct session *x);
/* Close x with code once its outbox is flushed, or at once dropping it when drop is set
 * (reason: the close frame's text). */
void ws_session_close(struct ws_server *s, struct session *x, int code, const char *reason,
                      int drop);
/* SERVER_WRITEABLE: write up to WRITE_BURST frames (WRITE_BATCH_BYTES) in one send; lws's
 * return value. */
int ws_outbox_write(struct ws_server *s, struct session *x);

/* ws_http.c */
/* 1 when the request's Host does not name the relay (with the Host rule on). */
int ws_http_host_refused(const struct ws_server *s, struct lws *wsi);
/* One info line a second at most: a request with a foreign Host refused (what: http/upgrade). */
void ws_http_log_refused_host(struct ws_server *s, struct lws *wsi, const char *what);
/* The client address of wsi's request into out: its peer, or when the peer is a trusted proxy
 * (*proxied set), the client its X-Forwarded-For / Forwarded names (the proxy itself on a
 * malformed value, logged at most every 10 s). 0, or -1 when unknown. */
int ws_http_client(struct ws_server *s, struct lws *wsi, struct proto_ip *out, int *proxied);
/* On a trusted proxy's connection, count the client this request (page or upgrade) names
 * against the per-address connection cap instead (ws_listen_count_client). 1 when that
 * client is at its cap (refuse the request), else 0. */
int ws_http_client_over_cap(struct ws_server *s, struct lws *wsi);
/* LWS_CALLBACK_HTTP and HTTP_WRITEABLE: lws's return values. */
int ws_http_on_request(struct ws_server *s, struct lws *wsi, struct session *x, const char *uri);
int ws_http_on_writeable(struct lws *wsi, struct session *x);

#endif
