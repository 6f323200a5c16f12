/* sim_ws.c - see sim_ws.h. runs on: the simulator's lws thread.
 *
 * Subscriptions: a topic per subscribed request id (in a map), each with the list of its
 * subscriptions; every connection keeps the list of its own. A sub sits on both lists, so
 * unsubscribe and close are O(own subscriptions). Topics without subscribers are freed. */
#include "relay/sim/sim_ws.h"
#include "relay/sim/sim.h"
#include "relay/sim/sim_json.h"
#include "relay/sim/sim_map.h"
#include "relay/sim/sim_model.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define RX_MAX (64 * 1024)   /* largest client message we accept */
#define WRITE_BATCH 1024     /* frames per WRITEABLE callback at most (fairness) */
#define HOLD_MS 1000         /* reorder fault: longest an event is held back */

struct topic;
struct conn;

struct sub {
    struct topic *t;
    struct conn *c;
    struct sub *t_next, *t_prev, *c_next, *c_prev;
};

struct topic {
    char *id;
    struct sub *subs;
    size_t n;
    struct sim_frame *held; /* reorder fault */
    int64_t held_at;
    struct topic *h_next, *h_prev; /* on the held list while held != NULL */
};

struct conn { /* the lws per-session data, zeroed by lws */
    struct lws *wsi;
    struct sim *sim;
    int live;
    uint64_t serial;
    char sock_id[12];
    struct sim_frame **q; /* ring */
    size_t qhead, qlen, qcap;
    struct sub *subs;
    size_t nsubs;
    char *rx;
    size_t rxlen;
    int rx_overflow;
    int closing;
    int close_code;
    lws_sorted_usec_list_t sul; /* delayed frame due */
    struct conn *next, *prev;
};

struct sim_ws {
    struct sim *sim;
    struct sim_map *topics;
    struct conn *conns;
    size_t nconns, nsubs;
    uint64_t serial;
    struct topic *held; /* topics holding a frame (reorder fault) */
    lws_sorted_usec_list_t hold_sul;
    int hold_armed;
    unsigned malformed_next; /* sim_ws_send_malformed: the kind it starts with next (cycles) */
};

/* ---- frames ----------------------------------------------------------------------------- */

struct sim_frame *sim_frame_new(struct sbuf *b, int binary, enum sim_frame_kind kind)
{
    struct sim_frame *f = xcalloc(1, sizeof(*f));
    f->refs = 1;
    f->binary = binary;
    f->kind = kind;
    f->len = sbuf_textlen(b);
    f->buf = (unsigned char *)sbuf_take(b);
    return f;
}

/* Drop one reference; NULL-safe. */
static void sim_frame_unref(struct sim_frame *f)
{
    if (f == NULL || --f->refs > 0)
        return;
    free(f->buf);
    free(f);
}

static struct sim_frame *text_frame(const char *text, enum sim_frame_kind kind, int binary)
{
    struct sbuf b;
    sbuf_init(&b, LWS_PRE);
    sbuf_adds(&b, text);
    return sim_frame_new(&b, binary, kind);
}

/* ---- setup ------------------------------------------------------------------------------ */

struct sim_ws *sim_ws_new(struct sim *s)
{
    struct sim_ws *ws = xcalloc(1, sizeof(*ws));
    ws->sim = s;
    ws->topics = sim_map_new();
    return ws;
}

void sim_ws_stop(struct sim_ws *ws)
{
    if (ws != NULL && ws->hold_armed) {
        lws_sul_cancel(&ws->hold_sul);
        ws->hold_armed = 0;
    }
}

static void topic_free(struct topic *t)
{
    sim_frame_unref(t->held);
    free(t->id);
    free(t);
}

static void free_topic_cb(void *arg, const char *key, void *val)
{
    struct topic *t = val;
    for (struct sub *s = t->subs, *n; s != NULL; s = n) {
        n = s->t_next;
        free(s);
    }
    topic_free(t);
}

void sim_ws_free(struct sim_ws *ws)
{
    if (ws == NULL)
        return;
    /* Normally empty: every connection was closed by lws_context_destroy. */
    sim_map_each(ws->topics, free_topic_cb, NULL);
    sim_map_free(ws->topics);
    free(ws);
}

size_t sim_ws_session_size(void)
{
    return sizeof(struct conn);
}

size_t sim_ws_connections(const struct sim_ws *ws)
{
    return ws->nconns;
}

size_t sim_ws_subscriptions(const struct sim_ws *ws)
{
    return ws->nsubs;
}

int sim_ws_subscribed(const struct sim_ws *ws, const char *id)
{
    return sim_map_get(ws->topics, id) != NULL;
}

