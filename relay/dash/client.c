/* client.c - see client.h: the messages of dashboard clients. A refused subscribe closes the
 * connection after its error frame (HUB_CLOSE_REFUSED*): upstream clients read any
 * "subscribe" frame as an ack and only a close makes them poll; every other bad message
 * gets its error frame on an open connection and costs a bad-message token.
 * runs on: core thread. */
#include "relay/dash/client.h"
#include "protocol/dash_msg.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/dash/find.h"
#include "relay/dash/follow.h"
#include "relay/dash/frames.h"
#include "relay/dash/history.h"
#include "relay/dash/limits.h"
#include "relay/dash/stats.h"
#include "relay/dash/subscribe.h"
#include "relay/dash/table.h"
#include "relay/edge/dash_filter.h"
#include "relay/edge/ws_server.h"
#include "relay/ingest/anon.h"
#include "store/store.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- answers ------------------------------------------------------------------------------ */

static void close_sess(struct hub *h, struct hsess *x, int code, const char *reason)
{
    x->closing = 1;
    dash_close(h, x->id, code, reason);
}

/* Client-caused problems cost a token; an empty bucket closes the session (flood). */
static void bad_message(struct hub *h, struct hsess *x)
{
    x->bad_tokens -= 1;
    if (x->bad_tokens < 0) {
        log_info("dashboard session sent too many bad messages: closed", "session=%llu",
                 (unsigned long long)x->id);
        close_sess(h, x, WS_SERVER_CLOSE_POLICY, "too many bad messages");
    }
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

/* The error frame of a bad message (a bad message: may close the session); for type
 * "subscribe" a refusal instead (the connection closes). */
static void send_error(struct hub *h, struct hsess *x, const char *type, const char *code,
                       const char *message)
{
    if (type != NULL && strcmp(type, "subscribe") == 0) {
        refuse_subscribe(h, x, code, message);
        return;
    }
    dash_send_error(h, x->id, type, code, message, NULL);
    bad_message(h, x);
}

/* A fault of the parsed message (protocol/dash_msg.h) as its error frame. */
static void send_fault(struct hub *h, struct hsess *x, const struct dash_msg *m)
{
    send_error(h, x, m->fault.type, m->fault.code, m->fault.message);
}

static void ack_subscribe(struct hub *h, struct hsess *x, const struct hsub *u)
{
    dash_send_json(h, x->id, NULL, json_pack("{s:s,s:s,s:o}", "type", "subscribe", "status",
                                             "success", "data", dash_sub_data(u)));
}

/* ---- subscribe: decide, then apply -------------------------------------------------------- */

static int loopback_page(const struct hub *h, const struct hsess *x)
{
    const char *want = h->c->cfg->stream_token;
    return x->authed || ((want == NULL || want[0] == '\0') && h->loopback_listen &&
                         !x->cross_origin);
}

/* The facts the decision reads (subscribe.h). */
static void sub_facts(struct hub *h, struct hsess *x, const struct dash_msg *m, int err,
                      struct dash_sub_facts *f)
{
    memset(f, 0, sizeof(*f));
    f->stream_token = h->c->cfg->stream_token;
    f->authed = x->authed;
    f->cross_origin = x->cross_origin;
    f->loopback_listen = h->loopback_listen;
    f->ws_anonymous = h->c->cfg->ws_anonymous;
    f->resume_ready = store_ready(h->c->store) && h->cursor[0] != '\0';
    f->has_stats = x->stats > 0;
    f->nsubs = x->nsubs;
    f->max_subs = h->c->cfg->ws_max_subscriptions;
    if (err)
        return;
    if (m->target == DASH_TARGET_ID && m->id != NULL) {
        struct hsub *u = dash_sub_of_id(h, x, m->id);
        f->same_no = u != NULL ? u->no : 0;
        f->same_live = u != NULL && u->state == SS_LIVE;
        f->id_watched = anon_watched(h->c->anon, m->id);
    } else if (m->target == DASH_TARGET_BROAD) {
        for (struct hsub *u = x->subs; u != NULL && f->same_no == 0; u = u->next)
            if (u->kind == SUB_BROAD && dash_broad_equal(&u->f, &m->filter))
                f->same_no = u->no;
    }
}

static void apply_stats(struct hub *h, struct hsess *x, const struct dash_sub_decision *d)
{
    if (d->new_stats)
        dash_sub_new(h, x, SUB_STATS, NULL, 0, 0)->state = SS_LIVE;
    dash_send_json(h, x->id, NULL,
                   json_pack("{s:s,s:s,s:{s:s}}", "type", "subscribe", "status", "success",
                             "data", "event", STATS_EVENT));
    dash_stats_frame_to(h, x->id);
}

static void apply_new(struct hub *h, struct hsess *x, struct dash_msg *m,
                      struct dash_sub_decision *d)
{
    if (d->take_addr_id && anon_addr_take(h->c->anon, x->addr) != 0) {
        dash_subscribe_too_many_ids(h->c->cfg->ws_anon_ids_per_address, d);
        refuse_subscribe(h, x, d->code, d->message);
        return;
    }
    struct hsub *u = dash_sub_new(h, x, d->broad ? SUB_BROAD : SUB_ID, m->id, d->anon,
                                  d->take_addr_id);
    if (d->broad) {
        u->f = m->filter; /* taken from m */
        memset(&m->filter, 0, sizeof(m->filter));
    }
    ack_subscribe(h, x, u);
    if (d->resume) {
        dash_str_set(&u->from, m->from);
        if (!d->broad && !d->anon)
            dash_track_one(h, m->id); /* idempotent: nobody tracking it yet is the rare case */
    }
    /* the snapshot or replay once the follower read what was written before this subscribe */
    dash_hold(h, x, u, m->limit);
}

/* m: a subscribe read by dash_msg_parse, its fault (if any) answered at its stage. */
static void on_subscribe(struct hub *h, struct hsess *x, struct dash_msg *m, int err)
{
    struct dash_sub_facts f;
    struct dash_sub_decision d;
    sub_facts(h, x, m, err, &f);
    dash_subscribe_decide(m, err, &f, &d);
    if (d.authed)
        x->authed = 1;
    switch (d.verdict) {
    case DASH_SUB_FAULT:
        send_fault(h, x, m);
        break;
    case DASH_SUB_REFUSE:
        refuse_subscribe(h, x, d.code, d.message);
        break;
    case DASH_SUB_STATS:
        apply_stats(h, x, &d);
        break;
    case DASH_SUB_AGAIN: {
        struct hsub *u = dash_sub_find(x, f.same_no);
        ack_subscribe(h, x, u);
        if (d.snapshot_again)
            dash_snapshot_one(h, x, u, m->id, 0);
        break;
    }
    case DASH_SUB_NEW:
        apply_new(h, x, m, &d);
        break;
    }
}

/* ---- unsubscribe, history ------------------------------------------------------------------ */

/* Remove the subscriptions of x that kind (SUB_STATS, or -1: every id and broad one) or
 * filter (non-NULL: broad ones equal to it) names. */
static void remove_where(struct hub *h, struct hsess *x, int kind, const struct proto_filter *f)
{
    for (struct hsub *u = x->subs, *next; u != NULL; u = next) {
        next = u->next;
        if (f != NULL ? u->kind == SUB_BROAD && dash_broad_equal(&u->f, f)
                      : kind < 0 ? u->kind != SUB_STATS : (int)u->kind == kind)
            dash_sub_remove(h, x, u, 1);
    }
}

static void on_unsubscribe(struct hub *h, struct hsess *x, const struct dash_msg *m)
{
    if (m->event == DASH_EVENT_STATS) {
        remove_where(h, x, SUB_STATS, NULL);
    } else if (m->target == DASH_TARGET_ID) {
        struct hsub *u = dash_sub_of_id(h, x, m->id);
        if (u != NULL)
            dash_sub_remove(h, x, u, 1);
    } else if (m->target == DASH_TARGET_ALL) {
        /* no filters: every request.status.updated subscription of the connection */
        remove_where(h, x, -1, NULL);
    } else {
        remove_where(h, x, 0, &m->filter);
    }
    const char *event = m->event == DASH_EVENT_STATS ? STATS_EVENT : EVENT_NAME;
    dash_send_json(h, x->id, NULL, json_pack("{s:s,s:s,s:{s:s}}", "type", "unsubscribe", "status",
                                             "success", "data", "event", event));
}

/* The reads of the store a client may ask for (history, find, facts): 1 when x may ask now,
 * else 0 after its error frame. */
static int read_allowed(struct hub *h, struct hsess *x, const char *type)
{
    if (!(x->authed || h->c->cfg->ws_anonymous || loopback_page(h, x))) {
        send_error(h, x, type, "unauthorized",
                   "anonymous requests are disabled: send the stream token");
        return 0;
    }
    if (x->hist_inflight >= HUB_HISTORY_INFLIGHT) { /* each holds its frames here meanwhile */
        /* an error frame, not a bad message: asking too early is not malformed */
        dash_send_error(h, x->id, type, "too_many_requests",
                        "at most 4 history, find or facts requests at a time: wait for the "
                        "answers",
                        NULL);
        return 0;
    }
    return 1;
}

static void on_read(struct hub *h, struct hsess *x, const struct dash_msg *m)
{
    static const char *const types[] = {[DASH_MSG_HISTORY] = "history",
                                        [DASH_MSG_FIND] = "find", [DASH_MSG_FACTS] = "facts"};
    if (!read_allowed(h, x, types[m->type]))
        return;
    if (m->type == DASH_MSG_FIND)
        dash_find(h, x, m->q, loopback_page(h, x));
    else if (m->type == DASH_MSG_FACTS)
        dash_facts(h, x, m->id);
    else
        dash_history(h, x, m->id, loopback_page(h, x));
}

/* ---- sessions ---------------------------------------------------------------------------- */

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

void dash_client_msg(struct hub *h, struct hsess *x, const struct xmsg *m)
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
        on_read(h, x, &msg); /* history, find, facts */
    dash_msg_cleanup(&msg);
}

