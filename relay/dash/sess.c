/* sess.c - dashboard sessions and their subscriptions: the session table, opening and closing
 * sessions (XMSG_DASH_OPEN / DASH_GONE), and the client messages (subscribe, unsubscribe,
 * history; read and validated by protocol/dash_msg.c), the stream token and who may
 * subscribe to what, message rates and subscription limits. Replies go out as frames (hub.c); snapshots and history
 * answers are history.c's, resume and going live follow.c's. State: internal.h.
 * A refused subscribe closes the connection after its error frame (HUB_CLOSE_REFUSED*):
 * upstream clients read any "subscribe" frame as an ack and only a close makes them poll;
 * every other bad message gets its error frame on an open connection.
 * A subscription to one id without the stream token is anonymous: it holds an anonymous
 * watch (relay/ingest/anon.h) instead of tracking the id, and one to an id nobody watches
 * takes one of its address's STATUSRELAY_WS_ANON_IDS_PER_ADDRESS (refused: too_many_ids).
 * runs on: core thread. */
#include "relay/dash/internal.h"
#include "protocol/dash_msg.h"
#include "protocol/proto.h"
#include "relay/common/idmap.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/edge/ws_server.h"
#include "relay/ingest/anon.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- sessions -------------------------------------------------------------------------- */

static size_t slot(const struct hub *h, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 32) & (h->tab_size - 1);
}

struct hsess *dash_sess_find(const struct hub *h, uint64_t id)
{
    for (struct hsess *x = h->tab[slot(h, id)]; x != NULL; x = x->hnext)
        if (x->id == id)
            return x;
    return NULL;
}

static void sess_insert(struct hub *h, struct hsess *x)
{
    if (h->count + 1 > h->tab_size) {
        size_t old_size = h->tab_size;
        struct hsess **old = h->tab;
        h->tab_size *= 2;
        h->tab = xcalloc(h->tab_size, sizeof(*h->tab));
        for (size_t i = 0; i < old_size; i++)
            for (struct hsess *y = old[i], *next; y != NULL; y = next) {
                next = y->hnext;
                size_t k = slot(h, y->id);
                y->hnext = h->tab[k];
                h->tab[k] = y;
            }
        free(old);
    }
    size_t k = slot(h, x->id);
    x->hnext = h->tab[k];
    h->tab[k] = x;
    h->count++;
}

static void sess_unlink(struct hub *h, struct hsess *x)
{
    for (struct hsess **pp = &h->tab[slot(h, x->id)]; *pp != NULL; pp = &(*pp)->hnext)
        if (*pp == x) {
            *pp = x->hnext;
            h->count--;
            return;
        }
}

struct hsub *dash_sub_find(const struct hsess *x, uint32_t no)
{
    for (struct hsub *u = x->subs; u != NULL; u = u->next)
        if (u->no == no)
            return u;
    return NULL;
}

static void close_sess(struct hub *h, struct hsess *x, int code, const char *reason)
{
    x->closing = 1;
    struct xmsg *m = xmsg_new(XMSG_DASH_CLOSE, x->id, reason, strlen(reason));
    m->code = code;
    xq_push(h->c->to_ws, m);
}

/* Client-caused problems cost a token; an empty bucket closes the session (flood). */
static int bad_message(struct hub *h, struct hsess *x)
{
    x->bad_tokens -= 1;
    if (x->bad_tokens < 0) {
        log_info("dashboard session sent too many bad messages: closed", "session=%llu",
                 (unsigned long long)x->id);
        close_sess(h, x, WS_SERVER_CLOSE_POLICY, "too many bad messages");
        return -1;
    }
    return 0;
}

static int refused_close_code(const char *code)
{
    if (strcmp(code, "unauthorized") == 0)
        return HUB_CLOSE_REFUSED_AUTH;
    if (strcmp(code, "too_many_subscriptions") == 0 || strcmp(code, "too_many_ids") == 0)
        return HUB_CLOSE_REFUSED_LIMIT;
    if (strcmp(code, "unavailable") == 0)
        return HUB_CLOSE_REFUSED_UNAVAILABLE;
    return HUB_CLOSE_REFUSED;
}

/* A refused subscribe: {"type":"error","status":"error","request":"subscribe","error":
 * {"code","message"}}, then the close (after the frame: one FIFO to the ws thread). Not a
 * bad message: the close is the answer, not a flood verdict. */
