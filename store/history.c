/* history.c - see history.h: the dashboards' reads of a request's past. Key names come from
 * store/keys.h (req, st, all, tl), the event entries' layout from store/events.h.
 * runs on: core thread. */
#include "store/history.h"
#include "protocol/proto.h"
#include "relay/common/util.h"
#include "store/events.h"
#include "store/keys.h"
#include "store/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a request's record ------------------------------------------------------------------ */

struct rec_req {
    store_history_record_cb *cb;
    void *arg;
};

static void on_record(void *arg, const char *err, redisReply *r)
{
    struct rec_req q = *(struct rec_req *)arg;
    free(arg);
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 3) {
        q.cb(q.arg, err != NULL ? err : store_err_server, NULL);
        return;
    }
    const redisReply *rec = r->element[0], *trk = r->element[1], *fx = r->element[2];
    struct store_history_record out = {
        .rec = rec->type == REDIS_REPLY_STRING ? rec->str : NULL,
        .rec_len = rec->type == REDIS_REPLY_STRING ? rec->len : 0,
        .tracked = trk->type == REDIS_REPLY_STRING && strcmp(trk->str, "1") == 0,
        .fx = fx->type == REDIS_REPLY_STRING ? fx->str : NULL,
        .fx_len = fx->type == REDIS_REPLY_STRING ? fx->len : 0,
    };
    q.cb(q.arg, NULL, &out);
}

int store_history_record(struct store *s, const char *id, store_history_record_cb *cb,
                         void *arg)
{
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag_of(s, id), "req", id, NULL);
    struct rec_req *q = xcalloc(1, sizeof(*q));
    q->cb = cb;
    q->arg = arg;
    if (store_cmd(s, on_record, q, "HMGET %s rec trk fx", k) != 0) {
        free(q);
        return -1;
    }
    return 0;
}

/* ---- the newest ids of status sets --------------------------------------------------------- */

struct newest {
    store_history_ids_cb *cb;
    void *arg;
    int limit, scored;       /* scored: several partitions, merged by score */
    unsigned pending;        /* answers still to come, + 1 while sending */
    size_t n, cap;
    struct nitem {
        size_t cmd, at;      /* one partition: the order of the sets, then of the reply */
        double score;
        char id[PROTO_MAX_ID + 1];
    } *e;
};

struct narg {
    struct newest *b;
    size_t cmd;
};

static int nitem_cmp(const void *a, const void *b)
{
    const struct nitem *x = a, *y = b;
    if (x->cmd != y->cmd || x->at != y->at) /* one partition: as read */
        return x->cmd != y->cmd ? (x->cmd < y->cmd ? -1 : 1) : (x->at < y->at ? -1 : 1);
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1; /* newest first */
    return strcmp(y->id, x->id);
}

static void newest_done(struct newest *b)
{
    if (--b->pending > 0)
        return;
    if (b->n > 1)
        qsort(b->e, b->n, sizeof(*b->e), nitem_cmp);
    size_t n = b->n < (size_t)b->limit ? b->n : (size_t)b->limit;
    const char **ids = xcalloc(n + 1, sizeof(*ids));
    for (size_t i = 0; i < n; i++)
        ids[i] = b->e[i].id;
    b->cb(b->arg, ids, n);
    free(ids);
    free(b->e);
    free(b);
}

static void newest_add(struct newest *b, size_t cmd, const redisReply *id, double score)
{
    if (id->type != REDIS_REPLY_STRING || id->len > PROTO_MAX_ID)
        return;
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->e = xrealloc(b->e, b->cap * sizeof(*b->e));
    }
    struct nitem *it = &b->e[b->n];
    it->cmd = b->scored ? 0 : cmd;
    it->at = b->scored ? 0 : b->n;
    it->score = score;
    memcpy(it->id, id->str, id->len + 1);
    b->n++;
}

static void on_newest(void *arg, const char *err, redisReply *r)
{
    struct narg a = *(struct narg *)arg;
    struct newest *b = a.b;
    free(arg);
    if (err == NULL && r->type == REDIS_REPLY_ARRAY) {
        size_t step = b->scored ? 2 : 1;
        for (size_t i = 0; i + step - 1 < r->elements; i += step) {
            const redisReply *sc = b->scored ? r->element[i + 1] : NULL;
            if (sc != NULL && sc->type != REDIS_REPLY_STRING)
                continue;
            newest_add(b, a.cmd, r->element[i], sc != NULL ? strtod(sc->str, NULL) : 0);
        }
    }
    newest_done(b);
}

