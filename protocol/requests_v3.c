/* requests_v3.c - items and pages of GET /requests/v3 into struct status_event, and the
 * ISO-8601 timestamps that API uses (proto_iso8601_ms).
 *
 * An item is read with the field readers of normalize.c (normalize_internal.h), with its own
 * shape: ISO-8601 createdAt/updatedAt, reasons under "data" (else at the item's top level),
 * hashes from data.inTxs/outTxs objects, chain ids from the quoted route (else the
 * transactions), reorg details (ev->reorg, PROTO_HAS_REORG) and PROTO_F_UNCONFIRMED_DEPOSIT.
 * Rules: normalize.h.
 * runs on: any thread (pure). */
#include "protocol/normalize.h"
#include "protocol/facts.h"

#include "protocol/normalize_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- /requests/v3 ------------------------------------------------------------------------ */

/* Follow a path of object keys; NULL if any step is missing or not an object. */
static const struct pjson *jpath(const struct pjson *v, const char *const *keys)
{
    for (; v != NULL && *keys != NULL; keys++)
        v = pjson_get(v, *keys);
    return v;
}

/* A chain id at the end of a path, or 0 when absent or not a valid chain id (derived values
 * are best effort: the first valid candidate wins). */
static int64_t chain_at(const struct pjson *v)
{
    if (v == NULL || v->type != PJSON_INT || v->big || v->u.i < 1 || v->u.i > PROTO_MAX_CHAIN_ID)
        return 0;
    return v->u.i;
}

static int64_t route_chain(const struct pjson *side, const char *first, const char *second)
{
    const char *const a[] = {first, "currency", "chainId", NULL};
    const char *const b[] = {second, "currency", "chainId", NULL};
    int64_t id = chain_at(jpath(side, a));
    return id != 0 ? id : chain_at(jpath(side, b));
}

/* data.inTxs / data.outTxs: hashes from each item's txHash, first valid chainId in *chain. */
static int rd_txs(const struct nctx *c, const struct pjson *data, const char *key,
                  struct proto_strv *sv, int64_t *chain, int *pres)
{
    const struct pjson *a = pjson_get(data, key);
    struct hashlist hl;
    *pres = norm_presence(a);
    if (*pres != NORM_VALUE)
        return 0;
    if (a->type != PJSON_ARR)
        return norm_fail(c, PROTO_ETYPE, key, "expected an array");
    if (a->u.kids.n > PROTO_MAX_HASHES)
        return norm_fail(c, PROTO_ETOOLONG, key, "more than PROTO_MAX_HASHES transactions");
    hl.n = 0;
    for (const struct pjson *t = a->u.kids.first; t != NULL; t = t->next) {
        const struct pjson *h = pjson_get(t, "txHash");
        int rc;
        if (t->type != PJSON_OBJ)
            return norm_fail(c, PROTO_ETYPE, key, "expected an array of objects");
        if (norm_presence(h) == NORM_VALUE && h->type != PJSON_STR)
            return norm_fail(c, PROTO_ETYPE, key, "txHash: expected a string");
        if (norm_presence(h) == NORM_VALUE && (rc = norm_hashlist_add(c, key, &hl, h)) != 0)
            return rc;
        if (*chain == 0)
            *chain = chain_at(pjson_get(t, "chainId"));
    }
    return norm_hashlist_store(c, key, &hl, sv);
}

/* {"inTxs":[{"txHash","chainId","status"},...],"metadata":<reorg>|null} (event.h) as
 * malloc'd text of *len bytes, or NULL when out of memory. inTxs may be NULL. */
static char *reorg_text(const struct pjson *in_txs, const struct pjson *reorg, size_t *len)
{
    struct pjson_buf b = {0};
    PJSON_PUT_LIT(&b, "{\"inTxs\":[");
    for (const struct pjson *t = in_txs != NULL ? in_txs->u.kids.first : NULL; t; t = t->next) {
        if (t != in_txs->u.kids.first)
            PJSON_PUT_LIT(&b, ",");
        PJSON_PUT_LIT(&b, "{\"txHash\":");
        pjson_put_value(&b, pjson_get(t, "txHash"));
        PJSON_PUT_LIT(&b, ",\"chainId\":");
        pjson_put_value(&b, pjson_get(t, "chainId"));
        PJSON_PUT_LIT(&b, ",\"status\":");
        pjson_put_value(&b, pjson_get(t, "status"));
        PJSON_PUT_LIT(&b, "}");
    }
    PJSON_PUT_LIT(&b, "],\"metadata\":");
    pjson_put_value(&b, reorg);
    PJSON_PUT_LIT(&b, "}");
    return pjson_buf_finish(&b, len);
}