static void refuse_subscribe(struct hub *h, struct hsess *x, const char *code,
                             const char *message)
{
    int close_code = refused_close_code(code);
    dash_send_json(h, x->id, NULL,
                   json_pack("{s:s,s:s,s:s,s:{s:s,s:s}}", "type", "error", "status", "error",
                             "request", "subscribe", "error", "code", code, "message",
                             message));
    log_info("dashboard subscription refused: closed", "session=%llu code=%s close=%d",
             (unsigned long long)x->id, code, close_code);
    char reason[64];
    snprintf(reason, sizeof(reason), "subscription refused: %s", code);
    close_sess(h, x, close_code, reason);
}

/* The error frame: {"type","status":"error","error":{"code","message"},"data"?}. Takes
 * data. Counts as a bad message (may close the session). For type "subscribe" it is a
 * refusal instead (refuse_subscribe: data is dropped, the connection closes). */
static void send_error(struct hub *h, struct hsess *x, const char *type, const char *code,
                       const char *message, json_t *data)
{
    if (type != NULL && strcmp(type, "subscribe") == 0) {
        json_decref(data);
        refuse_subscribe(h, x, code, message);
        return;
    }
    json_t *j = json_pack("{s:s,s:s,s:{s:s,s:s}}", "type", type ? type : "error", "status",
                          "error", "error", "code", code, "message", message);
    if (data != NULL)
        json_object_set_new(j, "data", data);
    dash_send_json(h, x->id, NULL, j);
    bad_message(h, x);
}

/* ---- subscriptions ---------------------------------------------------------------------- */

static void sess_key(char *buf, size_t n, uint64_t sess, const char *id)
{
    snprintf(buf, n, "%llu|%s", (unsigned long long)sess, id);
}

void dash_sub_remove(struct hub *h, struct hsess *x, struct hsub *u, int notify)
{
    for (struct hsub **pp = &x->subs; *pp != NULL; pp = &(*pp)->next)
        if (*pp == u) {
            *pp = u->next;
            break;
        }
    if (u->kind == SUB_ID) {
        char k[PROTO_MAX_ID + 32];
        sess_key(k, sizeof(k), x->id, u->id);
        idmap_del(h->sess_ids, k);
        x->nsubs--;
        if (u->anon)
            anon_release(h->c->anon, u->id);
        if (u->counted)
            anon_addr_put(h->c->anon, x->addr);
    } else if (u->kind == SUB_BROAD) {
        x->nsubs--;
    } else {
        x->stats--;
        h->nstats--;
    }
    if (u->state == SS_WAIT)
        dash_waiter_del(h, x->id, u->no);
    if (u->state == SS_LIVE) {
        if (u->kind == SUB_ID) {
            uint32_t n = 0;
            idmap_get(h->live_ids, u->id, &n);
            if (n <= 1)
                idmap_del(h->live_ids, u->id);
            else
                idmap_put(h->live_ids, u->id, n - 1);
            if (notify)
                dash_filter_op(h, x->id, DASH_OP_DEL_ID, u->id, 0, NULL);
        } else if (u->kind == SUB_BROAD) {
            h->broad_live--;
            if (notify)
                dash_filter_op(h, x->id, DASH_OP_DEL_BROAD, NULL, u->no, NULL);
        }
    }
    free(u->id);
    free(u->from);
    free(u->cursor);
    free(u->live_at);
    dash_broad_cleanup(&u->f);
    free(u);
}

static struct hsub *sub_new(struct hsess *x, enum sub_kind kind)
{
    struct hsub *u = xcalloc(1, sizeof(*u));
    u->no = ++x->next_no;
    u->kind = kind;
    u->state = SS_REPLAY;
    u->next = x->subs;
    x->subs = u;
    if (kind != SUB_STATS)
        x->nsubs++;
    return u;
}

/* ---- client messages ------------------------------------------------------------------------ */

static int token_ok(const struct hub *h, const char *tok)
{
    const char *want = h->c->cfg->stream_token;
    if (want == NULL || want[0] == '\0' || tok == NULL)
        return 0;
    size_t n = strlen(want);
    return strlen(tok) == n && CRYPTO_memcmp(tok, want, n) == 0;
}

/* Broad subscriptions and stats: a valid token, or no token configured, a loopback listener
 * and a page of the same origin. */