void dash_client_open(struct hub *h, const struct xmsg *m)
{
    char addr[64];
    anon_addr_key((const char *)m->data, addr, sizeof(addr));
    struct hsess *x = dash_sess_add(h, m->session, addr);
    const char *want = h->c->cfg->stream_token;
    x->cross_origin = m->code == 1;
    x->authed = m->key[0] != '\0' && want != NULL && want[0] != '\0' &&
                strlen(m->key) == strlen(want) &&
                CRYPTO_memcmp(m->key, want, strlen(want)) == 0;
    x->msg_tokens = HUB_MSG_BURST;
    x->bad_tokens = HUB_BAD_BURST;
    x->bucket_ms = mono_ms();
    char id[32];
    snprintf(id, sizeof(id), "%llu", (unsigned long long)x->id);
    dash_send_json(h, x->id, NULL, json_pack("{s:s,s:s,s:{s:s}}", "type", "connection", "status",
                                             "ready", "data", "id", id));
}

void dash_client_gone(struct hub *h, uint64_t sess)
{
    struct hsess *x = dash_sess_find(h, sess);
    if (x != NULL)
        dash_sess_remove(h, x);
}

void dash_client_anon_gone(struct hub *h, const char *id)
{
    for (size_t i = 0; i < h->tab_size; i++)
        for (struct hsess *x = h->tab[i]; x != NULL; x = x->hnext) {
            struct hsub *u = dash_sub_of_id(h, x, id);
            if (u == NULL || !u->anon || x->closing)
                continue;
            dash_send_error(h, x->id, NULL, "not_found",
                            "the upstream does not know this request id: the subscription "
                            "ended",
                            dash_sub_data(u));
            dash_sub_remove(h, x, u, 1);
        }
}
