/* eventlog.c - see eventlog.h: pages of the event log through store_gather (one command per
 * partition, or one), the entries walked with store/events.h and copied into the page.
 * The script events_by_request.lua is registered on first use (file-scope, one per process).
 * runs on: core thread. */
#include "store/eventlog.h"
#include "protocol/proto.h"
#include "relay/common/util.h"
#include "store/events.h"
#include "store/gather.h"
#include "store/keys.h"
#include "store/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct store_script by_request_sc;

/* A page being gathered; freed after its callback. */
struct page {
    store_eventlog_cb *cb;
    void *arg;
    int merge;     /* replies tagged by partition, merged by (ms, seq, partition) */
    int limit;     /* the merge keeps the first limit entries (0: all) */
    int with_rec;  /* copy the records */
    unsigned part; /* not a merge: the partition of the one stream read */
    size_t n, cap;
    struct store_eventlog_entry *e;
};

static struct page *page_new(store_eventlog_cb *cb, void *arg, int merge, int limit,
                             int with_rec)
{
    struct page *pg = xcalloc(1, sizeof(*pg));
    *pg = (struct page){.cb = cb, .arg = arg, .merge = merge, .limit = limit,
                        .with_rec = with_rec};
    return pg;
}

static void page_add(struct page *pg, unsigned part, const struct store_event_entry *e)
{
    struct svec_pos pos;
    if (e->sid_len >= SVEC_ID_TEXT || proto_stream_id_parse(e->sid, &pos.ms, &pos.seq) != 0)
        return; /* not a stream id: Redis never sends one */
    if (pg->n == pg->cap) {
        pg->cap = pg->cap ? 2 * pg->cap : 64;
        pg->e = xrealloc(pg->e, pg->cap * sizeof(*pg->e));
    }
    struct store_eventlog_entry *o = &pg->e[pg->n++];
    memset(o, 0, sizeof(*o));
    o->part = part;
    o->pos = pos;
    memcpy(o->sid, e->sid, e->sid_len);
    if (pg->with_rec && e->rec != NULL) {
        o->rec = xstrndup(e->rec, e->rec_len); /* owned by the page */
        o->rec_len = e->rec_len;
    }
}

/* One stream's entries (XRANGE form). */
static int on_entries(void *arg, unsigned i, const char *err, redisReply *r)
{
    struct page *pg = arg;
    if (err != NULL)
        return 0;
    if (r->type != REDIS_REPLY_ARRAY)
        return -1;
    struct store_events_iter it;
    struct store_event_entry e;
    store_events_iter_range(&it, r);
    while (store_events_next(&it, &e))
        page_add(pg, pg->merge ? i : pg->part, &e);
    return 0;
}

static int entry_cmp(const void *a, const void *b)
{
    const struct store_eventlog_entry *x = a, *y = b;
    int c = svec_pos_cmp(&x->pos, &y->pos);
    return c != 0 ? c : x->part < y->part ? -1 : x->part > y->part;
}

static void on_page(void *arg, const char *err)
{
    struct page *pg = arg;
    size_t take = pg->n;
    if (err == NULL && pg->merge) {
        if (pg->n > 1)
            qsort(pg->e, pg->n, sizeof(*pg->e), entry_cmp);
        if (pg->limit > 0 && take > (size_t)pg->limit)
            take = (size_t)pg->limit;
    }
    pg->cb(pg->arg, err, err == NULL ? pg->e : NULL, err == NULL ? take : 0);
    for (size_t i = 0; i < pg->n; i++)
        free((char *)pg->e[i].rec);
    free(pg->e);
    free(pg);
}

/* The first id strictly after p, as an XRANGE start; 0 when nothing comes after p. */
static int start_after(char *buf, size_t n, const struct svec_pos *p)
{
    if (p->seq < UINT64_MAX)
        snprintf(buf, n, "%llu-%llu", (unsigned long long)p->ms, (unsigned long long)p->seq + 1);
    else if (p->ms < UINT64_MAX)
        snprintf(buf, n, "%llu-0", (unsigned long long)p->ms + 1);
    else
        return 0;
    return 1;
}

