/* facts.c - see facts.h: the stored facts value (zlib with a preset dictionary) and its
 * read and compare-and-set write. runs on: core thread (encode / decode: any thread). */
#include "store/facts.h"
#include "relay/common/util.h"
#include "store/gather.h"
#include "store/keys.h"
#include "store/rec.h"
#include "store/zdict.h"
#include "store/command.h"
#include "store/store.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FACTS_MAX_TEXT ZDICT_MAX_TEXT /* a plain text read as it is: the same bound */
#define FACTS_TAG 'z'                /* 'z' + zlib stream with the dictionary below */
#define FACTS_DELTA_TAG 'd'          /* 'd' + zlib stream with the next newer version's text */

/* The preset dictionary: what every facts text repeats (the keys in their canonical order,
 * the route's currency objects, common values). Part of the stored format: changing it makes
 * the values stored before unreadable (the zlib stream names the dictionary's Adler-32, so a
 * change is detected, not misread); a new dictionary needs a new FACTS_TAG. The end of the
 * dictionary is matched most cheaply, so the most repeated text comes last. */
static const char dict[] =
    "\"currencyIn\":null,\"currencyOut\":null,\"refundCurrency\":null,\"depositAddress\":{"
    "\"address\":\"0x\",\"type\":\"strict\",\"depositor\":\"0x\",\"depositTxHash\":\"0x\","
    "\"recoveryAddress\":\"0x\"},\"appFees\":null,\"supersededByRequestId\":null,"
    "\"requestType\":\"Bridge\",\"referrer\":null,\"refundTo\":null,"
    "\"fees\":{\"quoted\":{\"gas\":\"\",\"fixed\":\"\",\"price\":\"\",\"swap\":{\"usd\":\"\","
    "\"amount\":\"\",\"amountFormatted\":\"\"},\"execution\":{\"usd\":\"\",\"amount\":\"\","
    "\"amountFormatted\":\"\"},\"platform\":{\"usd\":\"0.000000\",\"amount\":\"0\","
    "\"amountFormatted\":\"0\"},\"app\":{\"usd\":\"0.000000\",\"amount\":\"0\","
    "\"amountFormatted\":\"0\"},\"sponsored\":{\"usd\":\"0.000000\",\"amount\":\"0\","
    "\"amountFormatted\":\"0\"}},\"actual\":null,\"currency\":{\"chainId\":,\"address\":\"0x"
    "\",\"symbol\":\"\",\"name\":\"\",\"decimals\":}},"
    "\"route\":{\"includedSwapSources\":[],\"includedOriginSwapSources\":[],"
    "\"includedDestinationSwapSources\":[],\"quoted\":{\"origin\":{\"inputCurrency\":{"
    "\"currency\":{\"chainId\":,\"address\":\"0x0000000000000000000000000000000000000000\","
    "\"symbol\":\"ETH\",\"name\":\"Ether\",\"decimals\":18,\"metadata\":{\"logoURI\":\"https://"
    "\",\"verified\":true,\"isNative\":true}},\"amount\":\"\",\"amountFormatted\":\"\","
    "\"amountUsd\":\"\"},\"outputCurrency\":{\"currency\":{\"chainId\":,\"address\":\"0x\","
    "\"symbol\":\"USDC\",\"name\":\"USD Coin\",\"decimals\":6,\"metadata\":{\"logoURI\":"
    "\"https://\",\"verified\":true}},\"amount\":\"\",\"amountFormatted\":\"\","
    "\"amountUsd\":\"\"},\"router\":\"relay\"},\"destination\":{\"inputCurrency\":{"
    "\"currency\":{\"chainId\":,\"address\":\"0x\",\"symbol\":\"\",\"name\":\"\","
    "\"decimals\":,\"metadata\":{\"logoURI\":\"\",\"verified\":true}},\"amount\":\"\","
    "\"amountFormatted\":\"\",\"amountUsd\":\"\"},\"outputCurrency\":{\"currency\":{"
    "\"chainId\":,\"address\":\"0x\",\"symbol\":\"\",\"name\":\"\",\"decimals\":,"
    "\"metadata\":{\"logoURI\":\"\",\"verified\":true}},\"amount\":\"\","
    "\"amountFormatted\":\"\",\"amountUsd\":\"\"},\"router\":\"relay\"}},\"actual\":null,"
    "\"rate\":\"\"},\"orderId\":\"0x\",\"inTxs\":[{\"txHash\":\"0x\",\"chainId\":,"
    "\"explorerUrl\":\"https://\",\"block\":,\"timestamp\":000,\"status\":\"success\","
    "\"type\":\"onchain\",\"fee\":\"\",\"feeUsd\":null}],\"outTxs\":[{\"txHash\":\"0x\","
    "\"chainId\":,\"explorerUrl\":\"https:///tx/0x\",\"block\":,\"timestamp\":000,"
    "\"status\":\"success\",\"type\":\"onchain\",\"fee\":\"\",\"feeUsd\":null}],"
    ",\"minimumAmount\":null,\"basis\":\"actual\"},\"currencyOut\":{\"chainId\":,"
    "\"address\":\"0x\",\"symbol\":\"\",\"name\":\"\",\"decimals\":,\"amount\":\"\","
    "\"amountFormatted\":\"\",\"amountUsd\":\"\",\"minimumAmount\":null,\"basis\":\"quoted\"},"
    "{\"createdAt\":,\"updatedAt\":,\"user\":\"0x\",\"sender\":\"0x\",\"recipient\":\"0x\","
    "\"refundTo\":\"0x\",\"referrer\":null,\"requestType\":\"Bridge\",\"depositAddress\":null,"
    "\"currencyIn\":{\"chainId\":,\"address\":\"0x\",\"symbol\":\"\",\"name\":\"\","
    "\"decimals\":,\"amount\":\"\",\"amountFormatted\":\"\",\"amountUsd\":\"\"";

