/* hub.c - see hub.h. runs on: core thread.
 *
 * State: sessions (id -> struct hsess, each with its subscriptions), two indexes - live id
 * subscriptions per request id (to skip events nobody follows) and "<session>|<id>" (one
 * subscription per id and session) - the stream cursor, and the list of subscriptions
 * waiting for the follower to reach their resume cursor.
 * Ownership: every Redis command carries a heap op naming its session and subscription by
 * number, never by pointer; the callback looks them up and drops the answer when they are
 * gone. The hub outlives its commands in flight (pending count, closing flag). */
#include "relay/dash/hub.h"
#include "protocol/addr.h"
#include "relay/core.h"
#include "relay/edge/dash_filter.h"
#include "relay/common/idmap.h"
#include "relay/ingest/ingest.h"
#include "relay/common/log.h"
#include "relay/ingest/track.h"
#include "relay/ingest/upstream.h"
#include "relay/common/util.h"
#include "relay/edge/ws_server.h"
#include "relay/edge/ws_thread.h"
#include "relay/edge/xq.h"
#include "protocol/event.h"
#include "store/keys.h"
#include "store/store.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_NAME "request.status.updated"
#define STATS_EVENT "statusrelay.stats"
#define SID_MAX 48

enum sub_kind { SUB_ID, SUB_BROAD, SUB_STATS };
enum sub_state { SS_REPLAY, SS_WAIT, SS_LIVE };

struct hsub {
    struct hsub *next;
    uint32_t no;
    enum sub_kind kind;
    enum sub_state state;
    char *id;                 /* SUB_ID */
    struct dash_broad f;      /* SUB_BROAD */
    char from[SID_MAX];       /* the client's lastEventId ("" = none) */
    char cursor[SID_MAX];     /* resume: last stream id replayed */
    char live_at[SID_MAX];    /* the hub cursor when it went live */
    uint64_t replayed;
};

struct hsess {
    struct hsess *hnext;
    uint64_t id;
    int authed, cross_origin, closing;
    struct hsub *subs;
    size_t nsubs;             /* id + broad (stats not counted) */
    int stats;                /* stats subscriptions */
    uint32_t next_no;
    double msg_tokens, bad_tokens;
    int64_t bucket_ms;
};

struct waiter {
    uint64_t sess;
    uint32_t no;
    char cursor[SID_MAX];
};

struct hub {
    struct core *c;
    int closing, pending;
    struct hsess **tab;
    size_t tab_size, count;
    struct idmap *live_ids;   /* request id -> live id subscriptions */
    struct idmap *sess_ids;   /* "<session>|<request id>" -> subscription number */
    size_t broad_live, nstats;
    struct waiter *waiters;
    size_t nwaiters;
    /* stream follower */
    char cursor[SID_MAX];     /* "" until known */
    int reading, cursor_checking;
    uint64_t events_seen, events_routed, frame_errors;
    struct event *poll_ev, *kick_ev, *stats_ev;
    uint64_t rate_seen[6];
    int64_t rate_ms[6];
    int rate_i;
    int loopback_listen;
    char k_events[KEY_MAX];
};

/* ---- small helpers --------------------------------------------------------------------- */

static int enter(struct hub *h)
{
    h->pending--;
    if (!h->closing)
        return 0;
    if (h->pending == 0) {
        idmap_free(h->live_ids);
        idmap_free(h->sess_ids);
        free(h->waiters);
        free(h->tab);
        free(h);
    }
    return 1;
}


static const char *reply_field(const redisReply *fields, const char *name, size_t *len)
{
    if (fields == NULL || fields->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < fields->elements; i += 2)
        if (fields->element[i]->str && strcmp(fields->element[i]->str, name) == 0) {
            if (len)
                *len = fields->element[i + 1]->len;
            return fields->element[i + 1]->str;
        }
    return NULL;
}

/* ---- sessions -------------------------------------------------------------------------- */

static size_t slot(const struct hub *h, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 32) & (h->tab_size - 1);
}

static struct hsess *sess_find(const struct hub *h, uint64_t id)
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

static struct hsub *sub_find(const struct hsess *x, uint32_t no)
{
    for (struct hsub *u = x->subs; u != NULL; u = u->next)
        if (u->no == no)
            return u;
    return NULL;
}

/* ---- frames to the ws thread ------------------------------------------------------------ */

static void send_text(struct hub *h, uint64_t sess, const char *key, const char *text,
                      size_t len)
{
    struct xmsg *m = xmsg_new(XMSG_DASH_SEND, sess, text, len);
    if (key != NULL)
        snprintf(m->key, sizeof(m->key), "%s", key);
    xq_push(h->c->to_ws, m);
}

/* Takes j. */
static void send_json(struct hub *h, uint64_t sess, const char *key, json_t *j)
{
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (t != NULL)
        send_text(h, sess, key, t, strlen(t));
    free(t);
    json_decref(j);
}

