/* ws_outbox.c - the dashboard server's per-session send queues (ws_internal.h): queueing
 * frames, conflation when a queue overflows (frames or bytes), closing slow consumers, and
 * writing frames on SERVER_WRITEABLE. runs on: ws thread.
 *
 * A session's outbox is a ring of slots (struct oslot, by value: no allocation per frame),
 * allocated on the first frame, doubled when full, freed when emptied at a large size and
 * when the session closes. Ownership: a slot holds one reference to its shared event
 * (struct wev) or owns its own xmsg; the slot written or dropped last frees the event. */
#include "relay/edge/ws_internal.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING_MIN 16   /* first ring size (slots) */
#define RING_KEEP 64  /* a drained ring bigger than this is freed */

/* ---- outbox ------------------------------------------------------------------------- */

void ws_wev_unref(struct wev *ev)
{
    if (--ev->refs == 0) {
        xmsg_free(ev->m);
        free(ev);
    }
}

/* Payload bytes of a queued frame (the conflation notice: its fixed text). */
static size_t slot_bytes(const struct oslot *n)
{
    return n->ev ? n->ev->m->shared->len : n->m ? n->m->len : 256;
}

/* The i-th queued slot of x (0: the oldest). */
static struct oslot *at(struct session *x, size_t i)
{
    return &x->q[(x->q_head + i) & (x->q_cap - 1)];
}

/* Release a slot's frame. */
static void slot_release(struct oslot *n)
{
    if (n->ev)
        ws_wev_unref(n->ev);
    xmsg_free(n->m);
}

static const char *slot_key(const struct oslot *n)
{
    const char *k = n->ev ? n->ev->m->key : n->m ? n->m->key : "";
    return k;
}

/* Room for one more slot: the ring doubled (in order, from slot 0) when full. */
static void ring_reserve(struct session *x)
{
    if (x->out_count < x->q_cap)
        return;
    size_t cap = x->q_cap ? 2 * x->q_cap : RING_MIN;
    struct oslot *q = xmalloc(cap * sizeof(*q));
    for (size_t i = 0; i < x->out_count; i++)
        q[i] = *at(x, i);
    free(x->q);
    x->q = q;
    x->q_cap = cap;
    x->q_head = 0;
}

/* Take the oldest slot off the ring (x->out_count > 0); out_bytes and counters: the caller. */
static struct oslot ring_pop(struct session *x)
{
    struct oslot n = x->q[x->q_head];
    x->q_head = (x->q_head + 1) & (x->q_cap - 1);
    x->out_count--;
    return n;
}

/* An emptied ring: its memory back when it grew large (a burst), else kept for the next. */
static void ring_drained(struct session *x)
{
    if (x->out_count == 0 && x->q_cap > RING_KEEP) {
        free(x->q);
        x->q = NULL;
        x->q_cap = 0;
        x->q_head = 0;
    }
}

void ws_outbox_drop(struct ws_server *s, struct session *x)
{
    for (size_t i = 0; i < x->out_count; i++)
        slot_release(at(x, i));
    sub(&s->st.queued, x->out_count);
    sub(&s->st.queued_bytes, x->out_bytes);
    free(x->q);
    x->q = NULL;
    x->q_cap = 0;
    x->q_head = 0;
    x->out_count = 0;
    x->out_bytes = 0;
    x->notice_queued = 0;
}

/* Close after the outbox is flushed (or at once when drop is set). */
void ws_session_close(struct ws_server *s, struct session *x, int code, const char *reason,
                      int drop)
{
    if (drop)
        ws_outbox_drop(s, x);
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
    for (size_t i = 0; i < x->out_count; i++) {
        const char *k = slot_key(at(x, i));
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
    /* compact in place, in order: slot i moves to kept (kept <= i) */
    size_t kept = 0, n = x->out_count;
    for (size_t i = 0; i < n; i++) {
        struct oslot *o = at(x, i);
        const char *k = slot_key(o);
        int drop = 0;
        if (k[0] != '\0') {
            uint32_t h = hash_str(k);
            size_t j = h & (cap - 1);
            while (t[j].h != h || strcmp(t[j].key, k) != 0)
                j = (j + 1) & (cap - 1);
            drop = t[j].last != i;
        }
        if (drop) {
            x->out_bytes -= slot_bytes(o);
            sub(&s->st.queued_bytes, slot_bytes(o));
            slot_release(o);
        } else {
            *at(x, kept++) = *o;
        }
    }
    size_t dropped = n - kept;
    x->out_count = kept;
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
            ring_reserve(x);
            x->q_head = (x->q_head + x->q_cap - 1) & (x->q_cap - 1);
            x->q[x->q_head] = (struct oslot){NULL, NULL};
            x->out_count++;
            x->out_bytes += slot_bytes(&x->q[x->q_head]);
            count(&s->st.queued);
            add(&s->st.queued_bytes, slot_bytes(&x->q[x->q_head]));
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
        ws_session_close(s, x, WS_SERVER_CLOSE_SLOW, "too slow: resume from your last streamId",
                      1);
        return;
    }
    if (dropped > 0)
        log_debug("dashboard session conflated", "session=%llu dropped=%zu queued=%zu",
                  (unsigned long long)x->id, dropped, x->out_count);
}