/* ---- queues ----------------------------------------------------------------------------- */

static void conn_close(struct conn *c, int code)
{
    if (c->closing)
        return;
    c->closing = 1;
    c->close_code = code;
    lws_callback_on_writable(c->wsi);
}

/* Queue f (adds a reference). */
static void enqueue(struct conn *c, struct sim_frame *f)
{
    if (c->closing)
        return;
    struct sim *s = c->sim;
    if (s->cfg.ws_max_queue > 0 && (int64_t)c->qlen >= s->cfg.ws_max_queue) {
        s->stats.ws_slow_closed++;
        log_warn("websocket client too slow, closing", "conn=%llu queued=%zu",
                 (unsigned long long)c->serial, c->qlen);
        conn_close(c, LWS_CLOSE_STATUS_POLICY_VIOLATION);
        return;
    }
    if (c->qlen == c->qcap) {
        size_t ncap = c->qcap ? c->qcap * 2 : 16;
        struct sim_frame **nq = xmalloc(ncap * sizeof(*nq));
        for (size_t i = 0; i < c->qlen; i++)
            nq[i] = c->q[(c->qhead + i) % c->qcap];
        free(c->q);
        c->q = nq;
        c->qcap = ncap;
        c->qhead = 0;
    }
    c->q[(c->qhead + c->qlen) % c->qcap] = f;
    c->qlen++;
    f->refs++;
    if (c->qlen == 1)
        lws_callback_on_writable(c->wsi);
}

static void queue_clear(struct conn *c)
{
    for (size_t i = 0; i < c->qlen; i++)
        sim_frame_unref(c->q[(c->qhead + i) % c->qcap]);
    free(c->q);
    c->q = NULL;
    c->qlen = c->qcap = c->qhead = 0;
}

static void on_due(lws_sorted_usec_list_t *sul)
{
    struct conn *c = lws_container_of(sul, struct conn, sul);
    lws_callback_on_writable(c->wsi);
}

/* Write queued frames while the socket takes them. Returns -1 to close. */
static int conn_write(struct conn *c)
{
    struct sim *s = c->sim;
    if (c->closing) {
        static const char reason[] = "service restart";
        if (c->close_code > 0)
            lws_close_reason(c->wsi, (enum lws_close_status)c->close_code,
                             (unsigned char *)reason, sizeof(reason) - 1);
        return -1;
    }
    int64_t now = mono_ms();
    for (int n = 0; c->qlen > 0; n++) {
        struct sim_frame *f = c->q[c->qhead];
        if (f->due_ms > now) {
            lws_sul_schedule(lws_get_context(c->wsi), 0, &c->sul, on_due,
                             (f->due_ms - now) * LWS_US_PER_MS);
            return 0;
        }
        if (n == WRITE_BATCH) {
            lws_callback_on_writable(c->wsi);
            return 0;
        }
        int w = lws_write(c->wsi, f->buf + LWS_PRE, f->len,
                          f->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT);
        if (w < (int)f->len)
            return -1;
        /* the kernel took less than the frame: lws keeps the rest and sends it first when
         * the socket is writable again (no poll() per frame, as lws_send_pipe_choked does) */
        int choked = lws_partial_buffered(c->wsi);
        s->stats.ws_frames++;
        s->stats.ws_bytes += f->len;
        if (f->kind == SIM_FRAME_EVENT)
            s->stats.ws_event_frames++;
        else if (f->kind == SIM_FRAME_ACK)
            s->stats.ws_acks++;
        else if (f->kind == SIM_FRAME_MALFORMED)
            s->stats.ws_malformed++;
        c->qhead = (c->qhead + 1) % c->qcap;
        c->qlen--;
        sim_frame_unref(f);
        if (choked && c->qlen > 0) {
            lws_callback_on_writable(c->wsi);
            return 0;
        }
    }
    return 0;
}

/* ---- subscriptions ---------------------------------------------------------------------- */

static struct sub *find_sub(struct conn *c, struct topic *t)
{
    if (t == NULL)
        return NULL;
    /* Walk the shorter list. */
    if (t->n <= c->nsubs) {
        for (struct sub *s = t->subs; s; s = s->t_next)
            if (s->c == c)
                return s;
    } else {
        for (struct sub *s = c->subs; s; s = s->c_next)
            if (s->t == t)
                return s;
    }
    return NULL;
}

static void held_unlink(struct sim_ws *ws, struct topic *t)
{
    if (t->held == NULL)
        return;
    if (t->h_prev)
        t->h_prev->h_next = t->h_next;
    else
        ws->held = t->h_next;
    if (t->h_next)
        t->h_next->h_prev = t->h_prev;
    t->h_next = t->h_prev = NULL;
}