/* Reorg details of a /requests/v3 item: set (with PROTO_HAS_REORG) when an inTx has a status
 * other than "success" (a deposit reorged out) or a "metadata":{"reorg":{...}} object is
 * present at the item's top level or under "data" (the top level wins). Best effort: nothing
 * here rejects the item, and details over PROTO_MAX_REORG bytes or nested deeper than
 * PROTO_MAX_JSON_DEPTH are dropped. */
static int rd_reorg(const struct nctx *c, const struct pjson *it, const struct pjson *data,
                    struct status_event *ev)
{
    const struct pjson *in_txs = pjson_get(data, "inTxs");
    const struct pjson *reorg = pjson_get(pjson_get(it, "metadata"), "reorg");
    if (reorg == NULL || reorg->type != PJSON_OBJ)
        reorg = pjson_get(pjson_get(data, "metadata"), "reorg");
    if (reorg != NULL && reorg->type != PJSON_OBJ)
        reorg = NULL;
    if (in_txs != NULL && in_txs->type != PJSON_ARR)
        in_txs = NULL;
    int found = reorg != NULL;
    for (const struct pjson *t = in_txs != NULL ? in_txs->u.kids.first : NULL; t; t = t->next) {
        const struct pjson *st = pjson_get(t, "status");
        if (norm_presence(st) == NORM_VALUE && !norm_is_str(st, "success"))
            found = 1;
    }
    if (!found)
        return 0;
    size_t n;
    char *text = reorg_text(in_txs, reorg, &n);
    if (text == NULL)
        return norm_fail(c, PROTO_ENOMEM, "metadata", "out of memory");
    if (n > PROTO_MAX_REORG || pjson_text_depth(text, n) > PROTO_MAX_JSON_DEPTH) {
        free(text);
        return 0;
    }
    ev->reorg = text;
    ev->flags |= PROTO_HAS_REORG;
    return 0;
}

/* A reason of an item: data.<key>, else (absent, null or "" there) the item's top-level field
 * of the same name (DESIGN "More upstream rules"), else "N/A". */
static int rd_reason(const struct nctx *c, const struct nctx *dc, const struct pjson *it,
                     const struct pjson *data, const char *key, char **out, int *pres)
{
    const struct pjson *dv = pjson_get(data, key), *tv = pjson_get(it, key);
    int data_says = norm_presence(dv) == NORM_VALUE &&
                    !(dv->type == PJSON_STR && dv->u.str.n == 0);
    if (!data_says && norm_presence(tv) == NORM_VALUE)
        return norm_rd_reason(c, it, key, out, pres);
    return norm_rd_reason(dc, data, key, out, pres);
}

#define BITCOIN_CHAIN_ID 8253038 /* service-assigned (upstream-protocol.md) */

/* A mempool-only Bitcoin deposit: an inTx on the origin chain, none of them with a block
 * (absent, null or 0). */
static int deposit_unconfirmed(const struct pjson *in_txs, int64_t origin)
{
    int seen = 0;
    if (in_txs == NULL || in_txs->type != PJSON_ARR)
        return 0;
    for (const struct pjson *t = in_txs->u.kids.first; t != NULL; t = t->next) {
        if (chain_at(pjson_get(t, "chainId")) != origin)
            continue;
        const struct pjson *b = pjson_get(t, "block");
        if (norm_presence(b) == NORM_VALUE && !(b->type == PJSON_INT && b->u.i == 0 && !b->big))
            return 0;
        seen = 1;
    }
    return seen;
}

static int requests_item(const char *pfx, const struct pjson *it, int64_t observed_at,
                         struct status_event *ev, struct proto_err *err)
{
    struct nctx c = {err, pfx, 0};
    const struct pjson *s, *data;
    int p, p2, rc;
    int64_t in_chain = 0, out_chain = 0;
    char dpfx[64];

    ev->source = PROTO_SRC_REQUESTS;
    ev->observed_at = observed_at;
    if (it->type != PJSON_OBJ)
        return norm_fail(&c, PROTO_ETYPE, "", "expected an object");
    if ((rc = norm_rd_str(&c, it, "id", 1, &s, &p)) != 0 ||
        (rc = norm_valid_request_id(&c, "id", s->u.str.s, s->u.str.n)) != 0 ||
        (rc = norm_copy_str(&c, "id", s, &ev->request_id)) != 0 ||
        (rc = norm_rd_status(&c, it, ev)) != 0)
        return rc;
    if ((rc = norm_rd_str(&c, it, "updatedAt", 1, &s, &p)) != 0)
        return rc;
    if (proto_iso8601_ms(s->u.str.s, &ev->updated_at) != 0)
        return norm_fail(&c, PROTO_EVALUE, "updatedAt", "not an ISO-8601 timestamp");
    if (ev->updated_at < 1 || ev->updated_at > PROTO_MAX_TS)
        return norm_fail(&c, PROTO_ERANGE, "updatedAt", "timestamp out of range");
    if ((rc = norm_rd_str(&c, it, "createdAt", 0, &s, &p)) != 0)
        return rc;
    if (s != NULL) {
        if (proto_iso8601_ms(s->u.str.s, &ev->quote_created_at) != 0)
            return norm_fail(&c, PROTO_EVALUE, "createdAt", "not an ISO-8601 timestamp");
        if (ev->quote_created_at < 1 || ev->quote_created_at > PROTO_MAX_TS)
            return norm_fail(&c, PROTO_ERANGE, "createdAt", "timestamp out of range");
        ev->flags |= PROTO_HAS_QUOTE_CREATED;
    }
    if ((rc = norm_rd_deposit(&c, it, "depositAddress", 0, &ev->deposit, &p)) != 0)
        return rc;
    if (p != NORM_ABSENT)
        ev->flags |= PROTO_HAS_DEPOSIT;