int store_history_newest(struct store *s, const char *const *statuses, size_t nstatus,
                         int limit, store_history_ids_cb *cb, void *arg)
{
    struct newest *b = xcalloc(1, sizeof(*b));
    b->cb = cb;
    b->arg = arg;
    b->limit = limit;
    b->scored = store_partitions(s) > 1;
    b->pending = 1; /* ours until every command is sent */
    char k[KEY_MAX], lim[24];
    snprintf(lim, sizeof(lim), "%d", limit - 1);
    size_t n = nstatus > 0 ? nstatus : 1, sent = 0;
    for (unsigned p = 0; p < store_partitions(s); p++)
        for (size_t i = 0; i < n; i++) {
            const char *tag = store_part_tag(s, p);
            if (nstatus > 0)
                key_build(k, sizeof(k), tag, "st", statuses[i], NULL);
            else
                key_build(k, sizeof(k), tag, "all", NULL, NULL);
            struct narg *a = xcalloc(1, sizeof(*a));
            a->b = b;
            a->cmd = p * n + i;
            b->pending++;
            int rc = b->scored
                         ? store_cmd(s, on_newest, a, "ZREVRANGE %s 0 %s WITHSCORES", k, lim)
                         : store_cmd(s, on_newest, a, "ZREVRANGE %s 0 %s", k, lim);
            if (rc != 0) {
                b->pending--;
                free(a);
                continue;
            }
            sent++;
        }
    if (sent == 0) {
        free(b);
        return -1;
    }
    newest_done(b);
    return 0;
}

/* ---- a request's timeline ---------------------------------------------------------------- */

struct tl {
    store_history_timeline_cb *cb;
    void *arg;
    struct store *s;
    char tag[KEY_TAG_MAX];
    char req[KEY_MAX]; /* the request's hash: "tl1" of a request with one event */
    size_t n, got;
    struct store_history_item *items; /* sid / rec: heap copies */
};

struct tl_item {
    struct tl *t;
    size_t i;
};

static char *copy_n(const char *s, size_t n)
{
    char *c = xmalloc(n + 1);
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

static void tl_finish(struct tl *t)
{
    t->cb(t->arg, NULL, t->items, t->n);
    for (size_t i = 0; i < t->n; i++) {
        free((char *)t->items[i].sid);
        free((char *)t->items[i].rec);
    }
    free(t->items);
    free(t);
}

static void on_tl_entry(void *arg, const char *err, redisReply *r)
{
    struct tl_item it = *(struct tl_item *)arg;
    struct tl *t = it.t;
    free(arg);
    struct store_events_iter ei;
    struct store_event_entry e;
    store_events_iter_range(&ei, err == NULL ? r : NULL);
    if (store_events_next(&ei, &e) && e.rec != NULL) {
        t->items[it.i].sid = copy_n(e.sid, e.sid_len);
        t->items[it.i].rec = copy_n(e.rec, e.rec_len);
        t->items[it.i].rec_len = e.rec_len;
    }
    if (++t->got == t->n)
        tl_finish(t);
}

/* Read the n stream ids sids[i] (NULL reads as "0-0": no entry) into t->items. */
static void tl_read(struct tl *t, redisReply **sids, size_t n)
{
    t->n = n;
    if (t->n == 0) {
        tl_finish(t);
        return;
    }
    t->items = xcalloc(t->n, sizeof(*t->items));
    size_t issued = 0;
    for (size_t i = 0; i < t->n; i++) {
        const char *sid = sids[i]->str ? sids[i]->str : "0-0";
        struct tl_item *it = xcalloc(1, sizeof(*it));
        it->t = t;
        it->i = i;
        if (store_events_range_in(t->s, t->tag, sid, sid, 0, on_tl_entry, it) != 0) {
            free(it);
            continue;
        }
        issued++;
    }
    if (issued < t->n) { /* Redis went away half way: answer with what will come back */
        t->got += t->n - issued;
        if (issued == 0)
            tl_finish(t);
    }
}

/* A request with one event keeps its stream id in its hash (store/watch_lib.lua tl_push). */
static void on_tl_one(void *arg, const char *err, redisReply *r)
{
    struct tl *t = arg;
    if (err != NULL) {
        t->cb(t->arg, err, NULL, 0);
        free(t);
        return;
    }
    tl_read(t, &r, r->type == REDIS_REPLY_STRING ? 1 : 0);
}

static void on_tl_list(void *arg, const char *err, redisReply *r)
{
    struct tl *t = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        t->cb(t->arg, err != NULL ? err : store_err_server, NULL, 0);
        free(t);
        return;
    }
    if (r->elements == 0) {
        if (store_cmd(t->s, on_tl_one, t, "HGET %s tl1", t->req) != 0) {
            t->cb(t->arg, store_err_disconnected, NULL, 0);
            free(t);
        }
        return;
    }
    tl_read(t, r->element, r->elements);
}

int store_history_timeline(struct store *s, const char *id, int limit,
                           store_history_timeline_cb *cb, void *arg)
{
    char k[KEY_MAX], lim[16];
    key_build(k, sizeof(k), store_tag_of(s, id), "tl", id, NULL);
    snprintf(lim, sizeof(lim), "-%d", limit);
    struct tl *t = xcalloc(1, sizeof(*t));
    t->cb = cb;
    t->arg = arg;
    t->s = s;
    snprintf(t->tag, sizeof(t->tag), "%s", store_tag_of(s, id));
    key_build(t->req, sizeof(t->req), t->tag, "req", id, NULL);
    if (store_cmd(s, on_tl_list, t, "LRANGE %s %s -1", k, lim) != 0) {
        free(t);
        return -1;
    }
    return 0;
}
