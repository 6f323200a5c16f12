/* requests.c - see requests.h: the request hashes and indexes for the REST views, through
 * store_gather (one command per partition). The scripts are registered on first use
 * (file-scope, one per process). runs on: core thread. */
#include "store/requests.h"
#include "store/ref_page.h"
#include "store/rec.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "store/gather.h"
#include "store/keys.h"
#include "store/command.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The hash fields, in the order req_get.lua's HMGET asks for them (requests_read.lua asks for
 * SRF_REST in this order too); both answer whole values (a hash the record pass packed keeps
 * values over 64 B in chunks, store/chunk_lib.lua). */
static const struct {
    unsigned bit;
    const char *name;
    size_t off;
} fields[] = {
    {SRF_REC, "rec", offsetof(struct store_request, rec)},
    {SRF_SEQ, "seq", offsetof(struct store_request, seq)},
    {SRF_STATUS, "status", offsetof(struct store_request, status)},
    {SRF_META, "meta", offsetof(struct store_request, meta)},
    {SRF_FIRST, "first", offsetof(struct store_request, first)},
    {SRF_TRK, "trk", offsetof(struct store_request, trk)},
    {SRF_SRC, "src", offsetof(struct store_request, src)},
    {SRF_WATCH, "watch", offsetof(struct store_request, watch)},
    {SRF_WU, "wu", offsetof(struct store_request, wu)},
    {SRF_CF, "cf", offsetof(struct store_request, cf)},
    {SRF_FACTS, "fx", offsetof(struct store_request, facts)},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static struct store_script page_sc, read_sc, get_sc;
/* The index key kinds of enum store_req_index (store/keys.h). */
static const char *const index_kinds[] = {"ct", "st", "act"};

static void scripts_init(void)
{
    if (page_sc.name == NULL) {
        store_script_init(&page_sc, "requests_page");
        store_script_init(&read_sc, "requests_read");
        store_script_init(&get_sc, "req_get");
    }
}

/* The asked fields of one request from an HMGET-like array (values in fields[] order): a
 * value that is not a string, and a missing element, read as absent. id: the request's id for
 * the log line of an unreadable record (NULL when the caller no longer has it). */
static void fill(struct store_request *req, unsigned mask, const redisReply *arr, const char *id)
{
    memset(req, 0, sizeof(*req));
    size_t j = 0;
    for (size_t f = 0; f < NFIELDS; f++) {
        if (!(mask & fields[f].bit))
            continue;
        const redisReply *v = arr != NULL && arr->type == REDIS_REPLY_ARRAY &&
                                      j < arr->elements ? arr->element[j] : NULL;
        j++;
        if (v == NULL || v->type != REDIS_REPLY_STRING)
            continue;
        struct store_field *out = (struct store_field *)((char *)req + fields[f].off);
        *out = (struct store_field){v->str, v->len};
        req->found = 1;
    }
    req->tracked = req->trk.str != NULL && req->trk.len == 1 && req->trk.str[0] == '1';
    if (req->rec.str != NULL &&
        store_rec_decode(req->rec.str, req->rec.len, &req->rec_own, &req->rec.len) != 0) {
        log_err("stored record unreadable", "id=%s len=%zu", id != NULL ? id : "-", req->rec.len);
        req->rec = (struct store_field){NULL, 0};
    } else if (req->rec_own != NULL) {
        req->rec.str = req->rec_own;
    }
}

static size_t count_of(unsigned mask)
{
    size_t n = 0;
    for (size_t f = 0; f < NFIELDS; f++)
        n += (mask & fields[f].bit) != 0;
    return n;
}

/* ---- one request ------------------------------------------------------------------------ */

struct get_op {
    store_request_cb *cb;
    void *arg;
    unsigned mask;
    char id[]; /* the request's id (for a log line) */
};

static void on_get(void *arg, const char *err, redisReply *r)
{
    struct get_op *op = arg;
    struct store_request req;
    if (err == NULL &&
        (r->type != REDIS_REPLY_ARRAY || r->elements != count_of(op->mask)))
        err = store_err_reply;
    if (err == NULL)
        fill(&req, op->mask, r, op->id);
    op->cb(op->arg, err, err == NULL ? &req : NULL);
    if (err == NULL)
        free(req.rec_own);
    free(op);
}

int store_request_get(struct store *s, const char *id, unsigned mask, store_request_cb *cb,
                      void *arg)
{
    scripts_init();
    char key[KEY_MAX];
    const char *argv[1 + NFIELDS] = {key}; /* req_get.lua: an HMGET with whole values */
    int argc = 1;
    key_build(key, sizeof(key), store_tag_of(s, id), "req", id, NULL);
    for (size_t f = 0; f < NFIELDS; f++)
        if (mask & fields[f].bit)
            argv[argc++] = fields[f].name;
    size_t idlen = strlen(id);
    struct get_op *op = xmalloc(sizeof(*op) + idlen + 1);
    op->cb = cb;
    op->arg = arg;
    op->mask = mask;
    memcpy(op->id, id, idlen + 1);
    if (store_eval(s, &get_sc, on_get, op, 1, argc, argv, NULL) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

/* ---- a page of an index, every partition's merged ------------------------------------------ */

void store_requests_page(struct store *s, const struct store_req_query *q,
                         store_req_page_cb *cb, void *arg)
{
    scripts_init();
    struct ref_page *pg = ref_page_new(q->limit > 0 ? q->limit : 1, cb, arg);
    char k[KEY_MAX], want[16], max[24] = "";
    snprintf(want, sizeof(want), "%d", ref_page_limit(pg) + 1); /* one more: a next page? */
    if (q->index == STORE_REQ_STUCK)
        snprintf(max, sizeof(max), "%lld", (long long)q->max);
    const char *argv[] = {k, q->after_score ? q->after_score : "", q->after_id ? q->after_id : "",
                          want, max};
    struct store_gather *g = store_gather_new(s, ref_page_part, ref_page_done, pg);
    for (unsigned p = 0; p < store_partitions(s); p++) {
        key_build(k, sizeof(k), store_part_tag(s, p), index_kinds[q->index],
                  q->index == STORE_REQ_STATUS ? q->status : NULL, NULL);
        store_gather_eval(g, p, &page_sc, 1, 5, argv, NULL);
    }
    store_gather_end(g);
}

/* ---- the records of a page's ids, partition by partition ---------------------------------- */

struct req_read {
    store_request_each_fn *each;
    store_requests_done_cb *done;
    void *arg;
    size_t *idx[KEY_MAX_PARTITIONS]; /* per partition: the indexes of its ids, in order */
    size_t nidx[KEY_MAX_PARTITIONS];
};

/* requests_read.lua: one HMGET-like array per key. */
static int on_read_part(void *arg, unsigned p, const char *err, redisReply *r)
{
    struct req_read *rd = arg;
    if (err != NULL)
        return 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != rd->nidx[p])
        return -1;
    for (size_t j = 0; j < rd->nidx[p]; j++) {
        struct store_request req;
        fill(&req, SRF_REST, r->element[j], NULL);
        rd->each(rd->arg, rd->idx[p][j], &req);
        free(req.rec_own);
    }
    return 0;
}

static void on_read(void *arg, const char *err)
{
    struct req_read *rd = arg;
    rd->done(rd->arg, err);
    for (unsigned p = 0; p < KEY_MAX_PARTITIONS; p++)
        free(rd->idx[p]);
    free(rd);
}

void store_requests_read(struct store *s, const char *const *ids, size_t n,
                         store_request_each_fn *each, store_requests_done_cb *done, void *arg)
{
    scripts_init();
    unsigned np = store_partitions(s);
    struct req_read *rd = xcalloc(1, sizeof(*rd));
    *rd = (struct req_read){.each = each, .done = done, .arg = arg};
    for (size_t i = 0; i < n; i++) {
        unsigned p = key_partition(ids[i], strlen(ids[i]), np);
        if (rd->idx[p] == NULL)
            rd->idx[p] = xcalloc(n, sizeof(size_t));
        rd->idx[p][rd->nidx[p]++] = i;
    }
    struct store_gather *g = store_gather_new(s, on_read_part, on_read, rd);
    char **keys = xcalloc(n + 1, sizeof(*keys));
    for (unsigned p = 0; p < np; p++) {
        size_t k = rd->nidx[p];
        if (k == 0)
            continue;
        for (size_t j = 0; j < k; j++) {
            keys[j] = xmalloc(KEY_MAX);
            key_build(keys[j], KEY_MAX, store_part_tag(s, p), "req", ids[rd->idx[p][j]], NULL);
        }
        store_gather_eval(g, p, &read_sc, (int)k, (int)k, (const char **)keys, NULL);
        for (size_t j = 0; j < k; j++)
            free(keys[j]);
    }
    free(keys);
    store_gather_end(g);
}
