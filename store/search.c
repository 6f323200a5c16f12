/* search.c - see search.h: the search index arguments, the facts indexing call and the page of
 * a search over every partition (store_gather). The scripts are registered on first use
 * (file-scope, one per process). runs on: core thread (the pure helpers: any). */
#include "store/search.h"
#include "store/ref_page.h"
#include "protocol/json.h"
#include "relay/common/util.h"
#include "store/gather.h"
#include "store/keys.h"
#include "store/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct store_script index_sc, page_sc;

static void scripts_init(void)
{
    if (index_sc.name == NULL) {
        store_script_init(&index_sc, "search_index");
        store_script_init(&page_sc, "search_page");
    }
}

/* ---- values and entries ------------------------------------------------------------------- */

size_t store_search_norm(char *out, size_t cap, const char *v, size_t len)
{
    if (cap > 0)
        out[0] = '\0';
    if (v == NULL || len == 0 || len > STORE_SEARCH_MAX_VALUE || len >= cap)
        return 0;
    int fold = len >= 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch <= ' ' || ch >= 0x7f) {
            out[0] = '\0';
            return 0;
        }
        out[i] = (char)(fold && ch >= 'A' && ch <= 'Z' ? ch + ('a' - 'A') : ch);
    }
    out[len] = '\0';
    return len;
}

void store_search_ents_free(struct store_search_ents *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
    *e = (struct store_search_ents){0};
}

int store_search_text_ok(const char *v, size_t len)
{
    if (v == NULL || len == 0 || len > STORE_SEARCH_MAX_VALUE)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)v[i] < ' ' || v[i] == 0x7f)
            return 0;
    return 1;
}

/* Append "<kind>:<normal form of v>" unless v has none or it is listed already. Referrers
 * (raw) are kept as given (store_search_text_ok). */
static void ents_add(struct store_search_ents *e, const char *kind, const char *v, size_t len,
                     int raw)
{
    char norm[STORE_SEARCH_MAX_VALUE + 1];
    if (raw) {
        if (!store_search_text_ok(v, len))
            return;
        memcpy(norm, v, len);
        norm[len] = '\0';
    } else if (v == NULL || store_search_norm(norm, sizeof(norm), v, len) == 0) {
        return;
    }
    size_t kl = strlen(kind), n = kl + 1 + len;
    char *s = xmalloc(n + 1);
    memcpy(s, kind, kl);
    s[kl] = ':';
    memcpy(s + kl + 1, norm, len + 1);
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->v[i], s) == 0) {
            free(s);
            return;
        }
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 8;
        e->v = xrealloc(e->v, e->cap * sizeof(*e->v));
    }
    e->v[e->n++] = s;
}

static void ents_add_str(struct store_search_ents *e, const char *kind, const char *v, int raw)
{
    if (v != NULL)
        ents_add(e, kind, v, strlen(v), raw);
}

/* The record's entries into e (all of them). */
static void event_entries(const struct status_event *ev, struct store_search_ents *e)
{
    for (size_t i = 0; i < ev->in_tx_hashes.n; i++)
        ents_add_str(e, "tx", ev->in_tx_hashes.v[i], 0);
    for (size_t i = 0; i < ev->tx_hashes.n; i++)
        ents_add_str(e, "tx", ev->tx_hashes.v[i], 0);
    if (ev->deposit != NULL) {
        ents_add_str(e, "tx", ev->deposit->deposit_tx_hash, 0);
        ents_add_str(e, "dep", ev->deposit->address, 0);
        ents_add_str(e, "w", ev->deposit->depositor, 0);
    }
    ents_add_str(e, "ref", ev->referrer, 1);
}

void store_search_event_entries(const struct status_event *last, const struct status_event *ev,
                                struct store_search_ents *out)
{
    struct store_search_ents now = {0}, before = {0};
    event_entries(ev, &now);
    if (last != NULL)
        event_entries(last, &before);
    for (size_t i = 0; i < now.n; i++) {
        int seen = 0;
        for (size_t j = 0; j < before.n && !seen; j++)
            seen = strcmp(now.v[i], before.v[j]) == 0;
        if (!seen) {
            if (out->n == out->cap) {
                out->cap = out->cap ? 2 * out->cap : 8;
                out->v = xrealloc(out->v, out->cap * sizeof(*out->v));
            }
            out->v[out->n++] = now.v[i];
            now.v[i] = NULL;
        }
    }
    store_search_ents_free(&now);
    store_search_ents_free(&before);
}

static void facts_str(struct store_search_ents *e, const char *kind, const struct pjson *obj,
                      const char *key, int raw)
{
    const struct pjson *v = obj != NULL ? pjson_get(obj, key) : NULL;
    if (v != NULL && v->type == PJSON_STR)
        ents_add(e, kind, v->u.str.s, v->u.str.n, raw);
}

