/* rec.c - see rec.h: the stored forms of a request's record and the pass that deflates the
 * records of ended watches. runs on: core thread (encode / decode: any thread). */
#include "store/rec.h"
#include "store/zdict.h"
#include "store/gather.h"
#include "store/keys.h"
#include "store/command.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REC_TAG 'r' /* 'r' + zlib stream with the dictionary below */

/* The preset dictionary: the keys of a record in their order (protocol/event.c
 * proto_event_record) with common values, then the typed events' suffixes. Part of the stored
 * format (a new dictionary needs a new REC_TAG; the stream's dictionary checksum detects a
 * mismatch). The end is matched most cheaply: the record's own skeleton comes last. */
static const char dict[] =
    ",\"reorg\":{\"detectedAt\":,\"source\":\"\",\"reason\":\"\",\"details\":\"\",\"failReason\":"
    "\"DEPOSIT_REORGED\",\"action\":\"\",\"blockNumber\":,\"blockHash\":\"0x\",\"receiptStatus\":"
    "\"\"},\"metadata\":{\"orderId\":\"\",\"customer\":\"\"},\"event\":{\"type\":\"request.stuck\","
    "\"seq\":,\"createdAt\":17,\"stuckSince\":17}},\"event\":{\"type\":\"request.watch.ended\","
    "\"seq\":,\"createdAt\":17,\"reason\":\"final\"}}"
    "{\"requestId\":\"0x\",\"status\":\"success\",\"updatedAt\":17,\"originChainId\":,"
    "\"destinationChainId\":,\"inTxHashes\":[\"0x\"],\"txHashes\":[\"0x\"],\"failReason\":"
    "\"N/A\",\"refundFailReason\":\"N/A\",\"details\":null,\"referrer\":null,"
    "\"depositAddress\":null,\"quoteCreatedAt\":17,\"flags\":,\"source\":\"requests\","
    "\"observedAt\":17,\"publishedAt\":0,\"eventId\":\"\",\"seq\":,\"previousStatus\":"
    "\"submitted\",\"createdAt\":17,\"gen\":17";

int store_rec_encode(const char *text, size_t len, char **out, size_t *out_len)
{
    return store_zdict_deflate(REC_TAG, text, len, dict, sizeof(dict) - 1, out, out_len);
}

int store_rec_decode(const char *raw, size_t len, char **out, size_t *out_len)
{
    *out = NULL;
    if (len > 0 && raw[0] == '{') {
        *out_len = len;
        return 0;
    }
    if (len < 2 || raw[0] != REC_TAG)
        return -1;
    return store_zdict_inflate(raw + 1, len - 1, dict, sizeof(dict) - 1, out, out_len);
}

/* ---- the pass ------------------------------------------------------------------------------ */

struct rec_pass {
    struct event_base *base;
    struct store *s;
    unsigned np, part; /* partitions; the one stepped next */
    char maxlen[24];
    const char *compact; /* "1": deflate; "0": only the records typed events wait for */
    struct store_script scan_sc, put_sc;
    struct event *ev;
    struct step *busy;
};

/* A step in flight; detached (p = NULL) when the pass is freed before its reply. */
struct step {
    struct rec_pass *p;
    int more; /* the scan found a full batch: step again at once */
};

/* The step of p->part is over: the next partition, at once while a batch was full or
 * partitions are left in this round. */
static void step_end(struct rec_pass *p, int more)
{
    p->busy = NULL;
    if (!more)
        p->part = (p->part + 1) % p->np;
    evtimer_add_ms(p->ev, more || p->part != 0 ? 10 : REC_PASS_TICK_MS);
}

static void on_put(void *arg, const char *err, redisReply *r)
{
    struct step *st = arg;
    struct rec_pass *p = st->p;
    int more = st->more;
    free(st);
    if (p == NULL)
        return;
    if (err == store_err_server && r != NULL)
        log_warn("record compaction failed", "err=\"%.*s\"", (int)strcspn(r->str, "\r\n"),
                 r->str);
    step_end(p, err == NULL && more);
}

static int is_str(const redisReply *r)
{
    return r != NULL && r->type == REDIS_REPLY_STRING;
}

/* rec_scan.lua's reply: {more, {id, seq, plain rec, ...} to deflate, {id, rec, ...} whose
 * typed events wait (rec deflated, or plain already)}. One rec_put.lua call for all. */