    data = pjson_get(it, "data");
    if (norm_presence(data) == NORM_VALUE && data->type != PJSON_OBJ)
        return norm_fail(&c, PROTO_ETYPE, "data", "expected an object");
    if (norm_presence(data) != NORM_VALUE)
        data = NULL;
    snprintf(dpfx, sizeof(dpfx), "%sdata.", pfx);
    struct nctx dc = {err, dpfx, 0};
    if ((rc = rd_reason(&c, &dc, it, data, "failReason", &ev->fail_reason, &p)) != 0 ||
        (rc = rd_reason(&c, &dc, it, data, "refundFailReason", &ev->refund_fail_reason, &p2)) != 0)
        return rc;
    if (p != NORM_ABSENT || p2 != NORM_ABSENT)
        ev->flags |= PROTO_HAS_REASONS;
    if ((rc = norm_rd_text(&dc, data, "referrer", 0, &ev->referrer, &p)) != 0)
        return rc;
    if (p != NORM_ABSENT)
        ev->flags |= PROTO_HAS_REFERRER;
    if ((rc = rd_txs(&dc, data, "inTxs", &ev->in_tx_hashes, &in_chain, &p)) != 0)
        return rc;
    if (p == NORM_VALUE)
        ev->flags |= PROTO_HAS_IN_TXS;
    if ((rc = rd_txs(&dc, data, "outTxs", &ev->tx_hashes, &out_chain, &p)) != 0)
        return rc;
    if (p == NORM_VALUE)
        ev->flags |= PROTO_HAS_OUT_TXS;

    /* chain ids: the quoted route, else the transactions; same-chain swaps have no
     * destination side (docs: "fall back to origin.outputCurrency") */
    const char *const qo[] = {"route", "quoted", "origin", NULL};
    const char *const qd[] = {"route", "quoted", "destination", NULL};
    const struct pjson *origin = jpath(data, qo), *dest = jpath(data, qd);
    ev->origin_chain_id = route_chain(origin, "inputCurrency", "outputCurrency");
    ev->destination_chain_id = route_chain(dest, "outputCurrency", "inputCurrency");
    if (ev->origin_chain_id == 0)
        ev->origin_chain_id = in_chain;
    if (ev->destination_chain_id == 0 && (dest == NULL || dest->type != PJSON_OBJ) &&
        origin != NULL)
        ev->destination_chain_id = route_chain(origin, "outputCurrency", "inputCurrency");
    if (ev->destination_chain_id == 0)
        ev->destination_chain_id = out_chain;
    if (ev->origin_chain_id == BITCOIN_CHAIN_ID && ev->st == PROTO_ST_PENDING &&
        deposit_unconfirmed(pjson_get(data, "inTxs"), ev->origin_chain_id))
        ev->flags |= PROTO_F_UNCONFIRMED_DEPOSIT;
    if ((rc = rd_reorg(&dc, it, data, ev)) != 0)
        return rc;
    norm_value_flags(ev);
    return 0;
}

int proto_normalize_requests_item(const char *buf, size_t len, int64_t observed_at,
                                  struct status_event *out, struct proto_err *err)
{
    struct pjson_doc doc;
    int rc;
    status_event_init(out);
    if ((rc = pjson_parse(buf, len, &doc, err)) != 0)
        return rc;
    if ((rc = requests_item("", doc.root, observed_at, out, err)) != 0)
        status_event_cleanup(out);
    pjson_free(&doc);
    return rc;
}