static void filter_op(struct hub *h, uint64_t sess, enum dash_op op, const char *key,
                      uint64_t gen, const char *data)
{
    struct xmsg *m = xmsg_new(XMSG_DASH_ACCEPT_SUB, sess, data, data ? strlen(data) : 0);
    m->code = op;
    m->gen = gen;
    if (key != NULL)
        snprintf(m->key, sizeof(m->key), "%s", key);
    xq_push(h->c->to_ws, m);
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

/* The error frame: {"type","status":"error","error":{"code","message"},"data"?}. Takes
 * data. Counts as a bad message (may close the session). */
static void send_error(struct hub *h, struct hsess *x, const char *type, const char *code,
                       const char *message, json_t *data)
{
    json_t *j = json_pack("{s:s,s:s,s:{s:s,s:s}}", "type", type ? type : "error", "status",
                          "error", "error", "code", code, "message", message);
    if (data != NULL)
        json_object_set_new(j, "data", data);
    send_json(h, x->id, NULL, j);
    bad_message(h, x);
}

static json_t *sub_filters_json(const struct hsub *u)
{
    if (u->kind == SUB_ID)
        return json_pack("{s:s}", "id", u->id);
    return dash_broad_to_json(&u->f);
}

static json_t *sub_data(const struct hsub *u)
{
    return json_pack("{s:s,s:o}", "event", u->kind == SUB_STATS ? STATS_EVENT : EVENT_NAME,
                     "filters", sub_filters_json(u));
}

/* The frame of one event record, with "statusrelay.streamId" = sid. NULL when the record is
 * unreadable. ev (initialised by the caller) receives the decoded event. */
static char *encode_frame(struct hub *h, const char *rec, size_t rlen, int snapshot,
                          const char *sid, struct status_event *ev, size_t *len)
{
    struct proto_err pe;
    memset(&pe, 0, sizeof(pe));
    if (proto_event_from_record(rec, rlen, ev, &pe) != 0) {
        if (h->frame_errors++ == 0)
            log_warn("event record unreadable, not sent to dashboards", "stream_id=%s",
                     sid ? sid : "");
        return NULL;
    }
    size_t flen = 0;
    char *f = proto_event_ws_frame(ev, snapshot, wall_ms(), &flen);
    if (f == NULL || flen < 2 || sid == NULL || sid[0] == '\0') {
        *len = flen;
        return f;
    }
    /* the frame ends with the statusrelay object's "}" and the envelope's "}" */
    size_t sl = strlen(sid);
    char *out = xmalloc(flen + sl + 16);
    memcpy(out, f, flen - 2);
    size_t n = flen - 2;
    memcpy(out + n, ",\"streamId\":\"", 13);
    n += 13;
    memcpy(out + n, sid, sl);
    n += sl;
    memcpy(out + n, "\"}}", 4);
    n += 3;
    free(f);
    *len = n;
    return out;
}

/* ---- subscriptions ---------------------------------------------------------------------- */

static void sess_key(char *buf, size_t n, uint64_t sess, const char *id)
{
    snprintf(buf, n, "%llu|%s", (unsigned long long)sess, id);
}

static void waiter_del(struct hub *h, uint64_t sess, uint32_t no)
{
    for (size_t i = 0; i < h->nwaiters; i++)
        if (h->waiters[i].sess == sess && h->waiters[i].no == no) {
            h->waiters[i] = h->waiters[--h->nwaiters];
            return;
        }
}

static void go_live(struct hub *h, struct hsess *x, struct hsub *u)
{
    u->state = SS_LIVE;
    snprintf(u->live_at, sizeof(u->live_at), "%s", h->cursor);
    if (u->kind == SUB_ID) {
        uint32_t n = 0;
        idmap_get(h->live_ids, u->id, &n);
        idmap_put(h->live_ids, u->id, n + 1);
        filter_op(h, x->id, DASH_OP_ADD_ID, u->id, 0, NULL);
    } else if (u->kind == SUB_BROAD) {
        h->broad_live++;
        json_t *j = dash_broad_to_json(&u->f);
        char *t = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        filter_op(h, x->id, DASH_OP_ADD_BROAD, NULL, u->no, t);
        free(t);
    }
}

static void resumed_notice(struct hub *h, struct hsess *x, struct hsub *u)
{
    json_t *d = sub_data(u);
    json_object_set_new(d, "lastEventId", json_string(u->from));
    json_object_set_new(d, "replayed", json_integer((json_int_t)u->replayed));
    json_object_set_new(d, "streamId", json_string(u->live_at));
    send_json(h, x->id, NULL, json_pack("{s:s,s:o}", "type", "resumed", "data", d));
}

/* Remove one subscription; notify = tell the ws thread (not when the session is gone). */
static void sub_remove(struct hub *h, struct hsess *x, struct hsub *u, int notify)
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
    } else if (u->kind == SUB_BROAD) {
        x->nsubs--;
    } else {
        x->stats--;
        h->nstats--;
    }
    if (u->state == SS_WAIT)
        waiter_del(h, x->id, u->no);
    if (u->state == SS_LIVE) {
        if (u->kind == SUB_ID) {
            uint32_t n = 0;
            idmap_get(h->live_ids, u->id, &n);
            if (n <= 1)
                idmap_del(h->live_ids, u->id);
            else
                idmap_put(h->live_ids, u->id, n - 1);
            if (notify)
                filter_op(h, x->id, DASH_OP_DEL_ID, u->id, 0, NULL);
        } else if (u->kind == SUB_BROAD) {
            h->broad_live--;
            if (notify)
                filter_op(h, x->id, DASH_OP_DEL_BROAD, NULL, u->no, NULL);
        }
    }
    free(u->id);
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

/* ---- snapshots ---------------------------------------------------------------------------- */

struct op {
    struct hub *h;
    uint64_t sess;
    uint32_t no;
    int track;                /* snapshot of an id subscription: start tracking if needed */
    char id[PROTO_MAX_ID + 1];
};

static struct op *op_new(struct hub *h, uint64_t sess, uint32_t no, const char *id)
{
    struct op *op = xcalloc(1, sizeof(*op));
    op->h = h;
    op->sess = sess;
    op->no = no;
    if (id != NULL)
        snprintf(op->id, sizeof(op->id), "%s", id);
    return op;
}

/* Look up the op's session and live-or-replaying subscription; NULL when gone. */
static struct hsub *op_sub(struct op *op, struct hsess **xp)
{
    struct hsess *x = sess_find(op->h, op->sess);
    *xp = x;
    return x != NULL && !x->closing ? sub_find(x, op->no) : NULL;
}

/* The start of a store callback that owns op: frees op and returns its subscription, or
 * NULL when the hub is closing or the session or subscription is gone. */
static struct hsub *op_finish(struct op *op, struct hsess **xp)
{
    struct hub *h = op->h;
    struct hsub *u = enter(h) ? NULL : op_sub(op, xp);
    free(op);
    return u;
}

static void on_tracked(void *arg, const char *err, size_t created)
{
    struct hub *h = arg;
    if (enter(h))
        return;
    if (err != NULL)
        log_warn("dashboard subscription could not start tracking", "err=%s", err);
    else if (created > 0)
        log_info("tracking started by a dashboard subscription", "created=%zu", created);
}

static void track_one(struct hub *h, const char *id)
{
    const char *ids[1] = {id};
    h->pending++;
    if (track_requests(h->c, ids, 1, NULL, on_tracked, h) != 0)
        h->pending--;
}

static void on_snapshot(void *arg, const char *err, redisReply *r)
{
    struct op *op = arg;
    struct hub *h = op->h;
    if (enter(h)) {
        free(op);
        return;
    }
    struct hsess *x;
    struct hsub *u = op_sub(op, &x);
    if (u == NULL)
        goto out;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        json_t *d = sub_data(u);
        if (u->kind == SUB_BROAD)
            json_object_set_new(d, "requestId", json_string(op->id));
        send_json(h, x->id, NULL,
                  json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "type", "error", "status", "error",
                            "error", "code", "unavailable", "message",
                            "the last-known state could not be read (Redis unavailable)",
                            "data", d));
        goto out;
    }
    const redisReply *rec = r->element[0], *trk = r->element[1];
    if (op->track && (trk->type != REDIS_REPLY_STRING || strcmp(trk->str, "1") != 0))
        track_one(h, op->id);
    if (rec->type == REDIS_REPLY_STRING) {
        struct status_event ev;
        status_event_init(&ev);
        size_t len = 0;
        char *f = encode_frame(h, rec->str, rec->len, 1, u->live_at, &ev, &len);
        if (f != NULL && (u->kind == SUB_ID ||
                          dash_broad_match(&u->f, ev.status ? ev.status : "",
                                           ev.origin_chain_id, ev.destination_chain_id)))
            send_text(h, x->id, op->id, f, len);
        free(f);
        status_event_cleanup(&ev);
    }