void store_eventlog_read(struct store *s, const struct svec_pos *after, int limit,
                         store_eventlog_cb *cb, void *arg)
{
    struct page *pg = page_new(cb, arg, 1, limit > 0 ? limit : 1, 1);
    struct store_gather *g = store_gather_new(s, on_entries, on_page, pg);
    char key[KEY_MAX], start[SVEC_ID_TEXT + 2], cnt[16];
    snprintf(cnt, sizeof(cnt), "%d", pg->limit);
    for (unsigned p = 0; p < store_partitions(s); p++) {
        snprintf(start, sizeof(start), "-");
        if (after != NULL && !start_after(start, sizeof(start), &after[p]))
            continue; /* the largest id: nothing after it */
        key_build(key, sizeof(key), store_part_tag(s, p), "events", NULL, NULL);
        const char *argv[] = {"XRANGE", key, start, "+", "COUNT", cnt};
        store_gather_argv(g, p, 6, argv, NULL);
    }
    store_gather_end(g);
}

/* XREVRANGE <tag>:events + - COUNT 1, entries tagged i. */
static void newest_in(struct store_gather *g, unsigned i, const char *tag)
{
    char key[KEY_MAX];
    key_build(key, sizeof(key), tag, "events", NULL, NULL);
    const char *argv[] = {"XREVRANGE", key, "+", "-", "COUNT", "1"};
    store_gather_argv(g, i, 6, argv, NULL);
}

void store_eventlog_newest(struct store *s, store_eventlog_cb *cb, void *arg)
{
    struct page *pg = page_new(cb, arg, 1, 0, 0);
    struct store_gather *g = store_gather_new(s, on_entries, on_page, pg);
    for (unsigned p = 0; p < store_partitions(s); p++)
        newest_in(g, p, store_part_tag(s, p));
    store_gather_end(g);
}

static unsigned part_of(const struct store *s, const char *id)
{
    return key_partition(id, strlen(id), store_partitions(s));
}

void store_eventlog_newest_of(struct store *s, const char *id, store_eventlog_cb *cb,
                              void *arg)
{
    struct page *pg = page_new(cb, arg, 0, 0, 0);
    pg->part = part_of(s, id);
    struct store_gather *g = store_gather_new(s, on_entries, on_page, pg);
    newest_in(g, 0, store_tag_of(s, id));
    store_gather_end(g);
}

void store_eventlog_of_request(struct store *s, const char *id, const struct svec_pos *after,
                               int limit, store_eventlog_cb *cb, void *arg)
{
    if (by_request_sc.name == NULL)
        store_script_init(&by_request_sc, "events_by_request");
    struct page *pg = page_new(cb, arg, 0, 0, 1);
    pg->part = part_of(s, id);
    struct store_gather *g = store_gather_new(s, on_entries, on_page, pg);
    char start[SVEC_ID_TEXT + 2];
    if (after != NULL && !start_after(start, sizeof(start), after)) {
        store_gather_end(g); /* the largest id: nothing after it */
        return;
    }
    const char *tag = store_tag_of(s, id);
    char k_tl[KEY_MAX], k_ev[KEY_MAX], k_req[KEY_MAX], cnt[16], a_ms[24] = "", a_seq[24] = "0";
    key_build(k_tl, sizeof(k_tl), tag, "tl", id, NULL);
    key_build(k_req, sizeof(k_req), tag, "req", id, NULL);
    key_build(k_ev, sizeof(k_ev), tag, "events", NULL, NULL);
    snprintf(cnt, sizeof(cnt), "%d", limit);
    if (after != NULL) {
        snprintf(a_ms, sizeof(a_ms), "%llu", (unsigned long long)after->ms);
        snprintf(a_seq, sizeof(a_seq), "%llu", (unsigned long long)after->seq);
    }
    const char *argv[] = {k_tl, k_ev, k_req, a_ms, a_seq, cnt};
    store_gather_eval(g, 0, &by_request_sc, 3, 6, argv, NULL);
    store_gather_end(g);
}