int store_facts_encode(const char *text, size_t len, char **out, size_t *out_len)
{
    return store_zdict_deflate(FACTS_TAG, text, len, dict, sizeof(dict) - 1, out, out_len);
}

int store_facts_encode_delta(const char *text, size_t len, const char *newer, size_t nlen,
                             char **out, size_t *out_len)
{
    /* zlib keeps the last 32 KiB of a dictionary: a facts text is far below that mostly;
     * beyond, the stream is still exact, only larger */
    return store_zdict_deflate(FACTS_DELTA_TAG, text, len, newer, nlen, out, out_len);
}

int store_facts_decode(const char *raw, size_t len, char **out, size_t *out_len)
{
    *out = NULL;
    if (len > 0 && raw[0] == '{') { /* a plain text (written by hand, or a later format) */
        if (len > FACTS_MAX_TEXT)
            return -1;
        *out = xstrndup(raw, len);
        *out_len = len;
        return 0;
    }
    if (len < 2 || raw[0] != FACTS_TAG)
        return -1;
    return store_zdict_inflate(raw + 1, len - 1, dict, sizeof(dict) - 1, out, out_len);
}

int store_facts_decode_older(const char *raw, size_t len, const char *newer, size_t nlen,
                             char **out, size_t *out_len)
{
    *out = NULL;
    if (len > 0 && raw[0] != FACTS_DELTA_TAG)
        return store_facts_decode(raw, len, out, out_len);
    if (len < 2 || newer == NULL)
        return -1;
    return store_zdict_inflate(raw + 1, len - 1, newer, nlen, out, out_len);
}

/* ---- read and compare-and-set -------------------------------------------------------------- */

static struct store_script get_sc;

struct get_op {
    store_facts_get_cb *cb;
    void *arg;
};

static void on_get(void *arg, const char *err, redisReply *r)
{
    struct get_op *op = arg;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 4))
        err = store_err_reply;
    if (err != NULL) {
        op->cb(op->arg, err, NULL);
        free(op);
        return;
    }
    const redisReply *fx = r->element[0], *rep = r->element[1], *ls = r->element[2],
                     *lv = r->element[3];
    struct store_facts_stored st = {
        .raw = fx->type == REDIS_REPLY_STRING ? fx->str : NULL,
        .raw_len = fx->type == REDIS_REPLY_STRING ? fx->len : 0,
        .replaces = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1,
        .last_older = lv->type == REDIS_REPLY_STRING && ls->type == REDIS_REPLY_STRING
                          ? lv->str : NULL,
        .last_older_len = lv->type == REDIS_REPLY_STRING ? lv->len : 0,
        .last_seq = ls->type == REDIS_REPLY_STRING ? ls->str : NULL,
    };
    op->cb(op->arg, NULL, &st);
    free(op);
}

