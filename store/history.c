/* history.c - see history.h: the dashboards' reads of a request's past. Key names come from
 * store/keys.h (req, st, ct, tl), the event entries' layout from store/events.h.
 * runs on: core thread. */
#include "store/history.h"
#include "protocol/proto.h"
#include "protocol/stream_vec.h"
#include "relay/common/util.h"
#include "store/events.h"
#include "store/keys.h"
#include "store/rec.h"
#include "store/command.h"

#include <stdint.h>
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
    char *plain = NULL; /* a deflated record, inflated (store/rec.h) */
    size_t plen = 0;
    int have = rec->type == REDIS_REPLY_STRING &&
               store_rec_decode(rec->str, rec->len, &plain, &plen) == 0;
    struct store_history_record out = {
        .rec = have ? (plain != NULL ? plain : rec->str) : NULL,
        .rec_len = have ? plen : 0,
        .tracked = trk->type == REDIS_REPLY_STRING && strcmp(trk->str, "1") == 0,
        .fx = fx->type == REDIS_REPLY_STRING ? fx->str : NULL,
        .fx_len = fx->type == REDIS_REPLY_STRING ? fx->len : 0,
    };
    q.cb(q.arg, NULL, &out);
    free(plain);
}

int store_history_record(struct store *s, const char *id, store_history_record_cb *cb,
                         void *arg)
{
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag_of(s, id), "req", id, NULL);
    struct rec_req *q = xcalloc(1, sizeof(*q));
    q->cb = cb;
    q->arg = arg;
    /* req_get.lua: an HMGET with whole values (store/chunk_lib.lua: a packed hash) */
    static struct store_script get_sc;
    if (get_sc.name == NULL)
        store_script_init(&get_sc, "req_get");
    const char *argv[] = {k, "rec", "trk", "fx"};
    if (store_eval(s, &get_sc, on_record, q, 1, 4, argv, NULL) != 0) {
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
                key_build(k, sizeof(k), tag, "ct", NULL, NULL);
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
    int limit;
    unsigned pending;  /* answers of the two reads still to come */
    const char *err;   /* the first read that failed, NULL: none */
    struct svec_pos *ids; /* the ids of the hash's fields and of the list, merged */
    size_t nids, capids;
    unsigned places;   /* how many of field, tl1, list held ids (more than one: merge) */
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

static void tl_add(struct tl *t, struct svec_pos v)
{
    if (t->nids == t->capids) {
        t->capids = t->capids ? 2 * t->capids : 16;
        t->ids = xrealloc(t->ids, t->capids * sizeof(*t->ids));
    }
    t->ids[t->nids++] = v;
}

/* A decimal stream id "ms-seq" of len bytes into *v (protocol/proto.h proto_stream_id_parse,
 * with its "-seq" required: every id written to a timeline has one); 0 when it is one, -1
 * when not. */
static int tl_parse_sid(const char *s, size_t len, struct svec_pos *v)
{
    char buf[SVEC_ID_TEXT];
    if (len == 0 || len >= sizeof(buf) || memchr(s, '-', len) == NULL || memchr(s, '\0', len))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return proto_stream_id_parse(buf, &v->ms, &v->seq);
}

static int tl_hexdigit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The stream ids of a hash's "tl" field (store/tl_lib.lua: the first id as it is, "ms-seq" in
 * decimal, then "," and each later id as the hexadecimal difference of its ms to the first
 * id's, "-<seq>" in hexadecimal when the seq is not 0), each passed to add in order; a
 * malformed entry ends them. Returns how many. */
static size_t tl_decode(const char *f, size_t len, void (*add)(void *arg, struct svec_pos v),
                        void *arg)
{
    const char *comma = memchr(f, ',', len);
    size_t i = comma != NULL ? (size_t)(comma - f) : len, n = 0;
    struct svec_pos v, first;
    if (tl_parse_sid(f, i, &first) != 0)
        return 0;
    add(arg, first);
    n++;
    while (i < len) {
        if (f[i++] != ',')
            return n;
        uint64_t x[2] = {0, 0};
        for (int part = 0; part < 2; part++) {
            size_t from = i;
            int d;
            for (; i < len && (d = tl_hexdigit(f[i])) >= 0; i++) {
                if (x[part] > (UINT64_MAX - (uint64_t)d) / 16)
                    return n;
                x[part] = x[part] * 16 + (uint64_t)d;
            }
            if (i == from)
                return n; /* malformed: the ids before it */
            if (part == 1 || i == len || f[i] != '-')
                break;
            i++;
        }
        if (i < len && f[i] != ',')
            return n;
        if (x[0] > UINT64_MAX - first.ms)
            return n;
        v.ms = first.ms + x[0];
        v.seq = x[1];
        add(arg, v);
        n++;
    }
    return n;
}

static int tl_sid_cmp(const void *a, const void *b)
{
    return svec_pos_cmp(a, b);
}

static void tl_finish(struct tl *t)
{
    t->cb(t->arg, NULL, t->items, t->n);
    for (size_t i = 0; i < t->n; i++) {
        free((char *)t->items[i].sid);
        free((char *)t->items[i].rec);
    }
    free(t->items);
    free(t->ids);
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

/* The ids of more than one place (an older version's layout, or one an older process added
 * during an upgrade) into stream order without repeats; one place is in order already. */
static void tl_merge_ids(struct tl *t)
{
    if (t->places < 2 || t->nids < 2)
        return;
    qsort(t->ids, t->nids, sizeof(*t->ids), tl_sid_cmp);
    size_t w = 1;
    for (size_t i = 1; i < t->nids; i++)
        if (tl_sid_cmp(&t->ids[i], &t->ids[w - 1]) != 0)
            t->ids[w++] = t->ids[i];
    t->nids = w;
}

/* Both reads are in: merge the ids, keep the newest limit and read each entry. */
static void tl_read(struct tl *t)
{
    if (t->err != NULL) {
        t->cb(t->arg, t->err, NULL, 0);
        free(t->ids);
        free(t);
        return;
    }
    tl_merge_ids(t);
    size_t from = t->nids > (size_t)t->limit ? t->nids - (size_t)t->limit : 0;
    t->n = t->nids - from;
    if (t->n == 0) {
        tl_finish(t);
        return;
    }
    t->items = xcalloc(t->n, sizeof(*t->items));
    size_t issued = 0;
    for (size_t i = 0; i < t->n; i++) {
        char sid[48];
        snprintf(sid, sizeof(sid), "%llu-%llu", (unsigned long long)t->ids[from + i].ms,
                 (unsigned long long)t->ids[from + i].seq);
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

static void tl_add_cb(void *arg, struct svec_pos v)
{
    tl_add(arg, v);
}

/* HMGET of the hash's "tl" (store/tl_lib.lua) and "tl1" (an older version's one id). */
static void on_tl_fields(void *arg, const char *err, redisReply *r)
{
    struct tl *t = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        if (t->err == NULL)
            t->err = err != NULL ? err : store_err_server;
    } else {
        const redisReply *f = r->element[0], *one = r->element[1];
        struct svec_pos v;
        if (f->type == REDIS_REPLY_STRING && tl_decode(f->str, f->len, tl_add_cb, t) > 0)
            t->places++;
        if (one->type == REDIS_REPLY_STRING && tl_parse_sid(one->str, one->len, &v) == 0) {
            tl_add(t, v);
            t->places++;
        }
    }
    if (--t->pending == 0)
        tl_read(t);
}

static void on_tl_list(void *arg, const char *err, redisReply *r)
{
    struct tl *t = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        if (t->err == NULL)
            t->err = err != NULL ? err : store_err_server;
    } else {
        size_t had = t->nids;
        struct svec_pos v;
        for (size_t i = 0; i < r->elements; i++)
            if (r->element[i]->type == REDIS_REPLY_STRING &&
                tl_parse_sid(r->element[i]->str, r->element[i]->len, &v) == 0)
                tl_add(t, v);
        if (t->nids > had)
            t->places++;
    }
    if (--t->pending == 0)
        tl_read(t);
}

int store_history_timeline(struct store *s, const char *id, int limit,
                           store_history_timeline_cb *cb, void *arg)
{
    char k[KEY_MAX], req[KEY_MAX], lim[16];
    snprintf(lim, sizeof(lim), "-%d", limit);
    struct tl *t = xcalloc(1, sizeof(*t));
    t->cb = cb;
    t->arg = arg;
    t->s = s;
    t->limit = limit;
    snprintf(t->tag, sizeof(t->tag), "%s", store_tag_of(s, id));
    key_build(k, sizeof(k), t->tag, "tl", id, NULL);
    key_build(req, sizeof(req), t->tag, "req", id, NULL);
    t->pending = 2;
    if (store_cmd(s, on_tl_fields, t, "HMGET %s tl tl1", req) != 0) {
        free(t);
        return -1;
    }
    if (store_cmd(s, on_tl_list, t, "LRANGE %s %s -1", k, lim) != 0) {
        t->err = store_err_disconnected; /* answered once the first read is back */
        t->pending--;
    }
    return 0;
}