void ws_outbox_push(struct ws_server *s, struct session *x, struct wev *ev, struct xmsg *m)
{
    if (x->out_count == 0)
        x->progress_ms = mono_ms();
    ring_reserve(x);
    struct oslot *n = at(x, x->out_count);
    n->ev = ev;
    n->m = m;
    x->out_count++;
    x->out_bytes += slot_bytes(n);
    count(&s->st.queued);
    add(&s->st.queued_bytes, slot_bytes(n));
    /* bytes: a frame alone (nothing queued or held before it) is always taken */
    if (x->out_count > s->queue_max ||
        (x->out_bytes + x->held > s->queue_bytes && (x->out_count > 1 || x->held > 0))) {
        overflow(s, x);
        if (x->close_code != 0)
            return;
    }
    /* one request per non-empty outbox: a callback that leaves frames queued asks again */
    if (x->out_count == 1)
        lws_callback_on_writable(x->wsi);
}

/* The conflation notice's text into out (n bytes at most); its length. */
static size_t notice_text(struct session *x, unsigned char *out, size_t n)
{
    int w = snprintf((char *)out, n,
                     "{\"type\":\"conflated\",\"data\":{\"dropped\":%llu,\"message\":"
                     "\"you fell behind: older states of some requests were skipped; "
                     "resume from your last streamId for every step\"}}",
                     (unsigned long long)x->dropped_pending);
    x->dropped_pending = 0;
    x->notice_queued = 0;
    return w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
}

/* A server text frame's header (FIN, unmasked) for len payload bytes into h; its length. */
static size_t frame_header(unsigned char *h, size_t len)
{
    h[0] = 0x81;
    if (len < 126) {
        h[1] = (unsigned char)len;
        return 2;
    }
    if (len < 65536) {
        h[1] = 126;
        h[2] = (unsigned char)(len >> 8);
        h[3] = (unsigned char)len;
        return 4;
    }
    h[1] = 127;
    for (int i = 0; i < 8; i++)
        h[2 + i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
    return 10;
}

/* The frames at the head of x's outbox that go out in one send: at most WRITE_BURST, and
 * WRITE_BATCH_BYTES of payload and headers unless the first alone is bigger. */
static size_t batch_count(struct session *x, size_t *bytes)
{
    size_t k = 0, b = 0;
    for (; k < x->out_count && k < WRITE_BURST; k++) {
        size_t nb = slot_bytes(at(x, k)) + 10;
        if (k > 0 && b + nb > WRITE_BATCH_BYTES)
            break;
        b += nb;
    }
    *bytes = b;
    return k;
}

/* Write the k frames at the head of x's outbox (k >= 1), releasing their slots: one frame
 * in place (lws writes the header into the frame's headroom), several framed back to back
 * in s->wbuf and written as raw bytes - one send() for the lot. Server frames carry no
 * mask and the dashboard vhost has no extension, so the frames are header + payload; lws
 * keeps what the socket did not take (lws_issue_raw) and writes it before anything else.
 * 0, or -1 when the write failed. */
static int write_batch(struct ws_server *s, struct session *x, size_t k, size_t bytes)
{
    size_t len = 0;
    int w;
    if (k == 1 && (at(x, 0)->ev != NULL || at(x, 0)->m != NULL)) {
        struct oslot n = ring_pop(x);
        x->out_bytes -= slot_bytes(&n);
        sub(&s->st.queued, 1);
        sub(&s->st.queued_bytes, slot_bytes(&n));
        /* a shared frame's headroom is rewritten by each write: fine, one thread writes */
        unsigned char *p = n.ev ? n.ev->m->shared->data : n.m->data;
        len = n.ev ? n.ev->m->shared->len : n.m->len;
        w = lws_write(x->wsi, p, len, LWS_WRITE_TEXT);
        slot_release(&n);
    } else {
        if (s->wbuf_cap < LWS_PRE + bytes) {
            free(s->wbuf);
            s->wbuf_cap = LWS_PRE + bytes;
            s->wbuf = xmalloc(s->wbuf_cap);
        }
        unsigned char *p = s->wbuf + LWS_PRE;
        size_t taken = 0; /* unqueue for the batch: the shared counters once */
        for (size_t i = 0; i < k; i++) {
            struct oslot n = ring_pop(x);
            taken += slot_bytes(&n);
            if (n.ev || n.m) {
                const unsigned char *d = n.ev ? n.ev->m->shared->data : n.m->data;
                size_t dl = n.ev ? n.ev->m->shared->len : n.m->len;
                len += frame_header(p + len, dl);
                memcpy(p + len, d, dl);
                len += dl;
            } else { /* the conflation notice, formatted now (slot_bytes: 256 at most) */
                unsigned char nb[256];
                size_t dl = notice_text(x, nb, sizeof(nb));
                len += frame_header(p + len, dl);
                memcpy(p + len, nb, dl);
                len += dl;
            }
            slot_release(&n);
        }
        x->out_bytes -= taken;
        sub(&s->st.queued, k);
        sub(&s->st.queued_bytes, taken);
        w = lws_write(x->wsi, p, len, LWS_WRITE_RAW);
    }
    ring_drained(x);
    if (w < (int)len)
        return -1;
    /* what the socket did not take, lws keeps (this one write: the next callback comes
     * once it is flushed); it counts against the byte limit until flushed */
    x->held = lws_partial_buffered(x->wsi) ? len : 0;
    x->progress_ms = mono_ms();
    add(&s->st.frames_out, k);
    count(&s->st.frame_writes);
    return 0;
}

int ws_outbox_write(struct ws_server *s, struct session *x)
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
        if (lws_partial_buffered(x->wsi)) {
            lws_callback_on_writable(x->wsi);
            return 0;
        }
    }
    /* One send per callback: the frames that fit (batch_count), then, with more queued, the
     * next callback (no lws_send_pipe_choked: that is a poll() per call). */
    if (x->out_count > 0) {
        size_t bytes, k = batch_count(x, &bytes);
        if (write_batch(s, x, k, bytes) != 0)
            return -1;
        if (x->out_count > 0) {
            lws_callback_on_writable(x->wsi);
            return 0;
        }
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