int store_facts_get(struct store *s, const char *id, store_facts_get_cb *cb, void *arg)
{
    if (get_sc.name == NULL)
        store_script_init(&get_sc, "facts_get");
    char key[KEY_MAX];
    key_build(key, sizeof(key), store_tag_of(s, id), "req", id, NULL);
    struct get_op *op = xmalloc(sizeof(*op));
    *op = (struct get_op){cb, arg};
    const char *argv[] = {key};
    if (store_eval(s, &get_sc, on_get, op, 1, 1, argv, NULL) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

static struct store_script put_sc;

struct put_op {
    store_facts_put_cb *cb;
    void *arg;
};

static void on_put(void *arg, const char *err, redisReply *r)
{
    struct put_op *op = arg;
    enum store_facts_put_result res = STORE_FACTS_GONE;
    const redisReply *rec = NULL;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
                        r->element[0]->type != REDIS_REPLY_INTEGER ||
                        r->element[0]->integer < -1 || r->element[0]->integer > 1))
        err = store_err_reply;
    if (err == NULL) {
        res = (enum store_facts_put_result)r->element[0]->integer;
        if (r->elements > 1 && r->element[1]->type == REDIS_REPLY_STRING)
            rec = r->element[1];
    }
    char *plain = NULL; /* a deflated record, inflated (store/rec.h) */
    size_t plen = 0;
    if (rec != NULL && store_rec_decode(rec->str, rec->len, &plain, &plen) != 0)
        rec = NULL; /* unreadable: no follow-up event */
    if (op->cb != NULL)
        op->cb(op->arg, err, res, plain != NULL ? plain : rec ? rec->str : NULL,
               rec != NULL ? plen : 0);
    free(plain);
    free(op);
}