out:
    free(op);
}

static void snapshot_one(struct hub *h, struct hsess *x, struct hsub *u, const char *id,
                         int track)
{
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag(h->c->store), "req", id, NULL);
    struct op *op = op_new(h, x->id, u->no, id);
    op->track = track;
    h->pending++;
    if (store_cmd(h->c->store, on_snapshot, op, "HMGET %s rec trk", k) != 0) {
        h->pending--;
        free(op);
        send_json(h, x->id, NULL,
                  json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "type", "error", "status", "error",
                            "error", "code", "unavailable", "message",
                            "the last-known state could not be read (Redis unavailable)",
                            "data", sub_data(u)));
        if (track)
            track_one(h, id); /* fails too while Redis is down; logged */
    }
}

struct bsnap {
    struct op op;
    int limit, outstanding, issued;
};

static void on_broad_ids(void *arg, const char *err, redisReply *r)
{
    struct bsnap *b = arg;
    struct hub *h = b->op.h;
    if (enter(h)) {
        free(b);
        return;
    }
    b->outstanding--;
    struct hsess *x;
    struct hsub *u = op_sub(&b->op, &x);
    if (u != NULL && err == NULL && r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < r->elements && b->issued < b->limit; i++)
            if (r->element[i]->type == REDIS_REPLY_STRING &&
                r->element[i]->len <= PROTO_MAX_ID) {
                snapshot_one(h, x, u, r->element[i]->str, 0);
                b->issued++;
            }
    if (b->outstanding == 0)
        free(b);
}

/* Snapshots of the most recent requests a broad subscription matches: the newest `limit`
 * ids of each status set (or of every request), filtered by chains on the way out. */
static void snapshot_broad(struct hub *h, struct hsess *x, struct hsub *u, int limit)
{
    if (limit <= 0)
        return;
    struct bsnap *b = xcalloc(1, sizeof(*b));
    b->op.h = h;
    b->op.sess = x->id;
    b->op.no = u->no;
    b->limit = limit;
    const char *tag = store_tag(h->c->store);
    char k[KEY_MAX], lim[24];
    snprintf(lim, sizeof(lim), "%d", limit - 1);
    size_t n = u->f.nstatus > 0 ? u->f.nstatus : 1;
    b->outstanding = (int)n + 1; /* + 1: ours until every command is issued */
    for (size_t i = 0; i < n; i++) {
        if (u->f.nstatus > 0)
            key_build(k, sizeof(k), tag, "st", u->f.status[i], NULL);
        else
            key_build(k, sizeof(k), tag, "all", NULL, NULL);
        h->pending++;
        if (store_cmd(h->c->store, on_broad_ids, b, "ZREVRANGE %s 0 %s", k, lim) != 0) {
            h->pending--;
            b->outstanding--;
        }
    }
    if (--b->outstanding == 0)
        free(b);
}

/* ---- resume ------------------------------------------------------------------------------- */

static void send_gap(struct hub *h, struct hsess *x, struct hsub *u, const char *reason,
                     const char *oldest)
{
    json_t *d = sub_data(u);
    json_object_set_new(d, "lastEventId", json_string(u->from));
    json_object_set_new(d, "oldestStreamId", oldest && oldest[0] ? json_string(oldest)
                                                                  : json_null());
    json_object_set_new(d, "reason", json_string(reason));
    json_object_set_new(d, "message",
                        json_string("events after lastEventId cannot be replayed: a fresh "
                                    "snapshot follows"));
    send_json(h, x->id, NULL, json_pack("{s:s,s:o}", "type", "gap", "data", d));
}

static void fresh_snapshot(struct hub *h, struct hsess *x, struct hsub *u, int limit)
{
    if (u->kind == SUB_ID)
        snapshot_one(h, x, u, u->id, 1);
    else
        snapshot_broad(h, x, u, limit);
}

/* The resume cannot be served: say so, go live, snapshot. Never silence. */
static void gap(struct hub *h, struct hsess *x, struct hsub *u, const char *reason,
                const char *oldest)
{
    log_info("dashboard resume answered with a gap", "session=%llu from=%s reason=%s",
             (unsigned long long)x->id, u->from, reason);
    send_gap(h, x, u, reason, oldest);
    go_live(h, x, u);
    fresh_snapshot(h, x, u, HUB_SNAPSHOT_DEFAULT);
}

static void replay_page(struct hub *h, struct hsess *x, struct hsub *u);

static void finish_resume(struct hub *h, struct hsess *x, struct hsub *u)
{
    if (stream_id_cmp(u->from, h->cursor) > 0) {
        /* the client saw events this process has not read yet: go live once the follower
         * passes its cursor, so nothing it saw is sent twice */
        u->state = SS_WAIT;
        h->waiters = xrealloc(h->waiters, (h->nwaiters + 1) * sizeof(*h->waiters));
        struct waiter *w = &h->waiters[h->nwaiters++];
        w->sess = x->id;
        w->no = u->no;
        snprintf(w->cursor, sizeof(w->cursor), "%s", u->from);
        return;
    }
    go_live(h, x, u);
    resumed_notice(h, x, u);
}

static int sub_matches(const struct hsub *u, const char *rid, const struct status_event *ev)
{
    if (u->kind == SUB_ID)
        return strcmp(u->id, rid) == 0;
    return ev != NULL && dash_broad_match(&u->f, ev->status ? ev->status : "",
                                          ev->origin_chain_id, ev->destination_chain_id);
}