static void subscribe(struct sim_ws *ws, struct conn *c, const char *id)
{
    struct topic *t = sim_map_get(ws->topics, id);
    if (find_sub(c, t) != NULL)
        return;
    if (t == NULL) {
        t = xcalloc(1, sizeof(*t));
        t->id = xstrdup(id);
        sim_map_put(ws->topics, t->id, t);
    }
    struct sub *s = xcalloc(1, sizeof(*s));
    s->t = t;
    s->c = c;
    s->t_next = t->subs;
    if (t->subs)
        t->subs->t_prev = s;
    t->subs = s;
    t->n++;
    s->c_next = c->subs;
    if (c->subs)
        c->subs->c_prev = s;
    c->subs = s;
    c->nsubs++;
    ws->nsubs++;
}

static void sub_remove(struct sim_ws *ws, struct sub *s)
{
    struct topic *t = s->t;
    struct conn *c = s->c;
    if (s->t_prev)
        s->t_prev->t_next = s->t_next;
    else
        t->subs = s->t_next;
    if (s->t_next)
        s->t_next->t_prev = s->t_prev;
    if (s->c_prev)
        s->c_prev->c_next = s->c_next;
    else
        c->subs = s->c_next;
    if (s->c_next)
        s->c_next->c_prev = s->c_prev;
    t->n--;
    c->nsubs--;
    ws->nsubs--;
    free(s);
    if (t->n == 0) {
        held_unlink(ws, t);
        sim_map_del(ws->topics, t->id);
        topic_free(t);
    }
}

static void deliver(struct sim_ws *ws, struct topic *t, struct sim_frame *f)
{
    int copies = ws->sim->faults.duplicate ? 2 : 1;
    for (struct sub *s = t->subs; s; s = s->t_next)
        for (int i = 0; i < copies; i++)
            enqueue(s->c, f);
}

static void on_hold_timer(lws_sorted_usec_list_t *sul)
{
    struct sim_ws *ws = lws_container_of(sul, struct sim_ws, hold_sul);
    ws->hold_armed = 0;
    int64_t now = mono_ms();
    for (struct topic *t = ws->held, *n; t != NULL; t = n) {
        n = t->h_next;
        if (t->held_at + HOLD_MS <= now) {
            struct sim_frame *f = t->held;
            held_unlink(ws, t);
            t->held = NULL;
            deliver(ws, t, f);
            sim_frame_unref(f);
        }
    }
    if (ws->held != NULL) {
        lws_sul_schedule(ws->sim->ctx, 0, &ws->hold_sul, on_hold_timer, 250 * LWS_US_PER_MS);
        ws->hold_armed = 1;
    }
}

void sim_ws_publish(struct sim_ws *ws, const char *id, struct sim_frame *f)
{
    struct topic *t = sim_map_get(ws->topics, id);
    if (t == NULL) {
        sim_frame_unref(f);
        return;
    }
    if (t->held != NULL) { /* reorder: the newer event goes first, then the held one */
        struct sim_frame *old = t->held;
        held_unlink(ws, t);
        t->held = NULL;
        deliver(ws, t, f);
        deliver(ws, t, old);
        sim_frame_unref(old);
        sim_frame_unref(f);
        return;
    }
    if (ws->sim->faults.reorder) {
        t->held = f;
        t->held_at = mono_ms();
        t->h_prev = NULL;
        t->h_next = ws->held;
        if (ws->held)
            ws->held->h_prev = t;
        ws->held = t;
        if (!ws->hold_armed) {
            lws_sul_schedule(ws->sim->ctx, 0, &ws->hold_sul, on_hold_timer, 250 * LWS_US_PER_MS);
            ws->hold_armed = 1;
        }
        return;
    }
    deliver(ws, t, f);
    sim_frame_unref(f);
}

/* ---- faults ------------------------------------------------------------------------------ */

int sim_ws_drop_all(struct sim_ws *ws, int close_code)
{
    int n = 0;
    for (struct conn *c = ws->conns; c != NULL; c = c->next) {
        if (c->closing)
            continue;
        n++;
        if (close_code == 0) {
            /* No close frame: the peer sees the TCP connection end (1006 on its side). lws
             * notices the hang-up on its next poll and closes the session. */
            c->closing = 1;
            c->close_code = 0;
            shutdown(lws_get_socket_fd(c->wsi), SHUT_RDWR);
            ws->sim->stats.ws_dropped_abrupt++;
        } else {
            conn_close(c, close_code);
            ws->sim->stats.ws_dropped_close++;
        }
    }
    return n;
}