static void on_scan(void *arg, const char *err, redisReply *r)
{
    struct step *st = arg;
    struct rec_pass *p = st->p;
    if (p == NULL) {
        free(st);
        return;
    }
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
                        r->element[0]->type != REDIS_REPLY_INTEGER ||
                        r->element[1]->type != REDIS_REPLY_ARRAY ||
                        r->element[2]->type != REDIS_REPLY_ARRAY))
        err = store_err_reply;
    if (err != NULL) {
        if (err == store_err_server && r != NULL)
            log_warn("record compaction failed", "err=\"%.*s\"",
                     (int)strcspn(r->str, "\r\n"), r->str);
        free(st);
        step_end(p, 0);
        return;
    }
    st->more = r->element[0]->integer != 0;
    const redisReply *cz = r->element[1], *rs = r->element[2];
    size_t max = 4 + 5 * (cz->elements / 3 + rs->elements / 2);
    const char **argv = xcalloc(max, sizeof(*argv));
    size_t *lens = xcalloc(max, sizeof(*lens));
    char **own = xcalloc(max, sizeof(*own));
    char k_rzq[KEY_MAX], now[24];
    const char *tag = store_part_tag(p->s, p->part);
    key_build(k_rzq, sizeof(k_rzq), tag, "rzq", NULL, NULL);
    snprintf(now, sizeof(now), "%lld", (long long)wall_ms());
    size_t n = 0, no = 0;
    const char *head[] = {k_rzq, tag, now, p->maxlen};
    for (; n < 4; n++) {
        argv[n] = head[n];
        lens[n] = strlen(head[n]);
    }
    for (size_t i = 0; i + 2 < cz->elements; i += 3) {
        const redisReply *id = cz->element[i], *seq = cz->element[i + 1],
                         *rec = cz->element[i + 2];
        char *z = NULL;
        size_t zl = 0;
        if (!is_str(id) || !is_str(seq) || !is_str(rec) ||
            store_rec_encode(rec->str, rec->len, &z, &zl) != 0 || zl >= rec->len) {
            free(z); /* not smaller (or not encodable): stays plain */
            continue;
        }
        own[no++] = z;
        const char *v[] = {"c", id->str, seq->str, rec->str, z};
        size_t l[] = {1, id->len, seq->len, rec->len, zl};
        for (int j = 0; j < 5; j++, n++) {
            argv[n] = v[j];
            lens[n] = l[j];
        }
    }
    for (size_t i = 0; i + 1 < rs->elements; i += 2) {
        const redisReply *id = rs->element[i], *rec = rs->element[i + 1];
        char *t = NULL;
        size_t tl = 0;
        if (!is_str(id) || !is_str(rec))
            continue;
        const char *op = "r";
        if (store_rec_decode(rec->str, rec->len, &t, &tl) != 0) {
            /* no base for its typed events: they are dropped (rec_put.lua "x"), once, rather
             * than waiting (and logged) at every step for ever */
            log_err("stored record unreadable: waiting typed events dropped", "request=%s",
                    id->str);
            op = "x";
            tl = 0;
        }
        if (t != NULL)
            own[no++] = t;
        const char *v[] = {op, id->str, "", rec->str, t != NULL ? t : rec->str};
        size_t l[] = {1, id->len, 0, rec->len, tl};
        for (int j = 0; j < 5; j++, n++) {
            argv[n] = v[j];
            lens[n] = l[j];
        }
    }
    int sent = n > 4 && store_eval(p->s, &p->put_sc, on_put, st, 1, (int)n, argv, lens) == 0;
    for (size_t i = 0; i < no; i++)
        free(own[i]);
    free(own);
    free(lens);
    free(argv);
    if (!sent) {
        int more = st->more && n > 4;
        free(st);
        step_end(p, more);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rec_pass *p = arg;
    if (p->busy != NULL)
        return;
    if (!store_ready(p->s)) {
        evtimer_add_ms(p->ev, REC_PASS_TICK_MS);
        return;
    }
    const char *tag = store_part_tag(p->s, p->part);
    char k_unwatch[KEY_MAX], k_rzq[KEY_MAX], batch[16];
    key_build(k_unwatch, sizeof(k_unwatch), tag, "unwatch", NULL, NULL);
    key_build(k_rzq, sizeof(k_rzq), tag, "rzq", NULL, NULL);
    snprintf(batch, sizeof(batch), "%d", REC_PASS_BATCH);
    const char *argv[] = {k_unwatch, k_rzq, tag, batch, p->compact};
    struct step *st = xcalloc(1, sizeof(*st));
    st->p = p;
    if (store_eval(p->s, &p->scan_sc, on_scan, st, 2, 5, argv, NULL) != 0) {
        free(st);
        evtimer_add_ms(p->ev, REC_PASS_TICK_MS);
        return;
    }
    p->busy = st;
}

struct rec_pass *rec_pass_new(struct event_base *base, struct store *s, long long stream_maxlen,
                              int compact)
{
    struct rec_pass *p = xcalloc(1, sizeof(*p));
    p->base = base;
    p->s = s;
    p->np = store_partitions(s);
    p->compact = compact ? "1" : "0";
    snprintf(p->maxlen, sizeof(p->maxlen), "%lld", stream_maxlen > 0 ? stream_maxlen : 100000);
    store_script_init(&p->scan_sc, "rec_scan");
    store_script_init(&p->put_sc, "rec_put");
    p->ev = evtimer_new(base, on_tick, p);
    evtimer_add_ms(p->ev, REC_PASS_TICK_MS);
    return p;
}

void rec_pass_free(struct rec_pass *p)
{
    if (p == NULL)
        return;
    if (p->busy != NULL)
        p->busy->p = NULL;
    event_free(p->ev);
    free(p);
}
