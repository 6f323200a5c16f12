/* ws_server.c - see ws_server.h. runs on: ws thread (stats: any thread).
 *
 * Sessions are lws per-session data (struct session, zeroed by lws). A websocket session gets
 * its id at ESTABLISHED and sits in an id -> session hash until CLOSED; plain HTTP
 * connections use the same struct with id 0. Messages from the core name a session by id
 * only, so a message for a session that is gone is simply dropped.
 *
 * Ownership: an XMSG_DASH_EVENT becomes a struct wev (plain refcount: only this thread sees
 * it) referenced by one outbox node per recipient; the last node written or dropped frees
 * the message and so its xbuf. XMSG_DASH_SEND messages are owned by their one node. */
#include "relay/edge/ws_server.h"
#include "relay/edge/dash_filter.h"
#include "protocol/addr.h"
#include "relay/common/cors.h"
#include "relay/common/embedded.h"
#include "relay/common/log.h"
#include "relay/common/siphash.h"
#include "relay/common/util.h"
#include "relay/edge/xq.h"

#include <libwebsockets.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define WRITE_BURST 16       /* frames per WRITEABLE callback */
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
 * conflation notice, formatted when written. */
struct onode {
    struct onode *next;
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
    struct proto_filter f;
};

struct session {
    struct lws *wsi;
    uint64_t id;                 /* 0: plain HTTP connection, not in the hash */
    struct session *hnext;
    struct onode *out_head, *out_tail;
    size_t out_count;
    size_t out_bytes;            /* payload bytes of the outbox */
    size_t held;                 /* the last frame written, while lws still holds part of it */
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
    /* backpressure */
    uint64_t dropped_pending;    /* frames conflated since the last notice was written */
    int64_t progress_ms;         /* last write, or when the outbox stopped being empty */
    unsigned ping_due : 1, notice_queued : 1, close_sent : 1;
    /* plain HTTP: an embedded page file, or the chain list (a reference held while sent) */
    const struct embedded_file *file;
    struct xbuf *blob;
    size_t file_off;
};

struct counters {
    _Atomic uint64_t sessions, opened, closed, msgs_in, frames_out, dropped, unrouted,
        slow_closed, http_requests, events_in, deliveries, conflated, conflations, dead_peers,
        pings, route_ns, queued, queued_bytes, id_subs, broad_subs;
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
    int shutting_down;
    char *cors_origins;          /* plain HTTP: allowed origins (cors.h), NULL: none */
    int host_check;              /* refuse requests whose Host does not name us */
    char *allowed_hosts;         /* names besides loopback ones (protocol/addr.h), or NULL */
    struct counters st;
};