/* The page walk of both entry points: fcb (with facts, from ex) or cb (without). */
static int page_walk(const char *buf, size_t len, int64_t observed_at,
                     const struct proto_explorers *ex, proto_requests_item_cb *cb,
                     proto_requests_facts_cb *fcb, void *arg, char **continuation,
                     struct proto_err *err)
{
    struct pjson_doc doc;
    struct nctx c = {err, "", 0};
    int rc, p;
    char *cont = NULL, *unused;
    if (continuation == NULL)
        continuation = &unused;
    *continuation = NULL;
    if ((rc = pjson_parse(buf, len, &doc, err)) != 0)
        return rc;
    const struct pjson *root = doc.root, *reqs = pjson_get(root, "requests"), *cs;
    if (root->type != PJSON_OBJ) {
        rc = norm_fail(&c, PROTO_ETYPE, "", "expected an object");
        goto out;
    }
    if (reqs == NULL || reqs->type != PJSON_ARR) {
        rc = norm_fail(&c, reqs == NULL ? PROTO_EMISSING : PROTO_ETYPE, "requests",
                       "expected an array");
        goto out;
    }
    if ((rc = norm_rd_str(&c, root, "continuation", 0, &cs, &p)) != 0)
        goto out;
    if (cs != NULL && cs->u.str.n > 0 && (cont = norm_mdup(cs->u.str.s, cs->u.str.n)) == NULL) {
        rc = norm_fail(&c, PROTO_ENOMEM, "continuation", "out of memory");
        goto out;
    }
    size_t i = 0;
    for (const struct pjson *it = reqs->u.kids.first; it != NULL; it = it->next, i++) {
        struct status_event ev;
        struct proto_err ierr = {0};
        char pfx[32];
        snprintf(pfx, sizeof(pfx), "requests[%zu].", i);
        status_event_init(&ev);
        int irc = requests_item(pfx, it, observed_at, &ev, &ierr);
        if (irc != 0)
            status_event_cleanup(&ev);
        if (irc == PROTO_ENOMEM) { /* stop: the caller retries the page */
            rc = proto_fail(err, PROTO_ENOMEM, ierr.field, ierr.msg);
            goto out;
        }
        if (cb != NULL)
            cb(arg, irc, &ev, &ierr);
        if (fcb != NULL) {
            char *facts = NULL;
            size_t flen = 0;
            struct proto_err ferr = {0};
            if (irc == 0 && proto_facts_from_pjson(it, pfx, ex, &facts, &flen, &ferr) != 0)
                facts = NULL; /* the status stands; facts are best effort */
            fcb(arg, irc, &ev, &ierr, facts, flen);
            free(facts);
        }
        status_event_cleanup(&ev);
    }
    if (continuation != &unused) {
        *continuation = cont;
        cont = NULL;
    }
out:
    free(cont);
    pjson_free(&doc);
    return rc;
}

int proto_normalize_requests_page(const char *buf, size_t len, int64_t observed_at,
                                  proto_requests_item_cb *cb, void *arg, char **continuation,
                                  struct proto_err *err)
{
    return page_walk(buf, len, observed_at, NULL, cb, NULL, arg, continuation, err);
}

int proto_normalize_requests_page_facts(const char *buf, size_t len, int64_t observed_at,
                                        const struct proto_explorers *ex,
                                        proto_requests_facts_cb *cb, void *arg,
                                        char **continuation, struct proto_err *err)
{
    return page_walk(buf, len, observed_at, ex, NULL, cb, arg, continuation, err);
}

/* ---- ISO-8601 ---------------------------------------------------------------------------- */

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

int proto_iso8601_ms(const char *s, int64_t *out)
{
    static const unsigned char mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int Y, M, D, h, m, sec, ms = 0, off = 0;
    if (s == NULL || strlen(s) < 20)
        return PROTO_EVALUE;
    if (digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' ||
        digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &m) || s[16] != ':' ||
        digits(s + 17, 2, &sec))
        return PROTO_EVALUE;
    int leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
    if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] + (M == 2 && leap) || h > 23 || m > 59 ||
        sec > 59)
        return PROTO_EVALUE;
    const char *p = s + 19;
    if (*p == '.') {
        int n = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, n++)
            if (n < 3)
                ms = ms * 10 + (*p - '0');
        if (n == 0 || n > 9)
            return PROTO_EVALUE;
        for (; n < 3; n++)
            ms *= 10;
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, sign = *p == '-' ? -1 : 1;
        if (digits(p + 1, 2, &oh) != 0)
            return PROTO_EVALUE;
        p += 3;
        if (*p == ':')
            p++;
        if (digits(p, 2, &om) != 0 || oh > 23 || om > 59)
            return PROTO_EVALUE;
        p += 2;
        off = sign * (oh * 60 + om);
    } else {
        return PROTO_EVALUE; /* a zone is required: no guessing local time */
    }
    if (*p != '\0')
        return PROTO_EVALUE;
    int64_t days = days_from_civil(Y, (unsigned)M, (unsigned)D);
    *out = (((days * 24 + h) * 60 + m - off) * 60 + sec) * 1000 + ms;
    return 0;
}