int sim_ws_send_malformed(struct sim_ws *ws, int n)
{
    static const char *const texts[] = {
        "{\"event\":\"request.status.updated\",\"data\":{\"status\":\"pending\",\"requestId\":",
        "not json at all",
        "{\"event\":\"request.status.updated\",\"data\":{\"status\":42,\"updatedAt\":\"yesterday\","
        "\"originChainId\":\"one\",\"requestId\":null},\"publishedAt\":\"x\"}",
        "{\"event\":\"request.status.updated\",\"data\":null,\"publishedAt\":1}",
        "[]",
        "{\"event\":\"request.status.updated\",\"data\":{\"status\":\"success\",\"requestId\":"
        "\"0x00\",\"inTxHashes\":\"0xnot-a-list\",\"updatedAt\":-5}}",
        "{\"type\":\"subscribe\",\"status\":\"success\"}",
        "\xff\xfe{binary garbage}\x00\x01",
        "{\"data\":{\"event\":\"request.status.updated\",\"data\":{\"status\":[\"pending\"]}}}",
        "{\"event\":\"request.status.updated\",\"data\":{\"status\":\"pending\",\"requestId\":"
        "\"0x1\",\"updatedAt\":1e999,\"originChainId\":1,\"destinationChainId\":8453}}",
    };
    int conns = 0;
    struct sim_frame *frames[ARRAY_LEN(texts)] = {0};
    for (struct conn *c = ws->conns; c != NULL; c = c->next) {
        if (c->closing)
            continue;
        conns++;
        for (int i = 0; i < n; i++) {
            size_t k = (ws->malformed_next + (unsigned)i) % ARRAY_LEN(texts);
            if (frames[k] == NULL) {
                if (k == 7) { /* binary frame with bytes that are not UTF-8 */
                    struct sbuf b;
                    sbuf_init(&b, LWS_PRE);
                    sbuf_add(&b, texts[k], 20);
                    frames[k] = sim_frame_new(&b, 1, SIM_FRAME_MALFORMED);
                } else {
                    frames[k] = text_frame(texts[k], SIM_FRAME_MALFORMED, 0);
                }
            }
            enqueue(c, frames[k]);
        }
    }
    ws->malformed_next += (unsigned)n;
    for (size_t k = 0; k < ARRAY_LEN(texts); k++)
        sim_frame_unref(frames[k]);
    return conns;
}

/* ---- messages ----------------------------------------------------------------------------- */

static void reply(struct conn *c, struct sbuf *b, enum sim_frame_kind kind)
{
    struct sim_frame *f = sim_frame_new(b, 0, kind);
    enqueue(c, f);
    sim_frame_unref(f);
}

static void on_message(struct sim_ws *ws, struct conn *c, const char *text, size_t len)
{
    struct sim *s = ws->sim;
    struct sbuf b;
    json_error_t jerr;
    json_t *msg = json_loadb(text, len, 0, &jerr);
    const char *type = msg ? json_string_value(json_object_get(msg, "type")) : NULL;
    const char *event = msg ? json_string_value(json_object_get(msg, "event")) : NULL;
    json_t *filters = msg ? json_object_get(msg, "filters") : NULL;
    const char *id = json_string_value(json_object_get(filters, "id"));
    const char *why = NULL;
    int sub = type && strcmp(type, "subscribe") == 0;
    int unsub = type && strcmp(type, "unsubscribe") == 0;

    if (!sub && !unsub)
        why = msg ? "unknown message type" : "message is not JSON";
    else if (event == NULL || strcmp(event, "request.status.updated") != 0)
        why = "unsupported event";
    else if (sub && (id == NULL || *id == '\0' || strlen(id) >= SIM_ID_MAX))
        why = "filters.id is required";
    if (why != NULL) {
        s->stats.ws_bad_messages++;
        log_debug("websocket message refused", "conn=%llu why=\"%s\"",
                  (unsigned long long)c->serial, why);
        sbuf_init(&b, LWS_PRE);
        sj_ws_error(&b, sub || unsub ? type : "error", why);
        reply(c, &b, SIM_FRAME_ACK);
        json_decref(msg);
        return;
    }
    sbuf_init(&b, LWS_PRE);
    if (sub) {
        s->stats.ws_subscribes++;
        sim_model_count_call(s->model, id, SIM_COUNT_SUBSCRIBE);
        subscribe(ws, c, id);
        sj_subscribe_ack(&b, id);
    } else {
        s->stats.ws_unsubscribes++;
        if (id != NULL) {
            struct sub *x = find_sub(c, sim_map_get(ws->topics, id));
            if (x != NULL)
                sub_remove(ws, x);
        } else { /* no filters: drop every subscription of this connection */
            while (c->subs != NULL)
                sub_remove(ws, c->subs);
        }
        sj_unsubscribe_ack(&b);
    }
    reply(c, &b, SIM_FRAME_ACK);
    json_decref(msg);
}

