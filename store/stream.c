/* stream.c - see stream.h: the event stream read across partitions. One gather per call: a
 * command per partition, each reply decoded into the gather as it comes (entries copied out),
 * and once the last partition answered the entries are merged and the caller's callback runs
 * once. The gather owns everything it collects and frees it after the callback.
 * runs on: core thread. */
#include "store/stream.h"
#include "protocol/proto.h"
#include "relay/common/util.h"
#include "store/events.h"
#include "store/keys.h"
#include "store/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum gather_kind { G_READ, G_RANGE, G_NEWEST, G_INFO };

struct gather {
    enum gather_kind kind;
    store_stream_cb *cb;
    void *arg;
    unsigned pending;                    /* answers still to come, + 1 while sending */
    int failed;
    int *ok;
    size_t *count;
    struct store_stream_entry *e;        /* rid / rec: heap copies */
    size_t n, cap;
    struct svec_pos *newest;
    struct store_stream_part_info *info;
    unsigned np;
};

/* One command's argument: its gather and partition. */
struct garg {
    struct gather *g;
    unsigned part;
};

static char *copy_n(const char *s, size_t n)
{
    if (s == NULL)
        return NULL;
    char *c = xmalloc(n + 1);
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

static void gather_add(struct gather *g, unsigned part, const struct svec_pos *at,
                       const struct store_event_entry *e)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->e = xrealloc(g->e, g->cap * sizeof(*g->e));
    }
    struct store_stream_entry *p = &g->e[g->n++];
    p->at = *at;
    p->part = part;
    p->rid = copy_n(e->rid, e->rid_len);
    p->rid_len = e->rid_len;
    p->rec = copy_n(e->rec, e->rec_len);
    p->rec_len = e->rec_len;
}

static void gather_free(struct gather *g)
{
    for (size_t i = 0; i < g->n; i++) {
        free((char *)g->e[i].rid);
        free((char *)g->e[i].rec);
    }
    free(g->e);
    free(g->ok);
    free(g->count);
    free(g->newest);
    free(g->info);
    free(g);
}

static int entry_cmp(const void *a, const void *b)
{
    const struct store_stream_entry *x = a, *y = b;
    int c = svec_pos_cmp(&x->at, &y->at);
    if (c != 0)
        return c;
    return x->part < y->part ? -1 : x->part > y->part;
}

static void gather_done(struct gather *g)
{
    if (--g->pending > 0)
        return;
    if (g->n > 1)
        qsort(g->e, g->n, sizeof(*g->e), entry_cmp);
    struct store_stream_result r = {
        .np = g->np, .failed = g->failed, .ok = g->ok, .count = g->count, .e = g->e,
        .n = g->n, .newest = g->newest, .info = g->info,
    };
    g->cb(g->arg, &r);
    gather_free(g);
}

/* The entry's id as a position; -1 when it is not a stream id. */
static int entry_at(const struct store_event_entry *e, struct svec_pos *at)
{
    if (e->sid_len >= SVEC_ID_TEXT)
        return -1;
    return proto_stream_id_parse(e->sid, &at->ms, &at->seq);
}

/* The value of field `name` in a flat [name, value, ...] reply; NULL when absent. */
static const redisReply *flat_value(const redisReply *r, const char *name)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->str && strcmp(r->element[i]->str, name) == 0)
            return r->element[i + 1];
    return NULL;
}

static void read_pos(const redisReply *v, struct svec_pos *out, int *has)
{
    if (v != NULL && v->str != NULL && proto_stream_id_parse(v->str, &out->ms, &out->seq) == 0 &&
        has != NULL)
        *has = 1;
}

static void decode_info(struct store_stream_part_info *q, const redisReply *r)
{
    read_pos(flat_value(r, "last-generated-id"), &q->last, NULL);
    read_pos(flat_value(r, "max-deleted-entry-id"), &q->maxdel, &q->has_maxdel);
    const redisReply *added = flat_value(r, "entries-added"), *length = flat_value(r, "length");
    q->whole = added != NULL && length != NULL && added->type == REDIS_REPLY_INTEGER &&
               length->type == REDIS_REPLY_INTEGER && added->integer == length->integer;
    const redisReply *fe = flat_value(r, "first-entry");
    if (fe != NULL && fe->type == REDIS_REPLY_ARRAY && fe->elements > 0)
        read_pos(fe->element[0], &q->first, &q->has_first);
}

static void decode_entries(struct gather *g, unsigned p, const redisReply *reply)
{
    struct store_events_iter it;
    struct store_event_entry e;
    g->count[p] = g->kind == G_READ ? store_events_iter_read(&it, reply)
                                    : store_events_iter_range(&it, reply);
    while (store_events_next(&it, &e)) {
        struct svec_pos at;
        if (entry_at(&e, &at) != 0)
            continue;
        if (g->kind == G_NEWEST) {
            g->newest[p] = at;
            break;
        }
        gather_add(g, p, &at, &e);
    }
}

