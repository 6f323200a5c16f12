/* history.c - the past of a request, read from Redis for one session: snapshots (the
 * last-known state a new subscription starts from: HMGET of the request's record, or the
 * newest requests of the status sets a broad subscription matches, merged across partitions
 * when there are several), starting to track an id
 * a snapshot found untracked, and history answers (the request's timeline: LRANGE of its
 * stream ids, then one XRANGE per entry, answered in one frame). State: internal.h.
 * runs on: core thread. */
#include "relay/dash/internal.h"
#include "protocol/event.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/ingest/track.h"
#include "store/events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- snapshots ---------------------------------------------------------------------------- */

static void on_tracked(void *arg, const char *err, size_t created)
{
    struct hub *h = arg;
    if (dash_enter(h))
        return;
    if (err != NULL)
        log_warn("dashboard subscription could not start tracking", "err=%s", err);
    else if (created > 0)
        log_info("tracking started by a dashboard subscription", "created=%zu", created);
}

void dash_track_one(struct hub *h, const char *id)
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
    if (dash_enter(h)) {
        free(op);
        return;
    }
    struct hsess *x;
    struct hsub *u = dash_op_sub(op, &x);
    if (u == NULL)
        goto out;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        json_t *d = dash_sub_data(u);
        if (u->kind == SUB_BROAD)
            json_object_set_new(d, "requestId", json_string(op->id));
        dash_send_json(h, x->id, NULL,
                       json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "type", "error", "status", "error",
                                 "error", "code", "unavailable", "message",
                                 "the last-known state could not be read (Redis unavailable)",
                                 "data", d));
        goto out;
    }
    const redisReply *rec = r->element[0], *trk = r->element[1];
    if (op->track && (trk->type != REDIS_REPLY_STRING || strcmp(trk->str, "1") != 0))
        dash_track_one(h, op->id);
    if (rec->type == REDIS_REPLY_STRING) {
        struct status_event ev;
        status_event_init(&ev);
        size_t len = 0;
        char *f = dash_encode_frame(h, rec->str, rec->len, 1, u->live_at, &ev, &len);
        if (f != NULL && (u->kind == SUB_ID ||
                          dash_broad_match(&u->f, ev.status ? ev.status : "",
                                           ev.origin_chain_id, ev.destination_chain_id)))
            dash_send_text(h, x->id, op->id, f, len);
        free(f);
        status_event_cleanup(&ev);
    }
out:
    free(op);
}