/* ---- upgrade filter ------------------------------------------------------------------------ */

/* Answer an upgrade we refuse with an HTTP status and the upstream error body. */
static void refuse_upgrade(struct lws *wsi, unsigned code, const char *message, const char *ecode)
{
    struct sbuf body;
    sbuf_init(&body, 0);
    sj_error(&body, message, ecode);
    unsigned char hdr[LWS_PRE + 512], *start = hdr + LWS_PRE, *p = start,
                                      *end = hdr + sizeof(hdr) - 1;
    if (lws_add_http_common_headers(wsi, code, "application/json", sbuf_textlen(&body), &p,
                                    end) == 0 &&
        lws_finalize_write_http_header(wsi, start, &p, end) == 0)
        lws_write(wsi, (unsigned char *)sbuf_text(&body), sbuf_textlen(&body), LWS_WRITE_HTTP);
    sbuf_free(&body);
}

static int filter_upgrade(struct sim *s, struct lws *wsi)
{
    if (s->faults.ws_refuse) {
        s->stats.ws_rejected++;
        refuse_upgrade(wsi, 503, "Service temporarily unavailable", "SERVICE_UNAVAILABLE");
        return -1;
    }
    if (s->cfg.api_key != NULL) {
        char buf[512];
        const char *key = lws_get_urlarg_by_name(wsi, "apiKey=", buf, sizeof(buf));
        if (key == NULL || strcmp(key, s->cfg.api_key) != 0) {
            s->stats.ws_rejected++;
            log_info("websocket upgrade refused", "why=\"%s\"",
                     key == NULL ? "no apiKey" : "wrong apiKey");
            refuse_upgrade(wsi, 401, key == NULL ? "Missing API key" : "Invalid API key",
                           "UNAUTHORIZED");
            return -1;
        }
    }
    return 0;
}

/* ---- lws callback --------------------------------------------------------------------------- */

int sim_ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct sim *s = lws_context_user(lws_get_context(wsi));
    struct conn *c = user;
    struct sim_ws *ws = s ? s->ws : NULL;

    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        return filter_upgrade(s, wsi);

    case LWS_CALLBACK_ESTABLISHED: {
        c->wsi = wsi;
        c->sim = s;
        c->live = 1;
        c->serial = ++ws->serial;
        sim_model_socket_id(s->model, c->sock_id);
        c->next = ws->conns;
        if (ws->conns)
            ws->conns->prev = c;
        ws->conns = c;
        ws->nconns++;
        s->stats.ws_connections++;
        log_debug("websocket client connected", "conn=%llu socket=%s",
                  (unsigned long long)c->serial, c->sock_id);
        struct sbuf b;
        sbuf_init(&b, LWS_PRE);
        sj_ready(&b, c->sock_id);
        reply(c, &b, SIM_FRAME_READY);
        return 0;
    }

    case LWS_CALLBACK_RECEIVE:
        if (!c->live || c->closing)
            return 0;
        if (lws_is_first_fragment(wsi)) {
            c->rxlen = 0;
            c->rx_overflow = 0;
        }
        if (c->rxlen + len > RX_MAX) {
            c->rx_overflow = 1;
        } else if (!c->rx_overflow) {
            if (c->rx == NULL)
                c->rx = xmalloc(RX_MAX);
            memcpy(c->rx + c->rxlen, in, len);
            c->rxlen += len;
        }
        if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi) > 0)
            return 0;
        if (c->rx_overflow) {
            s->stats.ws_bad_messages++;
            return 0;
        }
        on_message(ws, c, c->rx, c->rxlen);
        return 0;

    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (!c->live)
            return 0;
        return conn_write(c);

    case LWS_CALLBACK_CLOSED:
        if (!c->live)
            return 0;
        c->live = 0;
        lws_sul_cancel(&c->sul);
        while (c->subs != NULL)
            sub_remove(ws, c->subs);
        queue_clear(c);
        free(c->rx);
        c->rx = NULL;
        if (c->prev)
            c->prev->next = c->next;
        else
            ws->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        ws->nconns--;
        log_debug("websocket client gone", "conn=%llu", (unsigned long long)c->serial);
        return 0;

    default:
        return 0;
    }
}