static int broad_allowed(const struct hub *h, const struct hsess *x)
{
    const char *want = h->c->cfg->stream_token;
    if (x->authed)
        return 1;
    return (want == NULL || want[0] == '\0') && h->loopback_listen && !x->cross_origin;
}

static int id_allowed(const struct hub *h, const struct hsess *x)
{
    return x->authed || h->c->cfg->ws_anonymous || broad_allowed(h, x);
}

/* A fault of the parsed message (protocol/dash_msg.h) as its error frame. */
static void send_fault(struct hub *h, struct hsess *x, const struct dash_msg *m)
{
    send_error(h, x, m->fault.type, m->fault.code, m->fault.message, NULL);
}

static void ack_subscribe(struct hub *h, struct hsess *x, const struct hsub *u)
{
    dash_send_json(h, x->id, NULL, json_pack("{s:s,s:s,s:o}", "type", "subscribe", "status",
                                             "success", "data", dash_sub_data(u)));
}

/* m: a subscribe read by dash_msg_parse, its fault (if any) reported here at its stage. */
static void on_subscribe(struct hub *h, struct hsess *x, struct dash_msg *m, int err)
{
    const char *type = "subscribe";
    if (err && m->fault.stage == DASH_STAGE_EARLY) {
        send_fault(h, x, m);
        return;
    }
    const char *want = h->c->cfg->stream_token;
    if (m->token_present && want != NULL && want[0] != '\0') { /* no token configured: ignored */
        if (m->token == NULL || !token_ok(h, m->token)) {
            send_error(h, x, type, "unauthorized", "the stream token is not valid", NULL);
            return;
        }
        x->authed = 1;
    }
    if (!err && m->event == DASH_EVENT_STATS) {
        if (!broad_allowed(h, x)) {
            send_error(h, x, type, "unauthorized",
                       "stats need the stream token (\"token\" or ?token=)", NULL);
            return;
        }
        if (x->stats == 0) {
            struct hsub *u = sub_new(x, SUB_STATS);
            u->state = SS_LIVE;
            x->stats++;
            h->nstats++;
        }
        dash_send_json(h, x->id, NULL,
                       json_pack("{s:s,s:s,s:{s:s}}", "type", "subscribe", "status", "success",
                                 "data", "event", STATS_EVENT));
        dash_stats_frame_to(h, x->id);
        return;
    }
    if (err && m->fault.stage == DASH_STAGE_FIELDS) {
        send_fault(h, x, m);
        return;
    }
    const char *from = m->from;
    int limit = m->limit;
    if (from != NULL && (!store_ready(h->c->store) || h->cursor[0] == '\0')) {
        send_error(h, x, type, "unavailable",
                   "resume needs the event stream, which is unavailable now: retry", NULL);
        return;
    }

    if (err) { /* DASH_STAGE_TARGET: the id or the broad filter */
        send_fault(h, x, m);
        return;
    }
    const char *id = NULL;
    struct proto_filter bf = m->filter; /* taken from m */
    memset(&m->filter, 0, sizeof(m->filter));
    if (m->target == DASH_TARGET_ID) {
        id = m->id;
        if (!id_allowed(h, x)) {
            send_error(h, x, type, "unauthorized",
                       "anonymous subscriptions are disabled: send the stream token", NULL);
            return;
        }
        char k[PROTO_MAX_ID + 32];
        uint32_t no = 0;
        sess_key(k, sizeof(k), x->id, id);
        if (idmap_get(h->sess_ids, k, &no)) { /* already subscribed: ack and state again */
            struct hsub *u = dash_sub_find(x, no);
            ack_subscribe(h, x, u);
            if (u->state == SS_LIVE)
                dash_snapshot_one(h, x, u, id, 0);
            return;
        }
    } else {
        if (!broad_allowed(h, x)) {
            dash_broad_cleanup(&bf);
            send_error(h, x, type, "unauthorized",
                       "subscriptions broader than one request id need the stream token "
                       "(\"token\" or ?token=)",
                       NULL);
            return;
        }
        for (struct hsub *u = x->subs; u != NULL; u = u->next)
            if (u->kind == SUB_BROAD && dash_broad_equal(&u->f, &bf)) {
                dash_broad_cleanup(&bf);
                ack_subscribe(h, x, u); /* the same filter again: nothing changes */
                return;
            }
    }
    if (x->nsubs >= (size_t)h->c->cfg->ws_max_subscriptions) {
        dash_broad_cleanup(&bf);
        char why[96];
        snprintf(why, sizeof(why), "at most %lld subscriptions per connection",
                 (long long)h->c->cfg->ws_max_subscriptions);
        send_error(h, x, type, "too_many_subscriptions", why, NULL);
        return;
    }
    int anon = id != NULL && !x->authed, counted = 0;
    if (anon && !anon_watched(h->c->anon, id)) {
        if (anon_addr_take(h->c->anon, x->addr) != 0) {
            char why[160];
            snprintf(why, sizeof(why),
                     "at most %lld request ids nobody else watches per client address without "
                     "the stream token",
                     (long long)h->c->cfg->ws_anon_ids_per_address);
            send_error(h, x, type, "too_many_ids", why, NULL);
            return;
        }
        counted = 1;
    }
    struct hsub *u = sub_new(x, id ? SUB_ID : SUB_BROAD);
    if (id != NULL) {
        char k[PROTO_MAX_ID + 32];
        u->anon = anon;
        u->counted = counted;
        if (anon)
            anon_hold(h->c->anon, id);
        u->id = xstrdup(id);
        sess_key(k, sizeof(k), x->id, id);
        idmap_put(h->sess_ids, k, u->no);
    } else {
        u->f = bf;
    }
    ack_subscribe(h, x, u);
    if (from != NULL) {
        dash_str_set(&u->from, from);
        if (dash_start_resume(h, x, u) != 0) {
            dash_gap(h, x, u, "unavailable", NULL);
            return;
        }
        if (id != NULL && !anon)
            dash_track_one(h, id); /* idempotent: nobody tracking it yet is the rare case */
        return;
    }
    dash_go_live(h, x, u);
    dash_fresh_snapshot(h, x, u, limit);
}