void dash_snapshot_one(struct hub *h, struct hsess *x, struct hsub *u, const char *id,
                       int track)
{
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag_of(h->c->store, id), "req", id, NULL);
    struct op *op = dash_op_new(h, x->id, u->no, id);
    op->track = track;
    h->pending++;
    if (store_cmd(h->c->store, on_snapshot, op, "HMGET %s rec trk", k) != 0) {
        h->pending--;
        free(op);
        dash_send_json(h, x->id, NULL,
                       json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "type", "error", "status", "error",
                                 "error", "code", "unavailable", "message",
                                 "the last-known state could not be read (Redis unavailable)",
                                 "data", dash_sub_data(u)));
        if (track)
            dash_track_one(h, id); /* fails too while Redis is down; logged */
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
    if (dash_enter(h)) {
        free(b);
        return;
    }
    b->outstanding--;
    struct hsess *x;
    struct hsub *u = dash_op_sub(&b->op, &x);
    if (u != NULL && err == NULL && r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < r->elements && b->issued < b->limit; i++)
            if (r->element[i]->type == REDIS_REPLY_STRING &&
                r->element[i]->len <= PROTO_MAX_ID) {
                dash_snapshot_one(h, x, u, r->element[i]->str, 0);
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

/* The same with N > 1 partitions (docs/partitions.md): each set of every partition is read
 * with its scores (first seen), the answers are merged newest first and the newest `limit`
 * get their snapshot. */
struct bmerge {
    struct op op;
    int limit, outstanding;
    size_t n, cap;
    struct bitem {
        double score;
        char id[PROTO_MAX_ID + 1];
    } *e;
};

static int bitem_cmp(const void *a, const void *b)
{
    const struct bitem *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1; /* newest first */
    return strcmp(y->id, x->id);
}

static void bmerge_done(struct hub *h, struct bmerge *b)
{
    if (--b->outstanding > 0)
        return;
    struct hsess *x;
    struct hsub *u = dash_op_sub(&b->op, &x);
    if (u != NULL) {
        if (b->n > 1)
            qsort(b->e, b->n, sizeof(*b->e), bitem_cmp);
        for (size_t i = 0; i < b->n && i < (size_t)b->limit; i++)
            dash_snapshot_one(h, x, u, b->e[i].id, 0);
    }
    free(b->e);
    free(b);
}

static void on_broad_part(void *arg, const char *err, redisReply *r)
{
    struct bmerge *b = arg;
    struct hub *h = b->op.h;
    if (dash_enter(h)) {
        if (--b->outstanding == 0) {
            free(b->e);
            free(b);
        }
        return;
    }
    if (err == NULL && r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
            const redisReply *id = r->element[i], *sc = r->element[i + 1];
            if (id->type != REDIS_REPLY_STRING || id->len > PROTO_MAX_ID ||
                sc->type != REDIS_REPLY_STRING)
                continue;
            if (b->n == b->cap) {
                b->cap = b->cap ? 2 * b->cap : 64;
                b->e = xrealloc(b->e, b->cap * sizeof(*b->e));
            }
            b->e[b->n].score = strtod(sc->str, NULL);
            memcpy(b->e[b->n].id, id->str, id->len + 1);
            b->n++;
        }
    bmerge_done(h, b);
}

static void snapshot_broad_parts(struct hub *h, struct hsess *x, struct hsub *u, int limit)
{
    struct bmerge *b = xcalloc(1, sizeof(*b));
    b->op.h = h;
    b->op.sess = x->id;
    b->op.no = u->no;
    b->limit = limit;
    b->outstanding = 1; /* ours until every command is issued */
    char k[KEY_MAX], lim[24];
    snprintf(lim, sizeof(lim), "%d", limit - 1);
    size_t n = u->f.nstatus > 0 ? u->f.nstatus : 1;
    for (unsigned p = 0; p < h->np; p++)
        for (size_t i = 0; i < n; i++) {
            const char *tag = store_part_tag(h->c->store, p);
            if (u->f.nstatus > 0)
                key_build(k, sizeof(k), tag, "st", u->f.status[i], NULL);
            else
                key_build(k, sizeof(k), tag, "all", NULL, NULL);
            h->pending++;
            b->outstanding++;
            if (store_cmd(h->c->store, on_broad_part, b, "ZREVRANGE %s 0 %s WITHSCORES", k,
                          lim) != 0) {
                h->pending--;
                b->outstanding--;
            }
        }
    bmerge_done(h, b);
}

void dash_fresh_snapshot(struct hub *h, struct hsess *x, struct hsub *u, int limit)
{
    if (u->kind == SUB_ID)
        dash_snapshot_one(h, x, u, u->id, !u->anon); /* anonymous: relay/ingest/anon.c */
    else if (h->np > 1 && limit > 0)
        snapshot_broad_parts(h, x, u, limit);
    else
        snapshot_broad(h, x, u, limit);
}

/* ---- history ------------------------------------------------------------------------------ */

struct hist {
    struct op op;
    size_t n, got;
    size_t max_bytes;  /* frames beyond this (oldest first) are left out: "truncated" */
    char **frames; /* in timeline order */
    size_t *lens;
};

struct hist_item {
    struct hist *hs;
    size_t i;
};

/* One history answer of session sess is over (answered or not). */
static void inflight_done(struct hub *h, uint64_t sess)
{
    struct hsess *x = dash_sess_find(h, sess);
    if (x != NULL && x->hist_inflight > 0)
        x->hist_inflight--;
}

static void hist_finish(struct hub *h, struct hist *hs)
{
    inflight_done(h, hs->op.sess);
    struct hsess *x = dash_sess_find(h, hs->op.sess);
    if (x != NULL && !x->closing) {
        /* the frames are JSON already: {"type":"history","status":"success","data":{"event",
         * "filters":{"id"},"events":[frame, ...]}} (ids are [A-Za-z0-9_:.-]: no escaping) */
        char head[PROTO_MAX_ID + 128];
        int hl = snprintf(head, sizeof(head),
                          "{\"type\":\"history\",\"status\":\"success\",\"data\":{\"event\":"
                          "\"" EVENT_NAME "\",\"filters\":{\"id\":\"%s\"},\"events\":[",
                          hs->op.id);
        /* the newest frames that fit in max_bytes: older ones are left out */
        size_t total = (size_t)hl + 32, from = hs->n;
        while (from > 0 && (hs->frames[from - 1] == NULL ||
                            total + hs->lens[from - 1] + 1 <= hs->max_bytes)) {
            from--;
            total += hs->frames[from] ? hs->lens[from] + 1 : 0;
        }
        int truncated = from > 0;
        char *out = xmalloc(total);
        memcpy(out, head, (size_t)hl);
        size_t k = (size_t)hl;
        int first = 1;
        for (size_t i = from; i < hs->n; i++) {
            if (hs->frames[i] == NULL)
                continue;
            if (!first)
                out[k++] = ',';
            first = 0;
            memcpy(out + k, hs->frames[i], hs->lens[i]);
            k += hs->lens[i];
        }
        static const char tail[] = "]}}", ttail[] = "],\"truncated\":true}}";
        const char *t = truncated ? ttail : tail;
        size_t tl = truncated ? sizeof(ttail) - 1 : sizeof(tail) - 1;
        memcpy(out + k, t, tl);
        k += tl;
        dash_send_text(h, x->id, NULL, out, k);
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
    if (dash_enter(h)) {
        if (++hs->got == hs->n) { /* the last one frees the collection */
            for (size_t j = 0; j < hs->n; j++)
                free(hs->frames[j]);
            free(hs->frames);
            free(hs->lens);
            free(hs);
        }
        return;
    }
    struct store_events_iter ei;
    struct store_event_entry e;
    store_events_iter_range(&ei, err == NULL ? r : NULL);
    if (store_events_next(&ei, &e) && e.rec != NULL) {
        struct status_event ev;
        status_event_init(&ev);
        hs->frames[i] = dash_encode_frame(h, e.rec, e.rec_len, 0, e.sid, &ev, &hs->lens[i]);
        status_event_cleanup(&ev);
    }
    if (++hs->got == hs->n)
        hist_finish(h, hs);
}

static void on_hist_list(void *arg, const char *err, redisReply *r)
{
    struct hist *hs = arg;
    struct hub *h = hs->op.h;
    if (dash_enter(h)) {
        free(hs);
        return;
    }
    struct hsess *x = dash_sess_find(h, hs->op.sess);
    if (x == NULL || x->closing) {
        inflight_done(h, hs->op.sess);
        free(hs);
        return;
    }
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        inflight_done(h, hs->op.sess);
        dash_send_json(h, x->id, NULL,
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
        if (store_events_range_in(h->c->store, store_tag_of(h->c->store, hs->op.id), sid, sid, 0,
                                  on_hist_entry, it) != 0) {
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

void dash_history(struct hub *h, struct hsess *x, const char *id, int trusted)
{
    char k[KEY_MAX], lim[16];
    key_build(k, sizeof(k), store_tag_of(h->c->store, id), "tl", id, NULL);
    snprintf(lim, sizeof(lim), "-%d", trusted ? HUB_HISTORY_MAX : HUB_HISTORY_ANON_MAX);
    struct hist *hs = xcalloc(1, sizeof(*hs));
    hs->max_bytes = trusted ? HUB_HISTORY_BYTES : HUB_HISTORY_ANON_BYTES;
    hs->op.h = h;
    hs->op.sess = x->id;
    snprintf(hs->op.id, sizeof(hs->op.id), "%s", id);
    h->pending++;
    x->hist_inflight++; /* until hist_finish, or the list's error */
    if (store_cmd(h->c->store, on_hist_list, hs, "LRANGE %s %s -1", k, lim) != 0) {
        h->pending--;
        x->hist_inflight--;
        free(hs);
        dash_send_json(h, x->id, NULL,
                       json_pack("{s:s,s:s,s:{s:s,s:s}}", "type", "history", "status", "error",
                                 "error", "code", "unavailable", "message",
                                 "the history could not be read (Redis unavailable)"));
    }
}