static void on_replay(void *arg, const char *err, redisReply *r)
{
    struct op *op = arg;
    struct hub *h = op->h;
    struct hsess *x;
    struct hsub *u = op_finish(op, &x);
    if (u == NULL)
        return;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        gap(h, x, u, "unavailable", NULL);
        return;
    }
    int live = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 || e->element[0]->str == NULL)
            continue;
        const char *sid = e->element[0]->str;
        if (stream_id_cmp(sid, h->cursor) > 0) { /* the follower delivers this one after live */
            live = 1;
            break;
        }
        size_t rlen = 0, ridlen = 0;
        const char *rid = reply_field(e->element[1], "rid", &ridlen);
        const char *rec = reply_field(e->element[1], "rec", &rlen);
        if (rid != NULL && rec != NULL && (u->kind != SUB_ID || strcmp(rid, u->id) == 0)) {
            struct status_event ev;
            status_event_init(&ev);
            size_t len = 0;
            char *f = encode_frame(h, rec, rlen, 0, sid, &ev, &len);
            if (f != NULL && sub_matches(u, rid, &ev)) {
                send_text(h, x->id, rid, f, len);
                u->replayed++;
            }
            free(f);
            status_event_cleanup(&ev);
        }
        snprintf(u->cursor, sizeof(u->cursor), "%s", sid);
    }
    if (live || r->elements < HUB_REPLAY_PAGE)
        finish_resume(h, x, u);
    else
        replay_page(h, x, u);
}

static void replay_page(struct hub *h, struct hsess *x, struct hsub *u)
{
    char from[SID_MAX + 1], cnt[16];
    snprintf(from, sizeof(from), "(%s", u->cursor);
    snprintf(cnt, sizeof(cnt), "%d", HUB_REPLAY_PAGE);
    struct op *op = op_new(h, x->id, u->no, NULL);
    h->pending++;
    if (store_cmd(h->c->store, on_replay, op, "XRANGE %s %s + COUNT %s", h->k_events, from,
                  cnt) != 0) {
        h->pending--;
        free(op);
        gap(h, x, u, "unavailable", NULL);
    }
}

static void on_resume_info(void *arg, const char *err, redisReply *r)
{
    struct op *op = arg;
    struct hub *h = op->h;
    struct hsess *x;
    struct hsub *u = op_finish(op, &x);
    if (u == NULL)
        return;
    char last[SID_MAX] = "0-0", maxdel[SID_MAX] = "", first[SID_MAX] = "";
    if (err == store_err_server && r->str && strstr(r->str, "no such key") != NULL) {
        /* no stream yet: nothing was ever written or it is all gone */
    } else if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        gap(h, x, u, "unavailable", NULL);
        return;
    } else {
        const char *v;
        if ((v = reply_field(r, "last-generated-id", NULL)) != NULL)
            snprintf(last, sizeof(last), "%s", v);
        if ((v = reply_field(r, "max-deleted-entry-id", NULL)) != NULL)
            snprintf(maxdel, sizeof(maxdel), "%s", v);
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            if (r->element[i]->str && strcmp(r->element[i]->str, "first-entry") == 0) {
                const redisReply *fe = r->element[i + 1];
                if (fe->type == REDIS_REPLY_ARRAY && fe->elements > 0 && fe->element[0]->str)
                    snprintf(first, sizeof(first), "%s", fe->element[0]->str);
            }
    }
    if (stream_id_cmp(u->from, last) > 0) {
        gap(h, x, u, "unknown", first); /* not a cursor of this stream (Redis was reset?) */
        return;
    }
    /* events after the cursor were removed when the cursor is older than the oldest entry
     * left (trimming cuts the head; conservative: the cursor entry itself may have been
     * the last one cut), when XDEL removed a newer one (max-deleted-entry-id, Redis 7), or
     * when the stream is empty but had entries after it */
    int trimmed = (first[0] != '\0' && stream_id_cmp(u->from, first) < 0) ||
                  (maxdel[0] != '\0' && stream_id_cmp(u->from, maxdel) < 0) ||
                  (first[0] == '\0' && stream_id_cmp(u->from, last) < 0);
    if (trimmed) {
        gap(h, x, u, "trimmed", first);
        return;
    }
    snprintf(u->cursor, sizeof(u->cursor), "%s", u->from);
    replay_page(h, x, u);
}

static int start_resume(struct hub *h, struct hsess *x, struct hsub *u)
{
    struct op *op = op_new(h, x->id, u->no, NULL);
    h->pending++;
    if (store_cmd(h->c->store, on_resume_info, op, "XINFO STREAM %s", h->k_events) != 0) {
        h->pending--;
        free(op);
        return -1;
    }
    return 0;
}

/* ---- history ------------------------------------------------------------------------------ */

struct hist {
    struct op op;
    size_t n, got;
    char **frames; /* in timeline order */
    size_t *lens;
};

struct hist_item {
    struct hist *hs;
    size_t i;
};

static void hist_finish(struct hub *h, struct hist *hs)
{
    struct hsess *x = sess_find(h, hs->op.sess);
    if (x != NULL && !x->closing) {
        /* the frames are JSON already: {"type":"history","status":"success","data":{"event",
         * "filters":{"id"},"events":[frame, ...]}} (ids are [A-Za-z0-9_:.-]: no escaping) */
        char head[PROTO_MAX_ID + 128];
        int hl = snprintf(head, sizeof(head),
                          "{\"type\":\"history\",\"status\":\"success\",\"data\":{\"event\":"
                          "\"" EVENT_NAME "\",\"filters\":{\"id\":\"%s\"},\"events\":[",
                          hs->op.id);
        size_t total = (size_t)hl + 8;
        for (size_t i = 0; i < hs->n; i++)
            total += hs->frames[i] ? hs->lens[i] + 1 : 0;
        char *out = xmalloc(total);
        memcpy(out, head, (size_t)hl);
        size_t k = (size_t)hl;
        int first = 1;
        for (size_t i = 0; i < hs->n; i++) {
            if (hs->frames[i] == NULL)
                continue;
            if (!first)
                out[k++] = ',';
            first = 0;
            memcpy(out + k, hs->frames[i], hs->lens[i]);
            k += hs->lens[i];
        }
        memcpy(out + k, "]}}", 3);
        k += 3;
        send_text(h, x->id, NULL, out, k);
        free(out);
    }
    for (size_t i = 0; i < hs->n; i++)
        free(hs->frames[i]);
    free(hs->frames);
    free(hs->lens);
    free(hs);
}