static void on_unsubscribe(struct hub *h, struct hsess *x, const struct dash_msg *m)
{
    if (m->event == DASH_EVENT_STATS) {
        for (struct hsub *u = x->subs, *next; u != NULL; u = next) {
            next = u->next;
            if (u->kind == SUB_STATS)
                dash_sub_remove(h, x, u, 1);
        }
    } else if (m->target == DASH_TARGET_ID) {
        char k[PROTO_MAX_ID + 32];
        uint32_t no = 0;
        sess_key(k, sizeof(k), x->id, m->id);
        struct hsub *u = idmap_get(h->sess_ids, k, &no) ? dash_sub_find(x, no) : NULL;
        if (u != NULL)
            dash_sub_remove(h, x, u, 1);
    } else if (m->target == DASH_TARGET_ALL) {
        /* no filters: every request.status.updated subscription of the connection */
        for (struct hsub *u = x->subs, *next; u != NULL; u = next) {
            next = u->next;
            if (u->kind != SUB_STATS)
                dash_sub_remove(h, x, u, 1);
        }
    } else {
        for (struct hsub *u = x->subs, *next; u != NULL; u = next) {
            next = u->next;
            if (u->kind == SUB_BROAD && dash_broad_equal(&u->f, &m->filter))
                dash_sub_remove(h, x, u, 1);
        }
    }
    const char *event = m->event == DASH_EVENT_STATS ? STATS_EVENT : EVENT_NAME;
    dash_send_json(h, x->id, NULL, json_pack("{s:s,s:s,s:{s:s}}", "type", "unsubscribe", "status",
                                             "success", "data", "event", event));
}

static void on_history(struct hub *h, struct hsess *x, const struct dash_msg *m)
{
    if (!id_allowed(h, x)) {
        send_error(h, x, "history", "unauthorized",
                   "anonymous requests are disabled: send the stream token", NULL);
        return;
    }
    if (x->hist_inflight >= HUB_HISTORY_INFLIGHT) { /* each holds its frames here meanwhile */
        /* an error frame, not a bad message: asking too early is not malformed */
        dash_send_json(h, x->id, NULL,
                       json_pack("{s:s,s:s,s:{s:s,s:s}}", "type", "history", "status", "error",
                                 "error", "code", "too_many_requests", "message",
                                 "at most 4 history requests at a time: wait for the answers"));
        return;
    }
    dash_history(h, x, m->id, broad_allowed(h, x));
}