int store_facts_put(struct store *s, const char *id, const char *expect, size_t elen,
                    const char *val, size_t vlen, const char *older, size_t olen,
                    const char *relast, size_t rlen, const char *last_seq, const char *status,
                    store_facts_put_cb *cb, void *arg)
{
    if (put_sc.name == NULL)
        store_script_init(&put_sc, "facts_put");
    char key[KEY_MAX];
    key_build(key, sizeof(key), store_tag_of(s, id), "req", id, NULL);
    const char *argv[] = {key, expect != NULL ? expect : "", val, older != NULL ? older : "",
                          relast != NULL ? relast : "", last_seq != NULL ? last_seq : "",
                          status != NULL ? status : ""};
    size_t lens[] = {strlen(key), expect != NULL ? elen : 0, vlen, older != NULL ? olen : 0,
                     relast != NULL ? rlen : 0, last_seq != NULL ? strlen(last_seq) : 0,
                     status != NULL ? strlen(status) : 0};
    struct put_op *op = xmalloc(sizeof(*op));
    *op = (struct put_op){cb, arg};
    if (store_eval(s, &put_sc, on_put, op, 1, 7, argv, lens) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

/* ---- the version each event carries ------------------------------------------------------ */

static struct store_script at_sc;

struct at_op {
    store_facts_at_cb *cb;
    void *arg;
    char **texts;  /* n entries */
    size_t n;
    size_t *order; /* the pair indexes, grouped by partition */
    size_t *start; /* per partition: its first position in order (np + 1 entries) */
};

static int on_at_reply(void *arg, unsigned p, const char *err, redisReply *r)
{
    struct at_op *op = arg;
    if (err != NULL)
        return 0; /* the gather completes with it */
    size_t from = op->start[p], cnt = op->start[p + 1] - from;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != cnt)
        return -1;
    for (size_t j = 0; j < cnt; j++) {
        const redisReply *v = r->element[j];
        size_t i = op->order[from + j];
        if (v->type != REDIS_REPLY_ARRAY || v->elements == 0)
            continue; /* no facts for that event */
        /* the version and every newer one, newest last: decode from the newest back */
        char *text = NULL;
        size_t len = 0;
        for (size_t e = v->elements; e-- > 0;) {
            const redisReply *x = v->element[e];
            char *older = NULL;
            if (x->type != REDIS_REPLY_STRING ||
                store_facts_decode_older(x->str, x->len, text, len, &older, &len) != 0) {
                free(text);
                text = NULL; /* unreadable: the event goes without */
                break;
            }
            free(text);
            text = older;
        }
        op->texts[i] = text;
    }
    return 0;
}

static void on_at_done(void *arg, const char *err)
{
    struct at_op *op = arg;
    op->cb(op->arg, err, err == NULL ? op->texts : NULL, op->n);
    for (size_t i = 0; i < op->n; i++)
        free(op->texts[i]);
    free(op->texts);
    free(op->order);
    free(op->start);
    free(op);
}

int store_facts_at(struct store *s, const char *const *ids, const uint64_t *seqs, size_t n,
                   store_facts_at_cb *cb, void *arg)
{
    if (!store_ready(s))
        return -1;
    if (at_sc.name == NULL)
        store_script_init(&at_sc, "facts_at");
    unsigned np = store_partitions(s);
    struct at_op *op = xcalloc(1, sizeof(*op));
    *op = (struct at_op){.cb = cb, .arg = arg, .n = n};
    op->texts = xcalloc(n ? n : 1, sizeof(*op->texts));
    op->order = xcalloc(n ? n : 1, sizeof(*op->order));
    op->start = xcalloc(np + 1, sizeof(*op->start));
    unsigned *part = xcalloc(n ? n : 1, sizeof(*part));
    for (size_t i = 0; i < n; i++) {
        part[i] = key_partition(ids[i], strlen(ids[i]), np);
        op->start[part[i] + 1]++;
    }
    for (unsigned p = 0; p < np; p++)
        op->start[p + 1] += op->start[p];
    size_t *fill = xcalloc(np, sizeof(*fill));
    for (size_t i = 0; i < n; i++)
        op->order[op->start[part[i]] + fill[part[i]]++] = i;
    free(fill);
    free(part);
    struct store_gather *g = store_gather_new(s, on_at_reply, on_at_done, op);
    for (unsigned p = 0; p < np; p++) {
        size_t from = op->start[p], cnt = op->start[p + 1] - from;
        if (cnt == 0)
            continue;
        /* KEYS: each request once; ARGV: (key index, seq) per pair */
        char (*keys)[KEY_MAX] = xcalloc(cnt, sizeof(*keys));
        char (*nums)[2][24] = xcalloc(cnt, sizeof(*nums));
        const char **argv = xcalloc(3 * cnt, sizeof(*argv));
        size_t nk = 0;
        for (size_t j = 0; j < cnt; j++) {
            const char *id = ids[op->order[from + j]];
            char key[KEY_MAX];
            key_build(key, sizeof(key), store_tag_of(s, id), "req", id, NULL);
            size_t k = 0;
            while (k < nk && strcmp(keys[k], key) != 0)
                k++;
            if (k == nk)
                memcpy(keys[nk++], key, sizeof(key));
            snprintf(nums[j][0], sizeof(nums[j][0]), "%zu", k + 1);
            snprintf(nums[j][1], sizeof(nums[j][1]), "%llu",
                     (unsigned long long)seqs[op->order[from + j]]);
        }
        for (size_t k = 0; k < nk; k++)
            argv[k] = keys[k];
        for (size_t j = 0; j < cnt; j++) {
            argv[nk + 2 * j] = nums[j][0];
            argv[nk + 2 * j + 1] = nums[j][1];
        }
        store_gather_eval(g, p, &at_sc, (int)nk, (int)(nk + 2 * cnt), argv, NULL);
        free(argv);
        free(nums);
        free(keys);
    }
    store_gather_end(g);
    return 0;
}