static void on_reply(void *arg, const char *err, redisReply *reply)
{
    struct garg *a = arg;
    struct gather *g = a->g;
    unsigned p = a->part;
    free(a);
    int array = err == NULL && reply->type == REDIS_REPLY_ARRAY;
    if (g->kind == G_INFO && err == store_err_server && reply->str &&
        strstr(reply->str, "no such key") != NULL) {
        g->ok[p] = 1; /* no stream yet: nothing was ever written or it is all gone */
    } else if (array || (g->kind != G_INFO && g->kind != G_RANGE && err == NULL &&
                         reply->type == REDIS_REPLY_NIL)) {
        g->ok[p] = 1;
        if (g->kind == G_INFO)
            decode_info(&g->info[p], reply);
        else
            decode_entries(g, p, reply);
    } else {
        g->failed = 1;
    }
    gather_done(g);
}

static int send_one(struct store *s, struct gather *g, unsigned p, const struct svec_pos *after,
                    int count)
{
    char k[KEY_MAX], at[SVEC_ID_TEXT + 1] = "(", cnt[16];
    key_build(k, sizeof(k), store_part_tag(s, p), "events", NULL, NULL);
    if (after != NULL)
        svec_format(at + 1, sizeof(at) - 1, &after[p], 1);
    snprintf(cnt, sizeof(cnt), "%d", count);
    struct garg *a = xcalloc(1, sizeof(*a));
    a->g = g;
    a->part = p;
    int rc;
    switch (g->kind) {
    case G_READ:
        rc = store_cmd(s, on_reply, a, "XREAD COUNT %s STREAMS %s %s", cnt, k, at + 1);
        break;
    case G_RANGE:
        rc = store_cmd(s, on_reply, a, "XRANGE %s %s + COUNT %s", k, at, cnt);
        break;
    case G_NEWEST:
        rc = store_events_last_in(s, store_part_tag(s, p), on_reply, a);
        break;
    default:
        rc = store_cmd(s, on_reply, a, "XINFO STREAM %s", k);
        break;
    }
    if (rc != 0)
        free(a);
    return rc;
}

static int gather_start(struct store *s, enum gather_kind kind, const struct svec_pos *after,
                        int count, store_stream_cb *cb, void *arg)
{
    struct gather *g = xcalloc(1, sizeof(*g));
    g->kind = kind;
    g->cb = cb;
    g->arg = arg;
    g->np = store_partitions(s);
    g->ok = xcalloc(g->np, sizeof(*g->ok));
    g->count = xcalloc(g->np, sizeof(*g->count));
    g->newest = xcalloc(g->np, sizeof(*g->newest));
    g->info = xcalloc(g->np, sizeof(*g->info));
    g->pending = 1; /* ours until every command is sent */
    unsigned sent = 0;
    for (unsigned p = 0; p < g->np; p++) {
        g->pending++;
        if (send_one(s, g, p, after, count) != 0) {
            g->pending--;
            g->failed = 1;
            continue;
        }
        sent++;
    }
    if (sent == 0) {
        gather_free(g);
        return -1;
    }
    gather_done(g);
    return 0;
}

int store_stream_read(struct store *s, const struct svec_pos *after, int count,
                      store_stream_cb *cb, void *arg)
{
    return gather_start(s, G_READ, after, count, cb, arg);
}

int store_stream_range(struct store *s, const struct svec_pos *after, int count,
                       store_stream_cb *cb, void *arg)
{
    return gather_start(s, G_RANGE, after, count, cb, arg);
}

int store_stream_newest(struct store *s, store_stream_cb *cb, void *arg)
{
    return gather_start(s, G_NEWEST, NULL, 0, cb, arg);
}

int store_stream_info(struct store *s, store_stream_cb *cb, void *arg)
{
    return gather_start(s, G_INFO, NULL, 0, cb, arg);
}

enum store_stream_gap store_stream_gap_check(const struct store_stream_part_info *info,
                                             unsigned np, const struct svec_pos *from,
                                             struct svec_pos *oldest, int *any_first)
{
    int unknown = 0, trimmed = 0;
    *any_first = 0;
    for (unsigned p = 0; p < np; p++) {
        const struct store_stream_part_info *q = &info[p];
        oldest[p] = q->has_first ? q->first : (struct svec_pos){0, 0};
        *any_first |= q->has_first;
        if (svec_pos_cmp(&from[p], &q->last) > 0)
            unknown = 1;
        else if (!(np > 1 && q->whole) &&
                 ((q->has_first && svec_pos_cmp(&from[p], &q->first) < 0) ||
                  (q->has_maxdel && svec_pos_cmp(&from[p], &q->maxdel) < 0) ||
                  (!q->has_first && svec_pos_cmp(&from[p], &q->last) < 0)))
            trimmed = 1;
    }
    return unknown ? STORE_STREAM_GAP_UNKNOWN
                   : trimmed ? STORE_STREAM_GAP_TRIMMED : STORE_STREAM_GAP_NONE;
}