static void count(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static void add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static void sub(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_sub_explicit(c, n, memory_order_relaxed);
}

static uint32_t hash_str(const char *s)
{
    return sip_str32(s); /* keyed per process: client ids cannot be made to collide */
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- id -> session ------------------------------------------------------------------- */

static size_t slot(const struct ws_server *s, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 32) & (s->tab_size - 1);
}

static struct session *find(const struct ws_server *s, uint64_t id)
{
    for (struct session *x = s->tab[slot(s, id)]; x != NULL; x = x->hnext)
        if (x->id == id)
            return x;
    return NULL;
}

static void insert(struct ws_server *s, struct session *x)
{
    if (s->count + 1 > s->tab_size) { /* grow: load factor <= 1 */
        size_t old_size = s->tab_size;
        struct session **old = s->tab;
        s->tab_size *= 2;
        s->tab = xcalloc(s->tab_size, sizeof(*s->tab));
        for (size_t i = 0; i < old_size; i++)
            for (struct session *y = old[i], *next; y != NULL; y = next) {
                next = y->hnext;
                size_t k = slot(s, y->id);
                y->hnext = s->tab[k];
                s->tab[k] = y;
            }
        free(old);
    }
    size_t k = slot(s, x->id);
    x->hnext = s->tab[k];
    s->tab[k] = x;
    s->count++;
}

static void unlink_session(struct ws_server *s, struct session *x)
{
    for (struct session **pp = &s->tab[slot(s, x->id)]; *pp != NULL; pp = &(*pp)->hnext)
        if (*pp == x) {
            *pp = x->hnext;
            s->count--;
            return;
        }
}

/* ---- filters ------------------------------------------------------------------------- */

static void isub_add(struct ws_server *s, struct session *x, const char *id)
{
    if (s->icount + 1 > s->itab_size) {
        size_t old_size = s->itab_size;
        struct isub **old = s->itab;
        s->itab_size *= 2;
        s->itab = xcalloc(s->itab_size, sizeof(*s->itab));
        for (size_t i = 0; i < old_size; i++)
            for (struct isub *y = old[i], *next; y != NULL; y = next) {
                next = y->hnext;
                size_t k = y->h & (s->itab_size - 1);
                y->hnext = s->itab[k];
                s->itab[k] = y;
            }
        free(old);
    }
    size_t n = strlen(id);
    struct isub *u = xmalloc(sizeof(*u) + n + 1);
    memcpy(u->id, id, n + 1);
    u->h = hash_str(id);
    u->x = x;
    size_t k = u->h & (s->itab_size - 1);
    u->hnext = s->itab[k];
    s->itab[k] = u;
    u->snext = x->ids;
    x->ids = u;
    s->icount++;
    count(&s->st.id_subs);
}

static void isub_unhash(struct ws_server *s, struct isub *u)
{
    for (struct isub **pp = &s->itab[u->h & (s->itab_size - 1)]; *pp != NULL;
         pp = &(*pp)->hnext)
        if (*pp == u) {
            *pp = u->hnext;
            s->icount--;
            sub(&s->st.id_subs, 1);
            return;
        }
}

static void isub_del(struct ws_server *s, struct session *x, const char *id)
{
    for (struct isub **pp = &x->ids; *pp != NULL; pp = &(*pp)->snext)
        if (strcmp((*pp)->id, id) == 0) {
            struct isub *u = *pp;
            *pp = u->snext;
            isub_unhash(s, u);
            free(u);
            return;
        }
}

static void broad_link(struct ws_server *s, struct session *x)
{
    x->bprev = NULL;
    x->bnext = s->broad_head;
    if (s->broad_head)
        s->broad_head->bprev = x;
    s->broad_head = x;
}

static void broad_unlink(struct ws_server *s, struct session *x)
{
    if (x->bprev)
        x->bprev->bnext = x->bnext;
    else
        s->broad_head = x->bnext;
    if (x->bnext)
        x->bnext->bprev = x->bprev;
    x->bprev = x->bnext = NULL;
}

static void broad_add(struct ws_server *s, struct session *x, uint64_t no, const char *text,
                      size_t len)
{
    struct proto_filter f;
    if (dash_broad_parse(text, len, &f) != 0) {
        log_warn("dashboard filter unreadable, ignored", "session=%llu",
                 (unsigned long long)x->id);
        return;
    }
    x->broad = xrealloc(x->broad, (x->nbroad + 1) * sizeof(*x->broad));
    x->broad[x->nbroad].no = no;
    x->broad[x->nbroad].f = f;
    if (x->nbroad++ == 0)
        broad_link(s, x);
    count(&s->st.broad_subs);
}

static void broad_del(struct ws_server *s, struct session *x, uint64_t no)
{
    for (size_t i = 0; i < x->nbroad; i++)
        if (x->broad[i].no == no) {
            dash_broad_cleanup(&x->broad[i].f);
            x->broad[i] = x->broad[--x->nbroad];
            sub(&s->st.broad_subs, 1);
            if (x->nbroad == 0) {
                broad_unlink(s, x);
                free(x->broad);
                x->broad = NULL;
            }
            return;
        }
}

static void filters_clear(struct ws_server *s, struct session *x)
{
    for (struct isub *u = x->ids, *next; u != NULL; u = next) {
        next = u->snext;
        isub_unhash(s, u);
        free(u);
    }
    x->ids = NULL;
    while (x->nbroad > 0)
        broad_del(s, x, x->broad[x->nbroad - 1].no);
}

/* ---- outbox ------------------------------------------------------------------------- */

static void wev_unref(struct wev *ev)
{
    if (--ev->refs == 0) {
        xmsg_free(ev->m);
        free(ev);
    }
}

/* Payload bytes of a queued frame (the conflation notice: its fixed text). */
static size_t node_bytes(const struct onode *n)
{
    return n->ev ? n->ev->m->shared->len : n->m ? n->m->len : 256;
}

/* Take n's bytes off x's outbox count (n leaves the outbox). */
static void unqueue(struct ws_server *s, struct session *x, const struct onode *n)
{
    size_t b = node_bytes(n);
    x->out_bytes -= b;
    x->out_count--;
    sub(&s->st.queued, 1);
    sub(&s->st.queued_bytes, b);
}

static void node_free(struct onode *n)
{
    if (n->ev)
        wev_unref(n->ev);
    xmsg_free(n->m);
    free(n);
}

static const char *node_key(const struct onode *n)
{
    const char *k = n->ev ? n->ev->m->key : n->m ? n->m->key : "";
    return k;
}

static void drop_outbox(struct ws_server *s, struct session *x)
{
    for (struct onode *n = x->out_head, *next; n != NULL; n = next) {
        next = n->next;
        node_free(n);
    }
    sub(&s->st.queued, x->out_count);
    sub(&s->st.queued_bytes, x->out_bytes);
    x->out_head = x->out_tail = NULL;
    x->out_count = 0;
    x->out_bytes = 0;
    x->notice_queued = 0;
}

/* Close after the outbox is flushed (or at once when drop is set). */
static void close_session(struct ws_server *s, struct session *x, int code, const char *reason,
                          int drop)
{
    if (drop)
        drop_outbox(s, x);
    if (x->close_code == 0) {
        x->close_code = code;
        snprintf(x->close_reason, sizeof(x->close_reason), "%s", reason);
        lws_set_timeout(x->wsi, PENDING_TIMEOUT_CLOSE_SEND, CLOSE_GRACE_SECS);
    }
    lws_callback_on_writable(x->wsi);
}

/* Keep only the newest queued frame of every conflation key. Returns the frames dropped. */
static size_t conflate(struct ws_server *s, struct session *x)
{
    size_t cap = 16;
    while (cap < 2 * x->out_count)
        cap *= 2;
    struct kslot {
        const char *key;
        uint32_t h;
        size_t last;
    } *t = xcalloc(cap, sizeof(*t));
    size_t i = 0;
    for (struct onode *n = x->out_head; n != NULL; n = n->next, i++) {
        const char *k = node_key(n);
        if (k[0] == '\0')
            continue;
        uint32_t h = hash_str(k);
        size_t j = h & (cap - 1);
        while (t[j].key != NULL && (t[j].h != h || strcmp(t[j].key, k) != 0))
            j = (j + 1) & (cap - 1);
        t[j].key = k;
        t[j].h = h;
        t[j].last = i;
    }
    size_t dropped = 0;
    struct onode **pp = &x->out_head, *prev = NULL;
    i = 0;
    while (*pp != NULL) {
        struct onode *n = *pp;
        const char *k = node_key(n);
        int drop = 0;
        if (k[0] != '\0') {
            uint32_t h = hash_str(k);
            size_t j = h & (cap - 1);
            while (t[j].h != h || strcmp(t[j].key, k) != 0)
                j = (j + 1) & (cap - 1);
            drop = t[j].last != i;
        }
        i++;
        if (drop) {
            *pp = n->next;
            x->out_bytes -= node_bytes(n);
            sub(&s->st.queued_bytes, node_bytes(n));
            node_free(n);
            dropped++;
        } else {
            prev = n;
            pp = &n->next;
        }
    }
    x->out_tail = prev;
    x->out_count -= dropped;
    sub(&s->st.queued, dropped);
    free(t);
    return dropped;
}

static void overflow(struct ws_server *s, struct session *x)
{
    size_t dropped = conflate(s, x);
    count(&s->st.conflations);
    if (dropped > 0) {
        add(&s->st.conflated, dropped);
        x->dropped_pending += dropped;
        if (!x->notice_queued) { /* the notice goes first: the client learns it at once */
            struct onode *n = xcalloc(1, sizeof(*n));
            n->next = x->out_head;
            x->out_head = n;
            if (x->out_tail == NULL)
                x->out_tail = n;
            x->out_count++;
            x->out_bytes += node_bytes(n);
            count(&s->st.queued);
            add(&s->st.queued_bytes, node_bytes(n));
            x->notice_queued = 1;
        }
    }
    int64_t stalled_ms = mono_ms() - x->progress_ms;
    if (x->out_count > s->queue_max / 2 || x->out_bytes + x->held > s->queue_bytes / 2 ||
        stalled_ms >= WS_SERVER_STALL_MS) {
        count(&s->st.slow_closed);
        log_info("dashboard session too slow: closed", "session=%llu queued=%zu bytes=%zu "
                 "held=%zu dropped=%zu stalled_ms=%lld", (unsigned long long)x->id,
                 x->out_count, x->out_bytes, x->held, dropped, (long long)stalled_ms);
        close_session(s, x, WS_SERVER_CLOSE_SLOW, "too slow: resume from your last streamId",
                      1);
        return;
    }
    if (dropped > 0)
        log_debug("dashboard session conflated", "session=%llu dropped=%zu queued=%zu",
                  (unsigned long long)x->id, dropped, x->out_count);
}

static void enqueue(struct ws_server *s, struct session *x, struct onode *n)
{
    n->next = NULL;
    if (x->out_count == 0)
        x->progress_ms = mono_ms();
    if (x->out_tail)
        x->out_tail->next = n;
    else
        x->out_head = n;
    x->out_tail = n;
    x->out_count++;
    x->out_bytes += node_bytes(n);
    count(&s->st.queued);
    add(&s->st.queued_bytes, node_bytes(n));
    /* bytes: a frame alone (nothing queued or held before it) is always taken */
    if (x->out_count > s->queue_max ||
        (x->out_bytes + x->held > s->queue_bytes && (x->out_count > 1 || x->held > 0))) {
        overflow(s, x);
        if (x->close_code != 0)
            return;
    }
    lws_callback_on_writable(x->wsi);
}

static int write_some(struct ws_server *s, struct session *x)
{
    if (x->held > 0 && !lws_partial_buffered(x->wsi))
        x->held = 0;
    if (x->ping_due && x->close_code == 0) {
        /* a payload: lws 4.1 does not report empty pongs (RECEIVE_PONG needs len > 0) */
        unsigned char pb[LWS_PRE + 4] = {0};
        memcpy(pb + LWS_PRE, "srpg", 4);
        x->ping_due = 0;
        if (lws_write(x->wsi, pb + LWS_PRE, 4, LWS_WRITE_PING) < 0)
            return -1;
        count(&s->st.pings);
        if (lws_send_pipe_choked(x->wsi)) {
            lws_callback_on_writable(x->wsi);
            return 0;
        }
    }
    for (int k = 0; x->out_head != NULL; k++) {
        if (k == WRITE_BURST || (k > 0 && lws_send_pipe_choked(x->wsi))) {
            lws_callback_on_writable(x->wsi);
            return 0;
        }
        struct onode *n = x->out_head;
        x->out_head = n->next;
        if (x->out_head == NULL)
            x->out_tail = NULL;
        unqueue(s, x, n);
        /* a shared frame's headroom is rewritten by each write: fine, one thread writes */
        unsigned char nb[LWS_PRE + 256], *p;
        size_t len;
        if (n->ev) {
            p = n->ev->m->shared->data;
            len = n->ev->m->shared->len;
        } else if (n->m) {
            p = n->m->data;
            len = n->m->len;
        } else {
            int w = snprintf((char *)nb + LWS_PRE, sizeof(nb) - LWS_PRE,
                             "{\"type\":\"conflated\",\"data\":{\"dropped\":%llu,\"message\":"
                             "\"you fell behind: older states of some requests were skipped; "
                             "resume from your last streamId for every step\"}}",
                             (unsigned long long)x->dropped_pending);
            p = nb + LWS_PRE;
            len = (size_t)w;
            x->dropped_pending = 0;
            x->notice_queued = 0;
        }
        int w = lws_write(x->wsi, p, len, LWS_WRITE_TEXT);
        node_free(n);
        if (w < (int)len)
            return -1;
        /* what the socket did not take, lws keeps (at most this one frame: the loop stops
         * while the pipe is choked); it counts against the byte limit until flushed */
        x->held = lws_partial_buffered(x->wsi) ? len : 0;
        x->progress_ms = mono_ms();
        count(&s->st.frames_out);
    }
    if (x->close_code != 0 && !x->close_sent) {
        /* Lingering close: send the close frame ourselves and keep reading (and dropping)
         * until the peer answers or CLOSE_GRACE_SECS pass. Closing the socket at once while
         * the client is still sending makes the kernel answer with a reset, which can
         * destroy the close frame before the client reads it (it would see 1006). */
        unsigned char cb[LWS_PRE + 2 + sizeof(x->close_reason)];
        size_t rl = strlen(x->close_reason);
        cb[LWS_PRE] = (unsigned char)(x->close_code >> 8);
        cb[LWS_PRE + 1] = (unsigned char)(x->close_code & 0xff);
        memcpy(cb + LWS_PRE + 2, x->close_reason, rl);
        if (lws_write(x->wsi, cb + LWS_PRE, 2 + rl, LWS_SERVER_WRITE_CLOSE) < 0)
            return -1;
        x->close_sent = 1;
        lws_set_timeout(x->wsi, PENDING_TIMEOUT_CLOSE_ACK, CLOSE_GRACE_SECS);
    }
    return 0;
}

/* ---- routing ------------------------------------------------------------------------- */

static void deliver(struct ws_server *s, struct session *x, struct wev **ev, struct xmsg *m)
{
    if (x->close_code != 0 || x->serial == s->serial)
        return;
    x->serial = s->serial;
    if (*ev == NULL) {
        *ev = xcalloc(1, sizeof(**ev));
        (*ev)->refs = 1; /* ours until routing is done */
        (*ev)->m = m;
    }
    struct onode *n = xcalloc(1, sizeof(*n));
    n->ev = *ev;
    (*ev)->refs++;
    count(&s->st.deliveries);
    enqueue(s, x, n);
}

static void route_event(struct ws_server *s, struct xmsg *m)
{
    uint64_t t0 = mono_ns();
    struct wev *ev = NULL;
    s->serial++;
    count(&s->st.events_in);
    uint32_t h = hash_str(m->key);
    for (struct isub *u = s->itab[h & (s->itab_size - 1)]; u != NULL; u = u->hnext)
        if (u->h == h && strcmp(u->id, m->key) == 0)
            deliver(s, u->x, &ev, m);
    for (struct session *x = s->broad_head; x != NULL; x = x->bnext)
        for (size_t i = 0; i < x->nbroad; i++)
            if (dash_broad_match(&x->broad[i].f, m->status, m->origin_chain_id,
                                 m->destination_chain_id)) {
                deliver(s, x, &ev, m);
                break;
            }
    if (ev == NULL) {
        count(&s->st.unrouted);
        xmsg_free(m);
    } else {
        wev_unref(ev);
    }
    add(&s->st.route_ns, mono_ns() - t0);
}

/* ---- liveness ------------------------------------------------------------------------ */

static int64_t sweep_period_ms(const struct ws_server *s)
{
    int64_t p = s->ping_interval_ms / 2;
    if (p > s->ping_timeout_ms / 4)
        p = s->ping_timeout_ms / 4;
    return p < 50 ? 50 : p > 1000 ? 1000 : p;
}

static void on_sweep(lws_sorted_usec_list_t *sul)
{
    struct ws_server *s = container_of(sul, struct ws_server, sul_sweep);
    int64_t now = mono_ms();
    for (size_t i = 0; i < s->tab_size; i++)
        for (struct session *x = s->tab[i]; x != NULL; x = x->hnext) {
            if (x->close_code != 0)
                continue;
            int64_t idle = now - x->last_rx_ms;
            if (idle >= s->ping_timeout_ms) {
                count(&s->st.dead_peers);
                log_info("dashboard session silent: dropped", "session=%llu silent_ms=%lld",
                         (unsigned long long)x->id, (long long)idle);
                drop_outbox(s, x);
                x->close_code = LWS_CLOSE_STATUS_ABNORMAL_CLOSE; /* nothing more is sent */
                x->close_sent = 1;
                lws_set_timeout(x->wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
            } else if (idle >= s->ping_interval_ms &&
                       now - x->last_ping_ms >= s->ping_interval_ms) {
                x->last_ping_ms = now;
                x->ping_due = 1;
                lws_callback_on_writable(x->wsi);
            }
        }
    if (!s->shutting_down)
        lws_sul_schedule(s->ctx, 0, &s->sul_sweep, on_sweep,
                         (lws_usec_t)sweep_period_ms(s) * LWS_US_PER_MS);
}

static void on_config(struct ws_server *s, const struct xmsg *m)
{
    long long iv = 0, to = 0;
    if (sscanf((const char *)m->data, "%lld %lld", &iv, &to) != 2 || iv <= 0 || to <= iv)
        return;
    s->ping_interval_ms = iv;
    s->ping_timeout_ms = to;
    if (s->ctx != NULL && !s->shutting_down)
        lws_sul_schedule(s->ctx, 0, &s->sul_sweep, on_sweep,
                         (lws_usec_t)sweep_period_ms(s) * LWS_US_PER_MS);
}

/* ---- receiving ----------------------------------------------------------------------- */

static void push(struct ws_server *s, struct xmsg *m)
{
    xq_push(s->to_core, m);
}

static int on_receive(struct ws_server *s, struct session *x, const void *in, size_t len)
{
    x->last_rx_ms = mono_ms();
    if (x->close_code != 0)
        return 0;
    if (x->rx_len + len > WS_SERVER_MAX_MSG) {
        /* the lingering close (write_some), not a return of -1: the client is still sending
         * the rest of its message (many small fragments, say), and closing the socket on
         * unread data makes the kernel reset it - the client would see EOF, not 1009 */
        free(x->rx);
        x->rx = NULL;
        x->rx_len = 0;
        log_debug("dashboard message too big: closed", "session=%llu limit=%d",
                 (unsigned long long)x->id, WS_SERVER_MAX_MSG);
        close_session(s, x, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE, "message too big", 1);
        return 0;
    }
    if (lws_is_final_fragment(x->wsi) && x->rx_len == 0) {
        count(&s->st.msgs_in);
        push(s, xmsg_new(XMSG_DASH_MSG, x->id, in, len));
        return 0;
    }
    x->rx = xrealloc(x->rx, x->rx_len + len);
    memcpy(x->rx + x->rx_len, in, len);
    x->rx_len += len;
    if (lws_is_final_fragment(x->wsi)) {
        count(&s->st.msgs_in);
        push(s, xmsg_new(XMSG_DASH_MSG, x->id, x->rx, x->rx_len));
        free(x->rx);
        x->rx = NULL;
        x->rx_len = 0;
    }
    return 0;
}

/* DNS rebinding: a page of a name resolving to 127.0.0.1 is "same-origin" with us (its
 * Origin and Host match), which would let it load broad subscriptions without a token. When
 * no stream token is configured, every request (page, /chains.json, upgrade) must name us:
 * a loopback Host in any spelling or a STATUSRELAY_ALLOWED_HOSTS name. No Host at all is not
 * a browser. 1 when the request is refused. */
static int host_refused(const struct ws_server *s, struct lws *wsi)
{
    char host[300];
    if (!s->host_check || lws_hdr_total_length(wsi, WSI_TOKEN_HOST) <= 0)
        return 0;
    if (lws_hdr_copy(wsi, host, sizeof(host), WSI_TOKEN_HOST) <= 0)
        return 1; /* longer than any name */
    return !proto_host_names_relay(host, s->allowed_hosts);
}

static void log_refused_host(struct lws *wsi, const char *what)
{
    static int64_t last_ms;
    static uint64_t quiet;
    char host[64] = "";
    int64_t now = mono_ms();
    if (now - last_ms < 1000) { /* one line a second at most */
        quiet++;
        return;
    }
    lws_hdr_copy(wsi, host, sizeof(host), WSI_TOKEN_HOST);
    for (char *p = host; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e || *p == '"')
            *p = '?';
    log_info("dashboard request with a foreign Host refused", "what=%s host=\"%s\" "
             "suppressed=%llu", what, host, (unsigned long long)quiet);
    last_ms = now;
    quiet = 0;
}

/* 1 when a browser page of another origin opened the socket: a browser Origin
 * ("scheme://host[:port]" or "null") whose host:port differs from Host. Tools send no
 * Origin, or a bare host. */
static int cross_origin(struct lws *wsi)
{
    char origin[256], host[256];
    if (lws_hdr_copy(wsi, origin, sizeof(origin), WSI_TOKEN_ORIGIN) <= 0)
        return 0;
    if (strcmp(origin, "null") == 0)
        return 1;
    const char *o = strstr(origin, "://");
    if (o == NULL)
        return 0;
    if (lws_hdr_copy(wsi, host, sizeof(host), WSI_TOKEN_HOST) <= 0)
        return 1;
    return strcasecmp(o + 3, host) != 0;
}

static void on_established(struct ws_server *s, struct lws *wsi, struct session *x)
{
    char peer[64] = "", tokbuf[sizeof(((struct xmsg *)0)->key) + 8];
    x->wsi = wsi;
    x->id = ++s->next_id;
    x->last_rx_ms = x->last_ping_ms = mono_ms();
    insert(s, x);
    count(&s->st.opened);
    count(&s->st.sessions);
    int sndbuf = WS_SERVER_SNDBUF;
    setsockopt(lws_get_socket_fd(wsi), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    lws_get_peer_simple(wsi, peer, sizeof(peer));
    struct xmsg *m = xmsg_new(XMSG_DASH_OPEN, x->id, peer, strlen(peer));
    const char *tok = lws_get_urlarg_by_name(wsi, "token=", tokbuf, (int)sizeof(tokbuf));
    if (tok != NULL && strlen(tok) < sizeof(m->key))
        snprintf(m->key, sizeof(m->key), "%s", tok);
    m->code = cross_origin(wsi);
    log_debug("dashboard session opened", "session=%llu peer=%s cross_origin=%d",
              (unsigned long long)x->id, peer, m->code);
    push(s, m);
}

static void on_closed(struct ws_server *s, struct session *x)
{
    unlink_session(s, x);
    drop_outbox(s, x);
    filters_clear(s, x);
    free(x->rx);
    x->rx = NULL;
    count(&s->st.closed);
    sub(&s->st.sessions, 1);
    log_debug("dashboard session closed", "session=%llu", (unsigned long long)x->id);
    push(s, xmsg_new(XMSG_DASH_GONE, x->id, NULL, 0));
    x->id = 0;
}

/* ---- plain HTTP ------------------------------------------------------------------------ */

static const char *mime_of(const char *path)
{
    static const struct {
        const char *ext, *type;
    } t[] = {{".html", "text/html; charset=utf-8"},
             {".js", "text/javascript; charset=utf-8"},
             {".css", "text/css; charset=utf-8"},
             {".svg", "image/svg+xml"},
             {".png", "image/png"},
             {".ico", "image/x-icon"},
             {".json", "application/json"}};
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot != NULL && i < ARRAY_LEN(t); i++)
        if (strcmp(dot, t[i].ext) == 0)
            return t[i].type;
    return "application/octet-stream";
}

static const struct embedded_file *page_file(const char *uri)
{
    char path[128];
    if (strcmp(uri, "/") == 0 || strcmp(uri, "/index.html") == 0)
        return embedded_find("relay/www/index.html");
    if (uri[0] != '/' || strchr(uri + 1, '/') != NULL || strstr(uri, "..") != NULL ||
        strlen(uri) > 64)
        return NULL;
    snprintf(path, sizeof(path), "relay/www/%s", uri + 1);
    return embedded_find(path);
}

static int header(struct lws *wsi, const char *name, const char *value, unsigned char **p,
                  unsigned char *end)
{
    return lws_add_http_header_by_name(wsi, (const unsigned char *)name,
                                       (const unsigned char *)value, (int)strlen(value), p, end);
}

/* Access-Control-Allow-Origin (and Vary) for a request from an allowed Origin; 0 or lws's
 * nonzero on a full header buffer. */
static int cors_header(struct ws_server *s, struct lws *wsi, unsigned char **p, unsigned char *end)
{
    char origin[256];
    if (s->cors_origins == NULL ||
        lws_hdr_copy(wsi, origin, sizeof(origin), WSI_TOKEN_ORIGIN) <= 0)
        return 0;
    const char *acao = cors_allow_origin(s->cors_origins, origin);
    if (acao == NULL)
        return 0;
    return header(wsi, "access-control-allow-origin:", acao, p, end) ||
           (strcmp(acao, "*") != 0 && header(wsi, "vary:", "Origin", p, end));
}

/* Answer with b (taken) as the whole body, type application/json. */
static int send_json_blob(struct lws *wsi, struct session *x, unsigned status, struct xbuf *b)
{
    unsigned char buf[LWS_PRE + 512], *start = buf + LWS_PRE, *p = start,
                                      *end = buf + sizeof(buf) - 1;
    if (lws_add_http_common_headers(wsi, status, "application/json", b->len, &p, end) ||
        header(wsi, "cache-control:", "no-cache", &p, end) ||
        header(wsi, "x-content-type-options:", "nosniff", &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end)) {
        xbuf_unref(b);
        return 1;
    }
    xbuf_unref(x->blob);
    x->blob = b;
    x->file = NULL;
    x->file_off = 0;
    lws_callback_on_writable(wsi);
    return 0;
}

/* GET /chains.json: the chain list the core handed over (relay/ingest/chains.c), or 503 with
 * a JSON error until there is one. Public data (the upstream's own list): no token. */
static int on_chains_json(struct ws_server *s, struct lws *wsi, struct session *x)
{
    static const char none[] = "{\"error\":{\"code\":\"chains_unavailable\",\"message\":"
                               "\"the upstream chain list has not been fetched yet\"},"
                               "\"message\":\"the upstream chain list has not been fetched "
                               "yet\",\"errorCode\":\"CHAINS_UNAVAILABLE\"}";
    if (s->chains != NULL)
        return send_json_blob(wsi, x, HTTP_STATUS_OK, xbuf_ref(s->chains));
    return send_json_blob(wsi, x, HTTP_STATUS_SERVICE_UNAVAILABLE,
                          xbuf_new(none, sizeof(none) - 1));
}

/* 403 forbidden_host, the REST port's error shape. */
static int on_foreign_host(struct lws *wsi, struct session *x)
{
    static const char body[] =
        "{\"error\":{\"code\":\"forbidden_host\",\"message\":\"this Host is not this relay "
        "(STATUSRELAY_ALLOWED_HOSTS adds names)\"},\"message\":\"this Host is not this relay "
        "(STATUSRELAY_ALLOWED_HOSTS adds names)\",\"errorCode\":\"FORBIDDEN_HOST\"}";
    log_refused_host(wsi, "http");
    return send_json_blob(wsi, x, HTTP_STATUS_FORBIDDEN, xbuf_new(body, sizeof(body) - 1));
}

static int on_http(struct ws_server *s, struct lws *wsi, struct session *x, const char *uri)
{
    count(&s->st.http_requests);
    if (host_refused(s, wsi))
        return on_foreign_host(wsi, x);
    if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0 && strcmp(uri, "/chains.json") == 0)
        return on_chains_json(s, wsi, x);
    const struct embedded_file *f =
        lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0 ? page_file(uri) : NULL;
    if (f != NULL) {
        unsigned char buf[LWS_PRE + 1024], *start = buf + LWS_PRE, *p = start,
                                           *end = buf + sizeof(buf) - 1;
        if (lws_add_http_common_headers(wsi, HTTP_STATUS_OK, mime_of(f->path), f->len, &p,
                                        end) ||
            header(wsi, "cache-control:", "no-cache", &p, end) ||
            header(wsi, "x-content-type-options:", "nosniff", &p, end) ||
            header(wsi, "referrer-policy:", "no-referrer", &p, end) ||
            header(wsi, "x-frame-options:", "DENY", &p, end) || cors_header(s, wsi, &p, end) ||
            header(wsi, "content-security-policy:",
                   "default-src 'self'; connect-src 'self' ws: wss:; "
                   "img-src 'self' data: https:; " /* chain icons: the upstream's URLs */
                   "style-src 'self'; script-src 'self'; frame-ancestors 'none'",
                   &p, end) ||
            lws_finalize_write_http_header(wsi, start, &p, end))
            return 1;
        x->file = f;
        x->file_off = 0;
        lws_callback_on_writable(wsi);
        return 0;
    }
    if (lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL))
        return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

static int on_http_writeable(struct lws *wsi, struct session *x)
{
    if (x->file == NULL && x->blob == NULL)
        return 0;
    const unsigned char *data = x->file ? (const unsigned char *)x->file->data : x->blob->data;
    size_t len = x->file ? x->file->len : x->blob->len;
    unsigned char buf[LWS_PRE + HTTP_CHUNK];
    size_t left = len - x->file_off, n = left < HTTP_CHUNK ? left : HTTP_CHUNK;
    int final = n == left;
    memcpy(buf + LWS_PRE, data + x->file_off, n);
    x->file_off += n;
    if (lws_write(wsi, buf + LWS_PRE, n, final ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) !=
        (int)n)
        return -1;
    if (!final) {
        lws_callback_on_writable(wsi);
        return 0;
    }
    x->file = NULL;
    xbuf_unref(x->blob);
    x->blob = NULL;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* ---- the lws protocol callback ---------------------------------------------------------- */

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    const struct lws_protocols *proto = lws_get_protocol(wsi);
    struct ws_server *s = proto != NULL ? proto->user : NULL;
    struct session *x = user;
    if (s == NULL)
        return lws_callback_http_dummy(wsi, reason, user, in, len);

    switch (reason) {
    case LWS_CALLBACK_PROTOCOL_INIT:
        s->ctx = lws_get_context(wsi);
        lws_sul_schedule(s->ctx, 0, &s->sul_sweep, on_sweep,
                         (lws_usec_t)sweep_period_ms(s) * LWS_US_PER_MS);
        return 0;
    case LWS_CALLBACK_PROTOCOL_DESTROY:
        lws_sul_cancel(&s->sul_sweep);
        return 0;
    case LWS_CALLBACK_HTTP:
        return on_http(s, wsi, x, in != NULL ? in : "");
    case LWS_CALLBACK_HTTP_WRITEABLE:
        return on_http_writeable(wsi, x);
    case LWS_CALLBACK_CLOSED_HTTP: /* a transfer cut short: drop its chain list reference */
        if (x != NULL) {
            xbuf_unref(x->blob);
            x->blob = NULL;
        }
        return lws_callback_http_dummy(wsi, reason, user, in, len);

    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: {
        char uri[64];
        if (s->shutting_down || lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI) <= 0 ||
            strcmp(uri, "/") != 0)
            return 1; /* refuse the upgrade */
        if (host_refused(s, wsi)) {
            log_refused_host(wsi, "upgrade");
            lws_return_http_status(wsi, HTTP_STATUS_FORBIDDEN, "forbidden_host");
            return 1;
        }
        return 0;
    }
    case LWS_CALLBACK_ESTABLISHED:
        on_established(s, wsi, x);
        return 0;
    case LWS_CALLBACK_RECEIVE:
        return x->id != 0 ? on_receive(s, x, in, len) : 0;
    case LWS_CALLBACK_RECEIVE_PONG:
        if (x->id != 0)
            x->last_rx_ms = mono_ms();
        return 0;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        /* The peer's answer to the close frame write_some sent itself: lws does not know it
         * was ours and would echo a second close, which browsers reject ("Close received
         * after close") and report as 1006 instead of our code. Non-zero: close, no echo. */
        return x->id != 0 && x->close_sent ? 1 : 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return x->id != 0 ? write_some(s, x) : 0;
    case LWS_CALLBACK_CLOSED:
        if (x->id != 0)
            on_closed(s, x);
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

/* ---- module ------------------------------------------------------------------------------ */

struct ws_server *ws_server_new(struct xq *to_core, int64_t queue_max, int64_t queue_bytes)
{
    struct ws_server *s = xcalloc(1, sizeof(*s));
    s->to_core = to_core;
    s->cors_origins = NULL;
    s->queue_max = queue_max > 0 ? (size_t)queue_max : 1024;
    s->queue_bytes = queue_bytes > 0 ? (size_t)queue_bytes : WS_SERVER_QUEUE_BYTES;
    s->tab_size = 64;
    s->tab = xcalloc(s->tab_size, sizeof(*s->tab));
    s->itab_size = 256;
    s->itab = xcalloc(s->itab_size, sizeof(*s->itab));
    s->ping_interval_ms = WS_SERVER_PING_INTERVAL_MS;
    s->ping_timeout_ms = WS_SERVER_PING_TIMEOUT_MS;
    return s;
}

void ws_server_free(struct ws_server *s)
{
    if (s == NULL)
        return;
    /* sessions live in lws per-session memory: lws_context_destroy closed and freed them
     * (CLOSED cleared their filters and outboxes) */
    xbuf_unref(s->chains);
    free(s->tab);
    free(s->itab);
    free(s->cors_origins);
    free(s->allowed_hosts);
    free(s);
}

void ws_server_set_cors_origins(struct ws_server *s, const char *origins)
{
    free(s->cors_origins);
    s->cors_origins = origins != NULL && origins[0] != '\0' ? xstrdup(origins) : NULL;
}

void ws_server_set_host_rule(struct ws_server *s, int check, const char *allowed_hosts)
{
    s->host_check = check;
    free(s->allowed_hosts);
    s->allowed_hosts = allowed_hosts != NULL && allowed_hosts[0] != '\0'
                           ? xstrdup(allowed_hosts) : NULL;
}

void ws_server_protocol(struct ws_server *s, struct lws_protocols *out)
{
    memset(out, 0, sizeof(*out));
    out->name = "statusrelay-dashboard";
    out->callback = callback;
    out->per_session_data_size = sizeof(struct session);
    out->rx_buffer_size = 4096;
    out->user = s;
}

static void on_filter_op(struct ws_server *s, struct xmsg *m)
{
    if (m->session == 0) {
        if (m->code == DASH_OP_CONFIG)
            on_config(s, m);
        if (m->code == DASH_OP_CHAINS) { /* sessions sending the old list keep their ref */
            xbuf_unref(s->chains);
            s->chains = xbuf_new(m->data, m->len);
        }
        return;
    }
    struct session *x = find(s, m->session);
    if (x == NULL || x->close_code != 0) {
        count(&s->st.dropped);
        return;
    }
    switch (m->code) {
    case DASH_OP_ADD_ID:
        isub_add(s, x, m->key);
        break;
    case DASH_OP_DEL_ID:
        isub_del(s, x, m->key);
        break;
    case DASH_OP_ADD_BROAD:
        broad_add(s, x, m->gen, (const char *)m->data, m->len);
        break;
    case DASH_OP_DEL_BROAD:
        broad_del(s, x, m->gen);
        break;
    default:
        break;
    }
}

void ws_server_on_msg(struct ws_server *s, struct xmsg *m)
{
    struct session *x;
    switch (m->type) {
    case XMSG_DASH_SEND:
        x = find(s, m->session);
        if (x == NULL || x->close_code != 0)
            break;
        struct onode *n = xcalloc(1, sizeof(*n));
        n->m = m;
        enqueue(s, x, n);
        return;
    case XMSG_DASH_EVENT:
        if (m->shared == NULL)
            break;
        route_event(s, m);
        return;
    case XMSG_DASH_CLOSE:
        x = find(s, m->session);
        if (x != NULL)
            close_session(s, x, m->code > 0 ? m->code : LWS_CLOSE_STATUS_NORMAL,
                          (const char *)m->data, 0);
        xmsg_free(m);
        return;
    case XMSG_DASH_ACCEPT_SUB:
        on_filter_op(s, m);
        xmsg_free(m);
        return;
    default:
        xmsg_free(m);
        return;
    }
    count(&s->st.dropped);
    xmsg_free(m);
}

void ws_server_shutdown(struct ws_server *s)
{
    s->shutting_down = 1;
    for (size_t i = 0; i < s->tab_size; i++)
        for (struct session *x = s->tab[i]; x != NULL; x = x->hnext)
            close_session(s, x, LWS_CLOSE_STATUS_GOINGAWAY, "shutdown", 1);
}

int ws_server_idle(const struct ws_server *s)
{
    return s->count == 0;
}

void ws_server_stats_read(const struct ws_server *s, struct ws_server_stats *out)
{
    struct counters *c = (struct counters *)&s->st;
    out->sessions = atomic_load(&c->sessions);
    out->opened = atomic_load(&c->opened);
    out->closed = atomic_load(&c->closed);
    out->msgs_in = atomic_load(&c->msgs_in);
    out->frames_out = atomic_load(&c->frames_out);
    out->dropped = atomic_load(&c->dropped);
    out->unrouted = atomic_load(&c->unrouted);
    out->slow_closed = atomic_load(&c->slow_closed);
    out->http_requests = atomic_load(&c->http_requests);
    out->events_in = atomic_load(&c->events_in);
    out->deliveries = atomic_load(&c->deliveries);
    out->conflated = atomic_load(&c->conflated);
    out->conflations = atomic_load(&c->conflations);
    out->dead_peers = atomic_load(&c->dead_peers);
    out->pings = atomic_load(&c->pings);
    out->route_ns = atomic_load(&c->route_ns);
    out->queued = atomic_load(&c->queued);
    out->queued_bytes = atomic_load(&c->queued_bytes);
    out->id_subs = atomic_load(&c->id_subs);
    out->broad_subs = atomic_load(&c->broad_subs);
}