static void on_hist_entry(void *arg, const char *err, redisReply *r)
{
    struct hist_item *it = arg;
    struct hist *hs = it->hs;
    struct hub *h = hs->op.h;
    size_t i = it->i;
    free(it);
    if (enter(h)) {
        if (++hs->got == hs->n) { /* the last one frees the collection */
            for (size_t j = 0; j < hs->n; j++)
                free(hs->frames[j]);
            free(hs->frames);
            free(hs->lens);
            free(hs);
        }
        return;
    }
    if (err == NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements >= 2) {
        const redisReply *e = r->element[0];
        size_t rlen = 0;
        const char *rec = reply_field(e->element[1], "rec", &rlen);
        if (rec != NULL) {
            struct status_event ev;
            status_event_init(&ev);
            hs->frames[i] = encode_frame(h, rec, rlen, 0, e->element[0]->str, &ev, &hs->lens[i]);
            status_event_cleanup(&ev);
        }
    }
    if (++hs->got == hs->n)
        hist_finish(h, hs);
}

static void on_hist_list(void *arg, const char *err, redisReply *r)
{
    struct hist *hs = arg;
    struct hub *h = hs->op.h;
    if (enter(h)) {
        free(hs);
        return;
    }
    struct hsess *x = sess_find(h, hs->op.sess);
    if (x == NULL || x->closing) {
        free(hs);
        return;
    }
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        send_json(h, x->id, NULL,
                  json_pack("{s:s,s:s,s:{s:s,s:s}}", "type", "history", "status", "error",
                            "error", "code", "unavailable", "message",
                            "the history could not be read (Redis unavailable)"));
        free(hs);
        return;
    }
    hs->n = r->elements;
    if (hs->n == 0) {
        hist_finish(h, hs);
        return;
    }
    hs->frames = xcalloc(hs->n, sizeof(char *));
    hs->lens = xcalloc(hs->n, sizeof(size_t));
    size_t issued = 0;
    for (size_t i = 0; i < hs->n; i++) {
        const char *sid = r->element[i]->str ? r->element[i]->str : "0-0";
        struct hist_item *it = xcalloc(1, sizeof(*it));
        it->hs = hs;
        it->i = i;
        h->pending++;
        if (store_cmd(h->c->store, on_hist_entry, it, "XRANGE %s %s %s", h->k_events, sid,
                      sid) != 0) {
            h->pending--;
            free(it);
            continue;
        }
        issued++;
    }
    if (issued < hs->n) { /* Redis went away half way: answer with what will come back */
        hs->got += hs->n - issued;
        if (issued == 0)
            hist_finish(h, hs);
    }
}

