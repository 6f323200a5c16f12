/* search.c (api) - see search.h: the search parameters of GET /v1/requests and the upstream
 * term fallback. runs on: core thread.
 *
 * Decisions (docs/search.md):
 *   - q, user, txHash: 1..STORE_SEARCH_MAX_VALUE printable ASCII bytes without spaces;
 *     referrer: free text of as many bytes without control characters; from / to: creation
 *     time in ms (0..2^53), from <= to.
 *   - The fallback asks GET /requests/v3?term=<term>&limit=TERM_LIMIT once per search that
 *     found nothing on its first page (no cursor): one budgeted call (poller_get). Each item
 *     is applied as an observation with tracking (so it is watched and delivered like any
 *     tracked request) and its facts are indexed before the search runs again. */
#include "relay/api/search.h"
#include "relay/api/internal.h"
#include "protocol/facts.h"
#include "protocol/forwarded.h"
#include "protocol/json.h"
#include "protocol/normalize.h"
#include "relay/common/log.h"
#include "relay/common/rate_table.h"
#include "relay/common/util.h"
#include "relay/config.h"
#include "relay/core.h"
#include "relay/ingest/ingest.h"
#include "relay/ingest/poller.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TERM_LIMIT 20                      /* items one fallback reads */
#define TERM_MAX_RESPONSE (4 * 1024 * 1024) /* its answer */
#define TIME_MAX 9007199254740991LL        /* 2^53 - 1: exact in every JSON reader */

/* ---- parameters --------------------------------------------------------------------------- */

static int value_param(struct ctx *x, const char *name, const char **out)
{
    const char *v = api_query_get(x, name);
    *out = NULL;
    if (v == NULL)
        return 0;
    size_t n = strlen(v);
    char norm[STORE_SEARCH_MAX_VALUE + 1];
    if (strcmp(name, "referrer") == 0 ? !store_search_text_ok(v, n)
                                      : store_search_norm(norm, sizeof(norm), v, n) == 0) {
        api_reply_error(x, 400, "invalid_parameter", name,
                        "%s must be 1..%d printable characters (spaces only in a referrer)",
                        name, STORE_SEARCH_MAX_VALUE);
        return -1;
    }
    *out = v;
    return 0;
}

static int time_param(struct ctx *x, const char *name, int64_t *out)
{
    const char *v = api_query_get(x, name);
    *out = -1;
    if (v == NULL)
        return 0;
    char *end;
    long long t = strtoll(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || t < 0 || t > TIME_MAX) {
        api_reply_error(x, 400, "invalid_parameter", name,
                        "%s must be a creation time in milliseconds (0..%lld)", name,
                        TIME_MAX);
        return -1;
    }
    *out = t;
    return 0;
}

int api_search_parse(struct ctx *x, struct store_search_query *q)
{
    if (value_param(x, "q", &q->q) != 0 || value_param(x, "user", &q->user) != 0 ||
        value_param(x, "txHash", &q->tx_hash) != 0 ||
        value_param(x, "referrer", &q->referrer) != 0 || time_param(x, "from", &q->from) != 0 ||
        time_param(x, "to", &q->to) != 0)
        return -1;
    if (q->from >= 0 && q->to >= 0 && q->from > q->to) {
        api_reply_error(x, 400, "invalid_parameter", "to", "to must not be before from");
        return -1;
    }
    return 0;
}

const char *api_search_term(const struct store_search_query *q)
{
    return q->q != NULL ? q->q : q->tx_hash;
}

/* ---- the upstream term fallback ------------------------------------------------------------ */

struct term_op {
    struct core *c;
    char *term;
    api_search_term_done *done;
    void *arg;
    size_t found;   /* items the upstream answered */
    size_t pending; /* applies, then index calls, not answered yet */
    int phase;      /* 0 applying, 1 indexing */
    size_t nfacts;
    struct term_facts {
        char *id, *facts; /* owned */
        size_t len;
    } *facts;
};

static void term_finish(struct term_op *op)
{
    op->done(op->arg, op->found);
    for (size_t i = 0; i < op->nfacts; i++) {
        free(op->facts[i].id);
        free(op->facts[i].facts);
    }
    free(op->facts);
    free(op->term);
    free(op);
}

static void on_term_indexed(void *arg, const char *err, int indexed)
{
    struct term_op *op = arg;
    (void)err;
    (void)indexed;
    if (--op->pending == 0)
        term_finish(op);
}

/* Every item is applied: index their facts (the record exists now). */
static void index_facts(struct term_op *op)
{
    op->phase = 1;
    op->pending = 1; /* held until every call is sent */
    for (size_t i = 0; i < op->nfacts; i++) {
        struct term_facts *f = &op->facts[i];
        if (store_search_index(op->c->store, f->id, f->facts, f->len, on_term_indexed, op) == 0)
            op->pending++;
    }
    on_term_indexed(op, NULL, 0);
}