/* Refill both token buckets; 0 = the message may be handled. */
static int rate_ok(struct hub *h, struct hsess *x)
{
    int64_t now = mono_ms();
    double dt = (double)(now - x->bucket_ms) / 1000.0;
    x->bucket_ms = now;
    x->msg_tokens += dt * HUB_MSG_RATE;
    if (x->msg_tokens > HUB_MSG_BURST)
        x->msg_tokens = HUB_MSG_BURST;
    x->bad_tokens += dt * 0.5;
    if (x->bad_tokens > HUB_BAD_BURST)
        x->bad_tokens = HUB_BAD_BURST;
    x->msg_tokens -= 1;
    if (x->msg_tokens < 0) {
        log_info("dashboard session over its message rate: closed", "session=%llu",
                 (unsigned long long)x->id);
        close_sess(h, x, WS_SERVER_CLOSE_POLICY, "message rate exceeded");
        return -1;
    }
    return 0;
}

static void on_client_msg(struct hub *h, struct hsess *x, const struct xmsg *m)
{
    if (x->closing || rate_ok(h, x) != 0)
        return;
    struct dash_msg msg; /* read and validated in protocol/dash_msg.c */
    enum dash_msg_error e = dash_msg_parse_parts(m->data, m->len, h->np, &msg);
    if (e == DASH_MSG_ENOMEM) {
        log_err("out of memory", "in=dash_msg_parse");
        abort(); /* relay/ never handles OOM locally (relay/common/util.h) */
    }
    if (msg.type == DASH_MSG_SUBSCRIBE)
        on_subscribe(h, x, &msg, e != DASH_MSG_OK); /* faults at their stage */
    else if (e != DASH_MSG_OK)
        send_fault(h, x, &msg);
    else if (msg.type == DASH_MSG_UNSUBSCRIBE)
        on_unsubscribe(h, x, &msg);
    else
        on_history(h, x, &msg);
    dash_msg_cleanup(&msg);
}

static void on_open(struct hub *h, const struct xmsg *m)
{
    struct hsess *x = xcalloc(1, sizeof(*x));
    x->id = m->session;
    x->cross_origin = m->code == 1;
    x->authed = m->key[0] != '\0' && token_ok(h, m->key);
    x->msg_tokens = HUB_MSG_BURST;
    x->bad_tokens = HUB_BAD_BURST;
    x->bucket_ms = mono_ms();
    anon_addr_key((const char *)m->data, x->addr, sizeof(x->addr));
    sess_insert(h, x);
    char id[32];
    snprintf(id, sizeof(id), "%llu", (unsigned long long)x->id);
    dash_send_json(h, x->id, NULL, json_pack("{s:s,s:s,s:{s:s}}", "type", "connection", "status",
                                             "ready", "data", "id", id));
}

static void on_gone(struct hub *h, uint64_t id)
{
    struct hsess *x = dash_sess_find(h, id);
    if (x == NULL)
        return;
    while (x->subs != NULL)
        dash_sub_remove(h, x, x->subs, 0);
    sess_unlink(h, x);
    free(x);
}

void hub_anon_gone(void *hub, const char *id)
{
    struct hub *h = hub;
    if (h == NULL || h->closing)
        return;
    char k[PROTO_MAX_ID + 32];
    for (size_t i = 0; i < h->tab_size; i++)
        for (struct hsess *x = h->tab[i]; x != NULL; x = x->hnext) {
            uint32_t no = 0;
            sess_key(k, sizeof(k), x->id, id);
            struct hsub *u = idmap_get(h->sess_ids, k, &no) ? dash_sub_find(x, no) : NULL;
            if (u == NULL || !u->anon || x->closing)
                continue;
            dash_send_json(h, x->id, NULL,
                           json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "type", "error", "status",
                                     "error", "error", "code", "not_found", "message",
                                     "the upstream does not know this request id: the "
                                     "subscription ended",
                                     "data", dash_sub_data(u)));
            dash_sub_remove(h, x, u, 1);
        }
}

void hub_on_msg(struct hub *h, const struct xmsg *m)
{
    if (h == NULL || h->closing)
        return;
    struct hsess *x;
    switch (m->type) {
    case XMSG_DASH_OPEN:
        on_open(h, m);
        break;
    case XMSG_DASH_MSG:
        if ((x = dash_sess_find(h, m->session)) != NULL)
            on_client_msg(h, x, m);
        break;
    case XMSG_DASH_GONE:
        on_gone(h, m->session);
        break;
    default:
        break;
    }
}