static void history(struct hub *h, struct hsess *x, const char *id)
{
    char k[KEY_MAX], lim[16];
    key_build(k, sizeof(k), store_tag(h->c->store), "tl", id, NULL);
    snprintf(lim, sizeof(lim), "-%d", HUB_HISTORY_MAX);
    struct hist *hs = xcalloc(1, sizeof(*hs));
    hs->op.h = h;
    hs->op.sess = x->id;
    snprintf(hs->op.id, sizeof(hs->op.id), "%s", id);
    h->pending++;
    if (store_cmd(h->c->store, on_hist_list, hs, "LRANGE %s %s -1", k, lim) != 0) {
        h->pending--;
        free(hs);
        send_json(h, x->id, NULL,
                  json_pack("{s:s,s:s,s:{s:s,s:s}}", "type", "history", "status", "error",
                            "error", "code", "unavailable", "message",
                            "the history could not be read (Redis unavailable)"));
    }
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

/* Validate filters.id; returns the id or NULL after sending an error. */
static const char *want_id(struct hub *h, struct hsess *x, const char *type, const json_t *f)
{
    const json_t *jid = json_object_get(f, "id");
    if (!json_is_string(jid) ||
        !proto_request_id_valid(json_string_value(jid), json_string_length(jid))) {
        send_error(h, x, type, "invalid_request_id",
                   "filters.id must be a request id: 1 to 128 characters of [A-Za-z0-9_:.-]",
                   NULL);
        return NULL;
    }
    if (json_object_size(f) != 1) {
        send_error(h, x, type, "bad_request", "filters.id cannot be combined with other filters",
                   NULL);
        return NULL;
    }
    return json_string_value(jid);
}

static void ack_subscribe(struct hub *h, struct hsess *x, const struct hsub *u)
{
    send_json(h, x->id, NULL, json_pack("{s:s,s:s,s:o}", "type", "subscribe", "status",
                                        "success", "data", sub_data(u)));
}

static void stats_frame_to(struct hub *h, uint64_t sess);

static void on_subscribe(struct hub *h, struct hsess *x, json_t *msg)
{
    const char *type = "subscribe";
    const json_t *jev = json_object_get(msg, "event"), *f = json_object_get(msg, "filters"),
                 *jtok = json_object_get(msg, "token"), *jfrom = json_object_get(msg,
                                                                                  "lastEventId"),
                 *jlim = json_object_get(msg, "snapshotLimit");
    if (!json_is_string(jev)) {
        send_error(h, x, type, "bad_request", "event is required (\"" EVENT_NAME "\")", NULL);
        return;
    }
    const char *event = json_string_value(jev);
    const char *want = h->c->cfg->stream_token;
    if (jtok != NULL && want != NULL && want[0] != '\0') { /* no token configured: ignored */
        if (!json_is_string(jtok) || !token_ok(h, json_string_value(jtok))) {
            send_error(h, x, type, "unauthorized", "the stream token is not valid", NULL);
            return;
        }
        x->authed = 1;
    }
    if (strcmp(event, STATS_EVENT) == 0) {
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
        send_json(h, x->id, NULL,
                  json_pack("{s:s,s:s,s:{s:s}}", "type", "subscribe", "status", "success",
                            "data", "event", STATS_EVENT));
        stats_frame_to(h, x->id);
        return;
    }
    if (strcmp(event, EVENT_NAME) != 0) {
        send_error(h, x, type, "unsupported_event",
                   "events: \"" EVENT_NAME "\" and \"" STATS_EVENT "\"", NULL);
        return;
    }
    if (f != NULL && !json_is_object(f) && !json_is_null(f)) {
        send_error(h, x, type, "bad_request", "filters must be an object", NULL);
        return;
    }
    const char *from = NULL;
    uint64_t ms, seq;
    if (jfrom != NULL && !json_is_null(jfrom)) {
        if (!json_is_string(jfrom) || json_string_length(jfrom) >= SID_MAX ||
            stream_id_parse(json_string_value(jfrom), &ms, &seq) != 0) {
            send_error(h, x, type, "bad_cursor",
                       "lastEventId must be a statusrelay.streamId such as "
                       "\"1712345678901-0\"",
                       NULL);
            return;
        }
        from = json_string_value(jfrom);
    }
    int limit = HUB_SNAPSHOT_DEFAULT;
    if (jlim != NULL) {
        if (!json_is_integer(jlim) || json_integer_value(jlim) < 0 ||
            json_integer_value(jlim) > HUB_SNAPSHOT_MAX) {
            send_error(h, x, type, "bad_request", "snapshotLimit is an integer 0..1000", NULL);
            return;
        }
        limit = (int)json_integer_value(jlim);
    }
    if (from != NULL && (!store_ready(h->c->store) || h->cursor[0] == '\0')) {
        send_error(h, x, type, "unavailable",
                   "resume needs the event stream, which is unavailable now: retry", NULL);
        return;
    }

    const char *id = NULL;
    struct dash_broad bf;
    memset(&bf, 0, sizeof(bf));
    if (f != NULL && json_object_get(f, "id") != NULL) {
        if ((id = want_id(h, x, type, f)) == NULL)
            return;
        if (!id_allowed(h, x)) {
            send_error(h, x, type, "unauthorized",
                       "anonymous subscriptions are disabled: send the stream token", NULL);
            return;
        }
        char k[PROTO_MAX_ID + 32];
        uint32_t no = 0;
        sess_key(k, sizeof(k), x->id, id);
        if (idmap_get(h->sess_ids, k, &no)) { /* already subscribed: ack and state again */
            struct hsub *u = sub_find(x, no);
            ack_subscribe(h, x, u);
            if (u->state == SS_LIVE)
                snapshot_one(h, x, u, id, 0);
            return;
        }
    } else {
        const char *why = NULL;
        if (dash_broad_from_json(f, &bf, &why) != 0) {
            send_error(h, x, type, "bad_request", why, NULL);
            return;
        }
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
    struct hsub *u = sub_new(x, id ? SUB_ID : SUB_BROAD);
    if (id != NULL) {
        char k[PROTO_MAX_ID + 32];
        u->id = xstrdup(id);
        sess_key(k, sizeof(k), x->id, id);
        idmap_put(h->sess_ids, k, u->no);
    } else {
        u->f = bf;
    }
    ack_subscribe(h, x, u);
    if (from != NULL) {
        snprintf(u->from, sizeof(u->from), "%s", from);
        if (start_resume(h, x, u) != 0) {
            gap(h, x, u, "unavailable", NULL);
            return;
        }
        if (id != NULL)
            track_one(h, id); /* idempotent: nobody tracking it yet is the rare case */
        return;
    }
    go_live(h, x, u);
    fresh_snapshot(h, x, u, limit);
}

static void on_unsubscribe(struct hub *h, struct hsess *x, json_t *msg)
{
    const char *type = "unsubscribe";
    const json_t *jev = json_object_get(msg, "event"), *f = json_object_get(msg, "filters");
    if (!json_is_string(jev)) {
        send_error(h, x, type, "bad_request", "event is required (\"" EVENT_NAME "\")", NULL);
        return;
    }
    const char *event = json_string_value(jev);
    if (strcmp(event, STATS_EVENT) == 0) {
        for (struct hsub *u = x->subs, *next; u != NULL; u = next) {
            next = u->next;
            if (u->kind == SUB_STATS)
                sub_remove(h, x, u, 1);
        }
    } else if (strcmp(event, EVENT_NAME) != 0) {
        send_error(h, x, type, "unsupported_event", "events: \"" EVENT_NAME "\"", NULL);
        return;
    } else if (f != NULL && !json_is_null(f) && json_object_get(f, "id") != NULL) {
        const char *id = want_id(h, x, type, f);
        if (id == NULL)
            return;
        char k[PROTO_MAX_ID + 32];
        uint32_t no = 0;
        sess_key(k, sizeof(k), x->id, id);
        struct hsub *u = idmap_get(h->sess_ids, k, &no) ? sub_find(x, no) : NULL;
        if (u != NULL)
            sub_remove(h, x, u, 1);
    } else if (f == NULL || json_is_null(f) || json_object_size(f) == 0) {
        /* no filters: every request.status.updated subscription of the connection */
        for (struct hsub *u = x->subs, *next; u != NULL; u = next) {
            next = u->next;
            if (u->kind != SUB_STATS)
                sub_remove(h, x, u, 1);
        }
    } else {
        struct dash_broad bf;
        const char *why = NULL;
        if (dash_broad_from_json(f, &bf, &why) != 0) {
            send_error(h, x, type, "bad_request", why, NULL);
            return;
        }
        for (struct hsub *u = x->subs, *next; u != NULL; u = next) {
            next = u->next;
            if (u->kind == SUB_BROAD && dash_broad_equal(&u->f, &bf))
                sub_remove(h, x, u, 1);
        }
        dash_broad_cleanup(&bf);
    }
    send_json(h, x->id, NULL, json_pack("{s:s,s:s,s:{s:s}}", "type", "unsubscribe", "status",
                                        "success", "data", "event", event));
}

static void on_history(struct hub *h, struct hsess *x, json_t *msg)
{
    const json_t *f = json_object_get(msg, "filters");
    if (!json_is_object(f)) {
        send_error(h, x, "history", "bad_request", "filters.id is required", NULL);
        return;
    }
    const char *id = want_id(h, x, "history", f);
    if (id == NULL)
        return;
    if (!id_allowed(h, x)) {
        send_error(h, x, "history", "unauthorized",
                   "anonymous requests are disabled: send the stream token", NULL);
        return;
    }
    history(h, x, id);
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
    json_error_t je;
    json_t *msg = json_loadb((const char *)m->data, m->len, JSON_REJECT_DUPLICATES, &je);
    if (msg == NULL || !json_is_object(msg)) {
        json_decref(msg);
        send_error(h, x, NULL, "bad_json", "messages are JSON objects with a \"type\"", NULL);
        return;
    }
    const char *type = json_string_value(json_object_get(msg, "type"));
    if (type == NULL)
        send_error(h, x, NULL, "bad_request", "\"type\" is required", NULL);
    else if (strcmp(type, "subscribe") == 0)
        on_subscribe(h, x, msg);
    else if (strcmp(type, "unsubscribe") == 0)
        on_unsubscribe(h, x, msg);
    else if (strcmp(type, "history") == 0)
        on_history(h, x, msg);
    else
        send_error(h, x, NULL, "unknown_type",
                   "types: subscribe, unsubscribe, history", NULL);
    json_decref(msg);
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
    sess_insert(h, x);
    char id[32];
    snprintf(id, sizeof(id), "%llu", (unsigned long long)x->id);
    send_json(h, x->id, NULL, json_pack("{s:s,s:s,s:{s:s}}", "type", "connection", "status",
                                        "ready", "data", "id", id));
}

static void on_gone(struct hub *h, uint64_t id)
{
    struct hsess *x = sess_find(h, id);
    if (x == NULL)
        return;
    while (x->subs != NULL)
        sub_remove(h, x, x->subs, 0);
    sess_unlink(h, x);
    free(x);
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
        if ((x = sess_find(h, m->session)) != NULL)
            on_client_msg(h, x, m);
        break;
    case XMSG_DASH_GONE:
        on_gone(h, m->session);
        break;
    default:
        break;
    }
}

/* ---- the stream follower -------------------------------------------------------------------- */

static void follow(struct hub *h);

static void wake_waiters(struct hub *h, const char *sid)
{
    for (size_t i = 0; i < h->nwaiters;) {
        struct waiter *w = &h->waiters[i];
        if (stream_id_cmp(sid, w->cursor) <= 0) {
            i++;
            continue;
        }
        struct hsess *x = sess_find(h, w->sess);
        struct hsub *u = x != NULL ? sub_find(x, w->no) : NULL;
        h->waiters[i] = h->waiters[--h->nwaiters];
        if (u != NULL && u->state == SS_WAIT) {
            go_live(h, x, u);
            resumed_notice(h, x, u);
        }
    }
}

static void route_entry(struct hub *h, const char *sid, const redisReply *fields)
{
    size_t rlen = 0, ridlen = 0;
    const char *rid = reply_field(fields, "rid", &ridlen);
    const char *rec = reply_field(fields, "rec", &rlen);
    h->events_seen++;
    if (rid == NULL || rec == NULL || ridlen > PROTO_MAX_ID)
        return;
    if (h->broad_live == 0 && !idmap_get(h->live_ids, rid, NULL))
        return; /* nobody here follows it: not even decoded */
    struct status_event ev;
    status_event_init(&ev);
    size_t len = 0;
    char *f = encode_frame(h, rec, rlen, 0, sid, &ev, &len);
    if (f != NULL) {
        struct xmsg *m = xmsg_new(XMSG_DASH_EVENT, 0, NULL, 0);
        m->shared = xbuf_new(f, len); /* one buffer for every recipient */
        snprintf(m->key, sizeof(m->key), "%s", rid);
        snprintf(m->status, sizeof(m->status), "%s", ev.status ? ev.status : "");
        m->origin_chain_id = ev.origin_chain_id;
        m->destination_chain_id = ev.destination_chain_id;
        xq_push(h->c->to_ws, m);
        h->events_routed++;
    }
    free(f);
    status_event_cleanup(&ev);
}

static void on_read(void *arg, const char *err, redisReply *r)
{
    struct hub *h = arg;
    if (enter(h))
        return;
    h->reading = 0;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[0]->elements < 2)
        return; /* nil: nothing new; errors: the next poll retries */
    const redisReply *entries = r->element[0]->element[1];
    if (entries->type != REDIS_REPLY_ARRAY)
        return;
    for (size_t i = 0; i < entries->elements; i++) {
        const redisReply *e = entries->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 || e->element[0]->str == NULL ||
            e->element[0]->len >= SID_MAX)
            continue;
        const char *sid = e->element[0]->str;
        if (h->nwaiters > 0)
            wake_waiters(h, sid); /* before the entry: it is their first live event */
        route_entry(h, sid, e->element[1]);
        snprintf(h->cursor, sizeof(h->cursor), "%s", sid);
    }
    if (entries->elements >= HUB_READ_COUNT)
        event_active(h->kick_ev, EV_TIMEOUT, 0); /* more waiting */
}