static void on_term_applied(void *arg, const char *err, enum proto_verdict v,
                            const struct status_event *ev)
{
    struct term_op *op = arg;
    (void)err;
    (void)v;
    (void)ev;
    if (--op->pending == 0)
        index_facts(op);
}

static void on_term_item(void *arg, int rc, struct status_event *ev, const struct proto_err *e)
{
    struct term_op *op = arg;
    (void)e;
    if (rc != 0)
        return;
    op->found++;
    op->pending++;
    ingest_submit(op->c->ingest, ev, 1, on_term_applied, op); /* tracked, as any found */
}

/* The facts of every item of the page (best effort: an item without facts is just not
 * indexed beyond its status record). */
static void collect_facts(struct term_op *op, const char *body, size_t len)
{
    struct pjson_doc doc;
    if (pjson_parse_max(body, len, TERM_MAX_RESPONSE, &doc, NULL) != 0)
        return;
    const struct pjson *arr = doc.root != NULL && doc.root->type == PJSON_OBJ
                                  ? pjson_get(doc.root, "requests") : NULL;
    if (arr != NULL && arr->type == PJSON_ARR) {
        op->facts = xcalloc(arr->u.kids.n + 1, sizeof(*op->facts));
        for (const struct pjson *it = arr->u.kids.first; it != NULL; it = it->next) {
            const struct pjson *id = it->type == PJSON_OBJ ? pjson_get(it, "id") : NULL;
            if (id == NULL || id->type != PJSON_STR ||
                !proto_request_id_valid(id->u.str.s, id->u.str.n))
                continue;
            char *facts = NULL;
            size_t flen = 0;
            struct proto_err pe;
            memset(&pe, 0, sizeof(pe));
            if (proto_facts_from_pjson(it, "", NULL, &facts, &flen, &pe) != 0)
                continue;
            op->facts[op->nfacts++] = (struct term_facts){xstrdup(id->u.str.s), facts, flen};
        }
    }
    pjson_free(&doc);
}

static void on_term_answer(void *arg, const struct httpc_resp *r)
{
    struct term_op *op = arg;
    if (r->err != NULL || r->status != 200) {
        log_info("search term lookup failed", "status=%ld err=%s", r->status,
                 r->err != NULL ? r->err : "none");
        term_finish(op);
        return;
    }
    collect_facts(op, r->body, r->body_len);
    op->pending = 1; /* held until the walk ends */
    struct proto_err pe;
    memset(&pe, 0, sizeof(pe));
    int rc = proto_normalize_requests_page(r->body, r->body_len, wall_ms(), on_term_item, op,
                                           NULL, &pe);
    if (rc != 0)
        log_warn("search term answer rejected", "err=%s field=%s", proto_strerror(rc), pe.field);
    log_info("search term looked up", "found=%zu", op->found);
    on_term_applied(op, NULL, PROTO_STALE, NULL);
}

int api_search_term_lookup(struct ctx *x, const char *term, api_search_term_done *done,
                           void *arg)
{
    struct core *c = x->api->c;
    char peer[64] = "?";
    int open = c->cfg->admin_token == NULL || c->cfg->admin_token[0] == '\0';
    /* /v1 is open: the caller proved nothing, so it asks within the miss rate */
    if (open && x->client.family != 0)
        proto_ip_key(&x->client, peer, sizeof(peer));
    return api_search_term_find(c, open ? peer : NULL, term, done, arg);
}

int api_search_term_find(struct core *c, const char *anon_addr, const char *term,
                         api_search_term_done *done, void *arg)
{
    if (c->cfg->upstream_api_key == NULL || c->cfg->upstream_api_key[0] == '\0' ||
        c->poller == NULL || c->ingest == NULL || c->api == NULL)
        return -1;
    if (anon_addr != NULL) {
        int wait = rate_table_take(c->api->anon_misses, anon_addr, mono_ms());
        if (wait > 0)
            return wait;
    }
    char *esc = url_escape(term);
    char path[1024];
    snprintf(path, sizeof(path), "/requests/v3?term=%s&limit=%d", esc, TERM_LIMIT);
    free(esc);
    struct term_op *op = xcalloc(1, sizeof(*op));
    *op = (struct term_op){.c = c, .term = xstrdup(term), .done = done, .arg = arg};
    if (poller_get(c->poller, path, TERM_MAX_RESPONSE, on_term_answer, op) != 0) {
        free(op->term);
        free(op);
        return -1;
    }
    return 0;
}