int store_search_facts_entries(const char *facts, size_t len, struct store_search_ents *out,
                               int64_t *created_at)
{
    struct pjson_doc doc;
    *created_at = -1;
    if (facts == NULL || pjson_parse_max(facts, len, 1u << 20, &doc, NULL) != 0)
        return -1;
    const struct pjson *root = doc.root;
    if (root == NULL || root->type != PJSON_OBJ) {
        pjson_free(&doc);
        return -1;
    }
    const struct pjson *ca = pjson_get(root, "createdAt");
    if (ca != NULL && ca->type == PJSON_INT && !ca->big && ca->u.i >= 0)
        *created_at = ca->u.i;
    facts_str(out, "w", root, "user", 0);
    facts_str(out, "w", root, "sender", 0);
    facts_str(out, "w", root, "recipient", 0);
    facts_str(out, "ref", root, "referrer", 1);
    static const char *const lists[] = {"inTxs", "outTxs"};
    for (size_t l = 0; l < 2; l++) {
        const struct pjson *arr = pjson_get(root, lists[l]);
        if (arr == NULL || arr->type != PJSON_ARR)
            continue;
        for (const struct pjson *t = arr->u.kids.first; t != NULL; t = t->next)
            if (t->type == PJSON_OBJ)
                facts_str(out, "tx", t, "txHash", 0);
    }
    const struct pjson *dep = pjson_get(root, "depositAddress");
    if (dep != NULL && dep->type == PJSON_OBJ) {
        facts_str(out, "tx", dep, "depositTxHash", 0);
        facts_str(out, "dep", dep, "address", 0);
        facts_str(out, "w", dep, "depositor", 0);
    }
    pjson_free(&doc);
    return 0;
}

/* ---- indexing facts ---------------------------------------------------------------------- */

struct index_op {
    store_search_index_cb *cb;
    void *arg;
};

static void on_indexed(void *arg, const char *err, redisReply *r)
{
    struct index_op *op = arg;
    int indexed = 0;
    if (err == NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
        r->element[0]->type == REDIS_REPLY_INTEGER)
        indexed = r->element[0]->integer == 1;
    else if (err == NULL)
        err = store_err_reply;
    if (op->cb != NULL)
        op->cb(op->arg, err, indexed);
    free(op);
}

int store_search_index(struct store *s, const char *id, const char *facts, size_t len,
                       store_search_index_cb *cb, void *arg)
{
    scripts_init();
    struct store_search_ents e = {0};
    int64_t created;
    if (store_search_facts_entries(facts, len, &e, &created) != 0)
        return -1;
    char k_req[KEY_MAX], ca[24] = "", cap[24];
    const char *tag = store_tag_of(s, id);
    key_build(k_req, sizeof(k_req), tag, "req", id, NULL);
    if (created >= 0)
        snprintf(ca, sizeof(ca), "%lld", (long long)created);
    snprintf(cap, sizeof(cap), "%d", STORE_SEARCH_CAP);
    const char **argv = xcalloc(5 + e.n, sizeof(*argv));
    int argc = 0;
    argv[argc++] = k_req;
    argv[argc++] = tag;
    argv[argc++] = id;
    argv[argc++] = ca;
    argv[argc++] = cap;
    for (size_t i = 0; i < e.n; i++)
        argv[argc++] = e.v[i];
    struct index_op *op = xmalloc(sizeof(*op));
    *op = (struct index_op){cb, arg};
    int rc = store_eval(s, &index_sc, on_indexed, op, 1, argc, argv, NULL);
    if (rc != 0)
        free(op);
    free(argv);
    store_search_ents_free(&e);
    return rc;
}

/* ---- a page of a search, every partition's merged ------------------------------------------ */

int store_search_given(const struct store_search_query *q)
{
    return (q->q != NULL && q->q[0] != '\0') || (q->user != NULL && q->user[0] != '\0') ||
           (q->tx_hash != NULL && q->tx_hash[0] != '\0') ||
           (q->referrer != NULL && q->referrer[0] != '\0') || q->from >= 0 || q->to >= 0;
}

void store_search_page(struct store *s, const struct store_search_query *q,
                       store_req_page_cb *cb, void *arg)
{
    scripts_init();
    struct ref_page *pg = ref_page_new(q->limit > 0 ? q->limit : 1, cb, arg);
    char qn[STORE_SEARCH_MAX_VALUE + 1], un[STORE_SEARCH_MAX_VALUE + 1],
        tn[STORE_SEARCH_MAX_VALUE + 1];
    const char *qq = q->q != NULL ? q->q : "";
    store_search_norm(qn, sizeof(qn), qq, strlen(qq));
    store_search_norm(un, sizeof(un), q->user ? q->user : "", q->user ? strlen(q->user) : 0);
    store_search_norm(tn, sizeof(tn), q->tx_hash ? q->tx_hash : "",
                      q->tx_hash ? strlen(q->tx_hash) : 0);
    char from[24] = "", to[24] = "", want[16], k[KEY_MAX];
    if (q->from >= 0)
        snprintf(from, sizeof(from), "%lld", (long long)q->from);
    if (q->to >= 0)
        snprintf(to, sizeof(to), "%lld", (long long)q->to);
    snprintf(want, sizeof(want), "%d", ref_page_limit(pg) + 1); /* one more: is there a next page? */
    /* a given part that has no normal form matches nothing: "\x01" is never indexed */
    const char *argv[] = {k,
                          "",
                          qq,
                          qq[0] != '\0' && qn[0] == '\0' ? "\x01" : qn,
                          q->user && q->user[0] && un[0] == '\0' ? "\x01" : un,
                          q->tx_hash && q->tx_hash[0] && tn[0] == '\0' ? "\x01" : tn,
                          q->referrer ? q->referrer : "",
                          from,
                          to,
                          q->status ? q->status : "",
                          q->after_score ? q->after_score : "",
                          q->after_id ? q->after_id : "",
                          want};
    struct store_gather *g = store_gather_new(s, ref_page_part, ref_page_done, pg);
    for (unsigned p = 0; p < store_partitions(s); p++) {
        key_build(k, sizeof(k), store_part_tag(s, p), "ct", NULL, NULL);
        argv[1] = store_part_tag(s, p);
        store_gather_eval(g, p, &page_sc, 1, (int)ARRAY_LEN(argv), argv, NULL);
    }
    store_gather_end(g);
}