static void on_cursor(void *arg, const char *err, redisReply *r)
{
    struct hub *h = arg;
    if (enter(h))
        return;
    h->cursor_checking = 0;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY)
        return;
    char last[SID_MAX] = "0-0";
    if (r->elements > 0 && r->element[0]->type == REDIS_REPLY_ARRAY &&
        r->element[0]->elements > 0 && r->element[0]->element[0]->str != NULL &&
        r->element[0]->element[0]->len < SID_MAX)
        snprintf(last, sizeof(last), "%s", r->element[0]->element[0]->str);
    if (h->cursor[0] == '\0') {
        snprintf(h->cursor, sizeof(h->cursor), "%s", last);
        log_info("dashboard stream follower started", "stream_id=%s", h->cursor);
    } else if (stream_id_cmp(last, h->cursor) < 0) {
        log_warn("event stream is behind the dashboard cursor (Redis reset?): following from "
                 "its end", "cursor=%s stream_id=%s", h->cursor, last);
        snprintf(h->cursor, sizeof(h->cursor), "%s", last);
    }
    follow(h);
}

static void follow(struct hub *h)
{
    if (h->closing || h->reading || h->cursor_checking || !store_ready(h->c->store))
        return;
    if (h->cursor[0] == '\0') {
        h->cursor_checking = 1;
        h->pending++;
        if (store_cmd(h->c->store, on_cursor, h, "XREVRANGE %s + - COUNT 1", h->k_events) != 0) {
            h->pending--;
            h->cursor_checking = 0;
        }
        return;
    }
    char cnt[16];
    snprintf(cnt, sizeof(cnt), "%d", HUB_READ_COUNT);
    h->reading = 1;
    h->pending++;
    if (store_cmd(h->c->store, on_read, h, "XREAD COUNT %s STREAMS %s %s", cnt, h->k_events,
                  h->cursor) != 0) {
        h->pending--;
        h->reading = 0;
    }
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    follow(arg);
}

static void on_ingest_event(void *arg, enum proto_verdict v, const struct status_event *ev,
                            const char *stream_id)
{
    struct hub *h = arg;
    if (v == PROTO_ACCEPT && !h->closing)
        event_active(h->kick_ev, EV_TIMEOUT, 0);
}

static void on_store_state(void *arg, int up)
{
    struct hub *h = arg;
    if (h->closing)
        return;
    if (up && h->cursor[0] != '\0' && !h->cursor_checking) {
        /* re-check the cursor against the stream (a restarted Redis may be behind it) */
        h->cursor_checking = 1;
        h->pending++;
        if (store_cmd(h->c->store, on_cursor, h, "XREVRANGE %s + - COUNT 1", h->k_events) != 0) {
            h->pending--;
            h->cursor_checking = 0;
        }
        return;
    }
    if (up)
        follow(h);
    else
        h->reading = 0; /* commands in flight complete with an error anyway */
}

/* ---- stats ---------------------------------------------------------------------------------- */

static json_t *stats_json(struct hub *h)
{
    struct core *c = h->c;
    const struct metrics *m = &c->metrics;
    int64_t now = mono_ms();
    /* events/s over the last few ticks (every process's events: we follow the stream) */
    double rate = 0;
    for (int k = 1; k <= 6; k++) { /* the oldest sample there is (the first seconds too) */
        int i = (h->rate_i + k) % 6;
        if (h->rate_ms[i] > 0 && now - h->rate_ms[i] >= 500) {
            rate = (double)(h->events_seen - h->rate_seen[i]) * 1000.0 /
                   (double)(now - h->rate_ms[i]);
            break;
        }
    }
    json_t *by_status = json_object();
    for (int i = 0; i < METRICS_STATUSES; i++)
        if (m->requests_by_status[i] >= 0)
            json_object_set_new(by_status, metrics_statuses[i],
                                json_integer(m->requests_by_status[i]));
    struct ws_thread_stats ws;
    memset(&ws, 0, sizeof(ws));
    if (c->ws != NULL)
        ws_thread_stats(c->ws, &ws);
    uint64_t failed = m->wh_attempts > m->wh_delivered ? m->wh_attempts - m->wh_delivered : 0;
    return json_pack(
        "{s:s,s:{s:I,s:s,s:{s:f,s:I},s:{s:I,s:I,s:I,s:I,s:I,s:I},s:{s:s,s:I,s:I,s:I},"
        "s:{s:I,s:o},s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I},s:{s:I,s:I}}}",
        "type", "stats", "data", "at", (json_int_t)wall_ms(), "instance", c->instance_id,
        "events", "perSecond", rate, "total", (json_int_t)h->events_seen, "deliveries", "ok",
        (json_int_t)m->wh_delivered, "failed", (json_int_t)failed, "retries",
        (json_int_t)m->wh_retries, "dead", (json_int_t)(m->q_dead >= 0 ? m->q_dead : 0),
        "deadHere", (json_int_t)m->wh_dead, "inflight",
        (json_int_t)(m->q_inflight >= 0 ? m->q_inflight : 0), "upstream", "state",
        c->upstream ? upstream_state_name(c->upstream) : "down", "subscriptions",
        (json_int_t)(c->upstream ? upstream_subscriptions(c->upstream) : 0), "reconnects",
        (json_int_t)m->upstream_ws_reconnects, "lagging", (json_int_t)m->upstream_ws_lagging,
        "requests", "tracked", (json_int_t)(m->tracked_polled >= 0 ? m->tracked_polled : 0),
        "byStatus", by_status, "dashboard", "sessions", (json_int_t)ws.dash.sessions,
        "deliveries", (json_int_t)ws.dash.deliveries, "queued", (json_int_t)ws.dash.queued,
        "conflated", (json_int_t)ws.dash.conflated, "slowClosed",
        (json_int_t)ws.dash.slow_closed, "deadPeers", (json_int_t)ws.dash.dead_peers,
        "eventsIn", (json_int_t)ws.dash.events_in, "routeNs", (json_int_t)ws.dash.route_ns,
        "framesOut", (json_int_t)ws.dash.frames_out, "watch", "stuckAfterMs",
        (json_int_t)c->cfg->stuck_after_ms, "stuck",
        (json_int_t)(m->requests_stuck >= 0 ? m->requests_stuck : 0));
}

static void stats_frame_to(struct hub *h, uint64_t sess)
{
    send_json(h, sess, WS_SERVER_STATS_KEY, stats_json(h));
}

static void on_stats_tick(evutil_socket_t fd, short what, void *arg)
{
    struct hub *h = arg;
    h->rate_i = (h->rate_i + 1) % 6;
    h->rate_seen[h->rate_i] = h->events_seen;
    h->rate_ms[h->rate_i] = mono_ms();
    if (h->nstats == 0)
        return;
    json_t *j = stats_json(h);
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (t == NULL)
        return;
    size_t len = strlen(t);
    for (size_t i = 0; i < h->tab_size; i++)
        for (struct hsess *x = h->tab[i]; x != NULL; x = x->hnext)
            if (x->stats > 0 && !x->closing)
                send_text(h, x->id, WS_SERVER_STATS_KEY, t, len);
    free(t);
}

/* ---- module --------------------------------------------------------------------------------- */

struct hub *hub_new(struct core *c)
{
    struct hub *h = xcalloc(1, sizeof(*h));
    h->c = c;
    h->tab_size = 64;
    h->tab = xcalloc(h->tab_size, sizeof(*h->tab));
    h->live_ids = idmap_new();
    h->sess_ids = idmap_new();
    h->loopback_listen = proto_listen_is_loopback(c->cfg->ws_listen);
    key_build(h->k_events, sizeof(h->k_events), store_tag(c->store), "events", NULL, NULL);
    h->poll_ev = event_new(c->base, -1, EV_PERSIST, on_poll, h);
    h->kick_ev = event_new(c->base, -1, 0, on_poll, h);
    h->stats_ev = event_new(c->base, -1, EV_PERSIST, on_stats_tick, h);
    h->rate_ms[0] = mono_ms();
    struct timeval pt = {0, HUB_POLL_MS * 1000}, st = {HUB_STATS_MS / 1000,
                                                       (HUB_STATS_MS % 1000) * 1000};
    event_add(h->poll_ev, &pt);
    event_add(h->stats_ev, &st);
    if (c->ingest)
        ingest_on_event(c->ingest, on_ingest_event, h);
    store_on_state(c->store, on_store_state, h);
    char cfg[64];
    snprintf(cfg, sizeof(cfg), "%lld %lld", (long long)c->cfg->ws_ping_interval_ms,
             (long long)c->cfg->ws_ping_timeout_ms);
    filter_op(h, 0, DASH_OP_CONFIG, NULL, 0, cfg);
    return h;
}

void hub_free(struct hub *h)
{
    if (h == NULL)
        return;
    h->closing = 1;
    event_free(h->poll_ev);
    event_free(h->kick_ev);
    event_free(h->stats_ev);
    for (size_t i = 0; i < h->tab_size; i++)
        for (struct hsess *x = h->tab[i], *next; x != NULL; x = next) {
            next = x->hnext;
            while (x->subs != NULL)
                sub_remove(h, x, x->subs, 0);
            free(x);
        }
    memset(h->tab, 0, h->tab_size * sizeof(*h->tab));
    h->count = 0;
    /* The ingest and store listeners cannot be removed: they check closing. ingest and the
     * store never call them after the loop stopped (core_free order, as for fanout.c). */
    h->pending++;
    enter(h); /* frees now unless commands are in flight */
}
