/* facts.c - request facts from /requests/v3 items, their merge, and explorer links (facts.h).
 *
 * Both inputs (an upstream item, a facts text of ours) are read into one C view (struct facts)
 * whose strings and objects are borrowed from the parsed documents; one writer (emit) turns a
 * view into the canonical text, so build, merge and relink agree byte for byte on the shape.
 * The upstream item and the facts text differ only in where fields live (data.inTxs vs inTxs,
 * a route amount {currency:{...}, amount} vs the flat amount object, seconds vs ms) and are
 * read by the two readers item_read and facts_read.
 * runs on: any thread (pure). */
#include "protocol/facts.h"

#include "protocol/event.h"
#include "protocol/normalize.h"
#include "protocol/normalize_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- explorer links ------------------------------------------------------------------------ */

/* Bytes allowed in a URL part: printable ASCII except space, quote, '<', '>', backslash. */
static int url_chars_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == '<' || ch == '>' || ch == '\\')
            return 0;
    }
    return 1;
}

static int has_prefix_ci(const char *s, const char *p)
{
    for (; *p != '\0'; s++, p++) {
        char ch = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;
        if (ch != *p)
            return 0;
    }
    return 1;
}

/* Index of the first entry with chain_id >= id. */
static size_t ex_lower(const struct proto_explorers *ex, int64_t id)
{
    size_t lo = 0, hi = ex->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ex->v[mid].chain_id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const struct proto_explorer *proto_explorers_find(const struct proto_explorers *ex,
                                                  int64_t chain_id)
{
    if (ex == NULL || ex->n == 0)
        return NULL;
    size_t i = ex_lower(ex, chain_id);
    return i < ex->n && ex->v[i].chain_id == chain_id ? &ex->v[i] : NULL;
}

int proto_explorers_add(struct proto_explorers *ex, int64_t chain_id, const char *base,
                        const char *tx_path, const char *query)
{
    if (chain_id < 1 || chain_id > PROTO_MAX_CHAIN_ID)
        return PROTO_ERANGE;
    if (tx_path == NULL)
        tx_path = "";
    if (query == NULL)
        query = "";
    size_t bl = base != NULL ? strlen(base) : 0, pl = strlen(tx_path), ql = strlen(query);
    size_t skip = base != NULL && has_prefix_ci(base, "https://") ? 8
                  : base != NULL && has_prefix_ci(base, "http://") ? 7 : 0;
    if (skip == 0 || bl > PROTO_EXPLORER_MAX_URL || pl > PROTO_EXPLORER_MAX_URL ||
        ql > PROTO_EXPLORER_MAX_URL || !url_chars_ok(base, bl) || !url_chars_ok(tx_path, pl) ||
        !url_chars_ok(query, ql))
        return PROTO_EVALUE;
    while (bl > skip && base[bl - 1] == '/')
        bl--;
    if (bl == skip)
        return PROTO_EVALUE; /* no host */
    size_t i = ex_lower(ex, chain_id);
    int replace = i < ex->n && ex->v[i].chain_id == chain_id;
    if (!replace && ex->n >= PROTO_EXPLORERS_MAX)
        return PROTO_ETOOLONG;
    char *b = norm_mdup(base, bl), *p = norm_mdup(tx_path, pl), *q = norm_mdup(query, ql);
    if (b == NULL || p == NULL || q == NULL)
        goto nomem;
    if (!replace && ex->n == ex->cap) {
        size_t cap = ex->cap ? ex->cap * 2 : 16;
        struct proto_explorer *nv = realloc(ex->v, cap * sizeof(*nv));
        if (nv == NULL)
            goto nomem;
        ex->v = nv;
        ex->cap = cap;
    }
    if (replace) {
        free(ex->v[i].base);
        free(ex->v[i].tx_path);
        free(ex->v[i].query);
    } else {
        memmove(&ex->v[i + 1], &ex->v[i], (ex->n - i) * sizeof(ex->v[0]));
        ex->n++;
    }
    ex->v[i] = (struct proto_explorer){chain_id, b, p, q};
    return 0;
nomem:
    free(b);
    free(p);
    free(q);
    return PROTO_ENOMEM;
}

void proto_explorers_cleanup(struct proto_explorers *ex)
{
    if (ex == NULL)
        return;
    for (size_t i = 0; i < ex->n; i++) {
        free(ex->v[i].base);
        free(ex->v[i].tx_path);
        free(ex->v[i].query);
    }
    free(ex->v);
    *ex = (struct proto_explorers){0};
}

static const char HEX[] = "0123456789ABCDEF";

/* application/x-www-form-urlencoded (URLSearchParams): alnum and *-._ kept, ' ' -> '+'. */
static void put_form(struct pjson_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char enc[3] = {'%', HEX[ch >> 4], HEX[ch & 15]};
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '*' || ch == '-' || ch == '.' || ch == '_')
            pjson_put_raw(b, (const char *)&s[i], 1);
        else if (ch == ' ')
            PJSON_PUT_LIT(b, "+");
        else
            pjson_put_raw(b, enc, 3);
    }
}

/* encodeURIComponent: A-Z a-z 0-9 - _ . ! ~ * ' ( ) kept, every other byte %XX. */
static void put_uri_component(struct pjson_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char enc[3] = {'%', HEX[ch >> 4], HEX[ch & 15]};
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            strchr("-_.!~*'()", ch) != NULL)
            pjson_put_raw(b, (const char *)&s[i], 1);
        else
            pjson_put_raw(b, enc, 3);
    }
}

/* explorerQueryParams into "k=v&..." (string, integer and boolean values). NULL on OOM. */
static char *query_text(const struct pjson *q)
{
    struct pjson_buf b = {0};
    int first = 1;
    for (const struct pjson *m = q != NULL && q->type == PJSON_OBJ ? q->u.kids.first : NULL; m;
         m = m->next) {
        if (m->type != PJSON_STR && m->type != PJSON_INT && m->type != PJSON_TRUE &&
            m->type != PJSON_FALSE)
            continue;
        if (!first)
            PJSON_PUT_LIT(&b, "&");
        first = 0;
        put_form(&b, m->key, m->klen);
        PJSON_PUT_LIT(&b, "=");
        if (m->type == PJSON_STR)
            put_form(&b, m->u.str.s, m->u.str.n);
        else
            put_form(&b, m->raw, m->rawlen); /* 42, true, false: their JSON text */
    }
    return pjson_buf_finish(&b, NULL);
}

int proto_explorers_from_chains(const char *buf, size_t len, struct proto_explorers *ex,
                                struct proto_err *err)
{
    struct pjson_doc doc;
    int rc;
    *ex = (struct proto_explorers){0};
    if ((rc = pjson_parse_max(buf, len, PROTO_CHAINS_MAX_INPUT, &doc, err)) != 0)
        return rc;
    const struct pjson *chains = pjson_get(doc.root, "chains");
    if (doc.root->type != PJSON_OBJ || chains == NULL || chains->type != PJSON_ARR) {
        pjson_free(&doc);
        return proto_fail(err, PROTO_ETYPE, "chains", "expected an object with a chains array");
    }
    for (const struct pjson *c = chains->u.kids.first; c != NULL; c = c->next) {
        const struct pjson *id = pjson_get(c, "id"), *url = pjson_get(c, "explorerUrl");
        const struct pjson *path = pjson_get(pjson_get(c, "explorerPaths"), "transaction");
        if (id == NULL || id->type != PJSON_INT || id->big || url == NULL ||
            url->type != PJSON_STR || proto_explorers_find(ex, id->u.i) != NULL)
            continue;
        char *q = query_text(pjson_get(c, "explorerQueryParams"));
        if (q == NULL) {
            rc = PROTO_ENOMEM;
            break;
        }
        rc = proto_explorers_add(ex, id->u.i, url->u.str.s,
                                 path != NULL && path->type == PJSON_STR ? path->u.str.s : NULL,
                                 q);
        free(q);
        if (rc == PROTO_ENOMEM || rc == PROTO_ETOOLONG)
            break;
        rc = 0; /* a chain without a usable explorer: no links on it */
    }
    pjson_free(&doc);
    if (rc == PROTO_ENOMEM) {
        proto_explorers_cleanup(ex);
        return proto_fail(err, PROTO_ENOMEM, "chains", "out of memory");
    }
    return 0; /* PROTO_ETOOLONG: the first PROTO_EXPLORERS_MAX chains are kept */
}

/* Append the link of hash on e to b (see facts.h). */
static void put_link(struct pjson_buf *b, const struct proto_explorer *e, const char *hash,
                     size_t n)
{
    static const char PH[] = "{TX_HASH}";
    const char *p = e->tx_path;
    size_t start = b->len;
    pjson_put_raw(b, e->base, strlen(e->base));
    if (p[0] == '\0') {
        PJSON_PUT_LIT(b, "/tx/");
        put_uri_component(b, hash, n);
    } else if (strstr(p, PH) != NULL) {
        if (p[0] != '/')
            PJSON_PUT_LIT(b, "/");
        for (const char *at; (at = strstr(p, PH)) != NULL; p = at + sizeof(PH) - 1) {
            pjson_put_raw(b, p, (size_t)(at - p));
            put_uri_component(b, hash, n);
        }
        pjson_put_raw(b, p, strlen(p));
    } else {
        size_t pl = strlen(p);
        while (pl > 0 && p[pl - 1] == '/')
            pl--;
        while (pl > 0 && p[0] == '/')
            p++, pl--;
        PJSON_PUT_LIT(b, "/");
        pjson_put_raw(b, p, pl);
        if (pl > 0)
            PJSON_PUT_LIT(b, "/");
        put_uri_component(b, hash, n);
    }
    if (e->query[0] != '\0') {
        int has_q = b->p != NULL && memchr(b->p + start, '?', b->len - start) != NULL;
        pjson_put_raw(b, has_q ? "&" : "?", 1);
        pjson_put_raw(b, e->query, strlen(e->query));
    }
}

int proto_explorer_tx_url(const struct proto_explorers *ex, int64_t chain_id, const char *hash,
                          size_t n, char **out)
{
    const struct proto_explorer *e = proto_explorers_find(ex, chain_id);
    struct pjson_buf b = {0};
    size_t len;
    *out = NULL;
    if (e == NULL || hash == NULL || n == 0)
        return 0;
    put_link(&b, e, hash, n);
    char *s = pjson_buf_finish(&b, &len);
    if (s == NULL)
        return PROTO_ENOMEM;
    if (len > PROTO_EXPLORER_MAX_LINK) {
        free(s);
        return 0;
    }
    *out = s;
    return 0;
}

/* ---- the view -------------------------------------------------------------------------------- */

/* A string borrowed from a document; s NULL = null. */
struct fstr {
    const char *s;
    size_t n;
};

#define F_NULL (-1) /* an integer the source did not give (chain ids: 0) */

struct ftx {
    struct fstr hash, status, type, fee, fee_usd, explorer;
    int64_t chain, block, ts; /* chain 0, block / ts F_NULL: null; ts in ms */
};

struct famount {
    int present;
    int64_t chain, decimals;
    struct fstr address, symbol, name, amount, formatted, usd, minimum, basis;
};

struct fdeposit {
    int present;
    struct fstr address, type, depositor, tx_hash, recovery;
};

enum { B_FEES, B_APPFEES, B_ROUTE, N_BLOBS };
enum { A_IN, A_OUT, A_REFUND, N_AMOUNTS };
enum { T_IN, T_OUT, N_LISTS };

static const char *const BLOB_KEY[N_BLOBS] = {"fees", "appFees", "route"};
static const size_t BLOB_MAX[N_BLOBS] = {PROTO_FACTS_MAX_BLOB, PROTO_FACTS_MAX_BLOB,
                                         PROTO_FACTS_MAX_ROUTE};
static const char *const AMOUNT_KEY[N_AMOUNTS] = {"currencyIn", "currencyOut",
                                                  "refundCurrency"};
static const char *const LIST_KEY[N_LISTS] = {"inTxs", "outTxs"};

struct facts {
    int64_t created, updated; /* ms, F_NULL */
    struct fstr user, sender, recipient, refund_to, referrer, request_type, order_id,
        superseded;
    struct fdeposit deposit;
    struct famount amount[N_AMOUNTS];
    struct ftx tx[N_LISTS][PROTO_MAX_HASHES];
    size_t ntx[N_LISTS];
    /* fees, appFees, route: an object or NULL; merge keeps the older one as the fallback of
     * each member (blob_old) */
    const struct pjson *blob[N_BLOBS], *blob_old[N_BLOBS];
};

static void facts_init(struct facts *f)
{
    memset(f, 0, sizeof(*f));
    f->created = f->updated = F_NULL;
}

/* ---- readers ------------------------------------------------------------------------------- */

/* String kinds: an address (wallets, hashes: printable ASCII without space, quote or
 * backslash), a token (the same, for enums and decimal texts) or free text (valid UTF-8). */
enum skind { S_ADDR, S_TOKEN, S_TEXT };

/* An optional string member into *out ("" and null: null). */
static int rd_s(const struct nctx *c, const struct pjson *obj, const char *key, enum skind k,
                size_t max, struct fstr *out)
{
    const struct pjson *s;
    int p, rc;
    *out = (struct fstr){0};
    if ((rc = norm_rd_str(c, obj, key, 0, &s, &p)) != 0 || s == NULL || s->u.str.n == 0)
        return rc;
    if (s->u.str.n > max)
        return norm_fail(c, PROTO_ETOOLONG, key, "string over its bound");
    for (size_t i = 0; k != S_TEXT && i < s->u.str.n; i++) {
        unsigned char ch = (unsigned char)s->u.str.s[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == '\\')
            return norm_fail(c, PROTO_EVALUE, key, "unexpected characters");
    }
    *out = (struct fstr){s->u.str.s, s->u.str.n};
    return 0;
}

/* An optional integer member in [min, max] into *out (F_NULL, or 0 for chain ids, when
 * absent or null). */
static int rd_i(const struct nctx *c, const struct pjson *obj, const char *key, int64_t min,
                int64_t max, int64_t none, int64_t *out)
{
    int p;
    *out = none;
    return norm_rd_int(c, obj, key, 0, min, max, out, &p);
}

/* An optional object member (absent or null: *out NULL). */
static int rd_obj(const struct nctx *c, const struct pjson *obj, const char *key,
                  const struct pjson **out)
{
    const struct pjson *v = pjson_get(obj, key);
    *out = NULL;
    if (norm_presence(v) != NORM_VALUE)
        return 0;
    if (v->type != PJSON_OBJ)
        return norm_fail(c, PROTO_ETYPE, key, "expected an object");
    *out = v;
    return 0;
}

/* An optional ISO-8601 (item) or ms (facts) timestamp into *out. */
static int rd_time(const struct nctx *c, const struct pjson *obj, const char *key, int iso,
                   int64_t *out)
{
    const struct pjson *s;
    int p, rc;
    *out = F_NULL;
    if (!iso)
        return rd_i(c, obj, key, 0, PROTO_MAX_TS, F_NULL, out);
    if ((rc = norm_rd_str(c, obj, key, 0, &s, &p)) != 0 || s == NULL)
        return rc;
    if (proto_iso8601_ms(s->u.str.s, out) != 0)
        return norm_fail(c, PROTO_EVALUE, key, "not an ISO-8601 timestamp");
    if (*out < 0 || *out > PROTO_MAX_TS)
        return norm_fail(c, PROTO_ERANGE, key, "timestamp out of range");
    return 0;
}

static int rd_deposit(const struct nctx *c, const struct pjson *obj, struct fdeposit *d)
{
    const struct pjson *o;
    int rc;
    char pfx[64];
    memset(d, 0, sizeof(*d));
    if ((rc = rd_obj(c, obj, "depositAddress", &o)) != 0 || o == NULL)
        return rc;
    snprintf(pfx, sizeof(pfx), "%sdepositAddress.", c->pfx);
    struct nctx dc = {c->err, pfx, 0};
    d->present = 1;
    if ((rc = rd_s(&dc, o, "address", S_ADDR, PROTO_FACTS_MAX_ADDR, &d->address)) != 0 ||
        (rc = rd_s(&dc, o, "type", S_TOKEN, PROTO_MAX_STATUS, &d->type)) != 0 ||
        (rc = rd_s(&dc, o, "depositor", S_ADDR, PROTO_FACTS_MAX_ADDR, &d->depositor)) != 0 ||
        (rc = rd_s(&dc, o, "depositTxHash", S_ADDR, PROTO_MAX_HASH, &d->tx_hash)) != 0 ||
        (rc = rd_s(&dc, o, "recoveryAddress", S_ADDR, PROTO_FACTS_MAX_ADDR, &d->recovery)) != 0)
        return rc;
    return 0;
}

/* A transaction list: the upstream's (upstream: timestamp in seconds) or ours (ms,
 * explorerUrl). */
static int tx_list_read(const struct nctx *c, const struct pjson *obj, const char *key,
                        int upstream, struct ftx *out, size_t *n)
{
    const struct pjson *a = pjson_get(obj, key);
    size_t i = 0;
    int rc;
    *n = 0;
    if (norm_presence(a) != NORM_VALUE)
        return 0;
    if (a->type != PJSON_ARR)
        return norm_fail(c, PROTO_ETYPE, key, "expected an array");
    if (a->u.kids.n > PROTO_MAX_HASHES)
        return norm_fail(c, PROTO_ETOOLONG, key, "more than PROTO_MAX_HASHES transactions");
    for (const struct pjson *t = a->u.kids.first; t != NULL; t = t->next, i++) {
        char pfx[64];
        struct ftx *x = &out[*n];
        snprintf(pfx, sizeof(pfx), "%s%s[%zu].", c->pfx, key, i);
        struct nctx tc = {c->err, pfx, 0};
        if (t->type != PJSON_OBJ)
            return norm_fail(c, PROTO_ETYPE, key, "expected an array of objects");
        memset(x, 0, sizeof(*x));
        if ((rc = rd_s(&tc, t, "txHash", S_ADDR, PROTO_MAX_HASH, &x->hash)) != 0 ||
            (rc = rd_i(&tc, t, "chainId", 1, PROTO_MAX_CHAIN_ID, 0, &x->chain)) != 0 ||
            (rc = rd_i(&tc, t, "block", 0, PROTO_MAX_CHAIN_ID, F_NULL, &x->block)) != 0 ||
            (rc = rd_i(&tc, t, "timestamp", 0, upstream ? PROTO_MAX_TS / 1000 : PROTO_MAX_TS,
                       F_NULL, &x->ts)) != 0 ||
            (rc = rd_s(&tc, t, "status", S_TOKEN, PROTO_MAX_STATUS, &x->status)) != 0 ||
            (rc = rd_s(&tc, t, "type", S_TOKEN, PROTO_MAX_STATUS, &x->type)) != 0 ||
            (rc = rd_s(&tc, t, "fee", S_TOKEN, PROTO_FACTS_MAX_SHORT, &x->fee)) != 0 ||
            (rc = rd_s(&tc, t, "feeUsd", S_TOKEN, PROTO_FACTS_MAX_SHORT, &x->fee_usd)) != 0)
            return rc;
        if (!upstream && (rc = rd_s(&tc, t, "explorerUrl", S_ADDR, PROTO_EXPLORER_MAX_LINK,
                                    &x->explorer)) != 0)
            return rc;
        if (upstream && x->ts != F_NULL)
            x->ts *= 1000;
        if (x->hash.s == NULL) {
            if (!upstream)
                return norm_fail(&tc, PROTO_EMISSING, "txHash", "required");
            continue; /* an upstream transaction without a hash says nothing we can link */
        }
        int dup = 0;
        for (size_t j = 0; j < *n && !dup; j++)
            dup = out[j].hash.n == x->hash.n && memcmp(out[j].hash.s, x->hash.s, x->hash.n) == 0;
        if (!dup)
            ++*n;
    }
    return 0;
}

/* Best effort (derived values): a string of at most max bytes, else null. */
static struct fstr be_str(const struct pjson *v, size_t max)
{
    if (v == NULL || v->type != PJSON_STR || v->u.str.n == 0 || v->u.str.n > max)
        return (struct fstr){0};
    return (struct fstr){v->u.str.s, v->u.str.n};
}

static int64_t be_int(const struct pjson *v, int64_t min, int64_t max, int64_t none)
{
    if (v == NULL || v->type != PJSON_INT || v->big || v->u.i < min || v->u.i > max)
        return none;
    return v->u.i;
}

/* A route/refund amount {currency: {chainId, address, symbol, name, decimals}, amount,
 * amountFormatted, amountUsd, minimumAmount} (upstream) or our flat amount object. */
static void rd_amount(const struct pjson *o, int upstream, const char *basis, struct famount *a)
{
    memset(a, 0, sizeof(*a));
    a->chain = 0;
    a->decimals = F_NULL;
    if (o == NULL || o->type != PJSON_OBJ)
        return;
    const struct pjson *cur = upstream ? pjson_get(o, "currency") : o;
    a->present = 1;
    a->chain = be_int(pjson_get(cur, "chainId"), 1, PROTO_MAX_CHAIN_ID, 0);
    a->decimals = be_int(pjson_get(cur, "decimals"), 0, 255, F_NULL);
    a->address = be_str(pjson_get(cur, "address"), PROTO_FACTS_MAX_ADDR);
    a->symbol = be_str(pjson_get(cur, "symbol"), PROTO_FACTS_MAX_SHORT);
    a->name = be_str(pjson_get(cur, "name"), PROTO_FACTS_MAX_SHORT);
    a->amount = be_str(pjson_get(o, "amount"), PROTO_FACTS_MAX_SHORT);
    a->formatted = be_str(pjson_get(o, "amountFormatted"), PROTO_FACTS_MAX_SHORT);
    a->usd = be_str(pjson_get(o, "amountUsd"), PROTO_FACTS_MAX_SHORT);
    a->minimum = be_str(pjson_get(o, "minimumAmount"), PROTO_FACTS_MAX_SHORT);
    if (upstream)
        a->basis = basis != NULL ? (struct fstr){basis, strlen(basis)} : (struct fstr){0};
    else
        a->basis = be_str(pjson_get(o, "basis"), PROTO_MAX_STATUS);
}

static const struct pjson *obj_at(const struct pjson *v, const char *k1, const char *k2,
                                  const char *k3)
{
    v = pjson_get(pjson_get(pjson_get(v, k1), k2), k3);
    return v != NULL && v->type == PJSON_OBJ ? v : NULL;
}

/* currencyIn / currencyOut from data.route: the actual side when given, else the quoted one;
 * out is the destination's output, or the origin's for a same-chain route (no destination on
 * either side). */
static void route_amounts(const struct pjson *route, struct facts *f)
{
    const struct pjson *in = obj_at(route, "actual", "origin", "inputCurrency");
    const char *in_basis = "actual";
    if (in == NULL) {
        in = obj_at(route, "quoted", "origin", "inputCurrency");
        in_basis = "quoted";
    }
    rd_amount(in, 1, in_basis, &f->amount[A_IN]);
    const struct pjson *qd = pjson_get(pjson_get(route, "quoted"), "destination");
    const struct pjson *ad = pjson_get(pjson_get(route, "actual"), "destination");
    const char *side = (qd != NULL && qd->type == PJSON_OBJ) || (ad != NULL && ad->type ==
                       PJSON_OBJ) ? "destination" : "origin";
    const struct pjson *out = obj_at(route, "actual", side, "outputCurrency");
    const char *out_basis = "actual";
    if (out == NULL) {
        out = obj_at(route, "quoted", side, "outputCurrency");
        out_basis = "quoted";
    }
    rd_amount(out, 1, out_basis, &f->amount[A_OUT]);
}

/* A blob (fees, appFees, route): an object within its bounds, else NULL. */
static const struct pjson *blob_keep(const struct pjson *v, size_t max)
{
    if (v == NULL || v->type != PJSON_OBJ)
        return NULL;
    if (pjson_compact(v, NULL, 0) > max || pjson_depth(v) > PROTO_MAX_JSON_DEPTH)
        return NULL;
    return v;
}

/* The common scalars of both shapes; w is where the wallets live (the item, or the facts). */
static int rd_wallets(const struct nctx *c, const struct pjson *w, struct facts *f)
{
    int rc;
    if ((rc = rd_s(c, w, "user", S_ADDR, PROTO_FACTS_MAX_ADDR, &f->user)) != 0 ||
        (rc = rd_s(c, w, "sender", S_ADDR, PROTO_FACTS_MAX_ADDR, &f->sender)) != 0 ||
        (rc = rd_s(c, w, "recipient", S_ADDR, PROTO_FACTS_MAX_ADDR, &f->recipient)) != 0 ||
        (rc = rd_s(c, w, "refundTo", S_ADDR, PROTO_FACTS_MAX_ADDR, &f->refund_to)) != 0 ||
        (rc = rd_s(c, w, "requestType", S_TEXT, PROTO_FACTS_MAX_SHORT, &f->request_type)) != 0 ||
        (rc = rd_s(c, w, "supersededByRequestId", S_ADDR, PROTO_MAX_ID, &f->superseded)) != 0 ||
        (rc = rd_deposit(c, w, &f->deposit)) != 0)
        return rc;
    return 0;
}

/* An upstream /requests/v3 item into *f. */
static int item_read(const struct nctx *c, const struct pjson *it, struct facts *f)
{
    const struct pjson *data, *protocol, *v;
    int rc;
    char dpfx[64], ppfx[64];
    if (it->type != PJSON_OBJ)
        return norm_fail(c, PROTO_ETYPE, "", "expected an object");
    if ((rc = rd_time(c, it, "createdAt", 1, &f->created)) != 0 ||
        (rc = rd_time(c, it, "updatedAt", 1, &f->updated)) != 0 ||
        (rc = rd_wallets(c, it, f)) != 0 || (rc = rd_obj(c, it, "data", &data)) != 0 ||
        (rc = rd_obj(c, it, "protocol", &protocol)) != 0)
        return rc;
    snprintf(dpfx, sizeof(dpfx), "%sdata.", c->pfx);
    snprintf(ppfx, sizeof(ppfx), "%sprotocol.", c->pfx);
    struct nctx dc = {c->err, dpfx, 0}, pc = {c->err, ppfx, 0};
    if ((rc = rd_s(&pc, protocol, "orderId", S_ADDR, PROTO_MAX_HASH, &f->order_id)) != 0)
        return rc;
    /* referrer: data.referrer (with includeAuthenticatedData), else a top-level one */
    if ((rc = rd_s(&dc, data, "referrer", S_TEXT, PROTO_MAX_STR, &f->referrer)) != 0)
        return rc;
    if (f->referrer.s == NULL &&
        (rc = rd_s(c, it, "referrer", S_TEXT, PROTO_MAX_STR, &f->referrer)) != 0)
        return rc;
    for (int l = 0; l < N_LISTS; l++)
        if ((rc = tx_list_read(&dc, data, LIST_KEY[l], 1, f->tx[l], &f->ntx[l])) != 0)
            return rc;
    for (int k = 0; k < N_BLOBS; k++) {
        if ((rc = rd_obj(&dc, data, BLOB_KEY[k], &v)) != 0)
            return rc;
        f->blob[k] = blob_keep(v, BLOB_MAX[k]);
    }
    route_amounts(pjson_get(data, "route"), f); /* the route as given, even when too big */
    if ((rc = rd_obj(&dc, data, "refundCurrencyData", &v)) != 0)
        return rc;
    rd_amount(v, 1, NULL, &f->amount[A_REFUND]);
    return 0;
}

/* A facts text of ours (parsed) into *f. Absent keys read as null. */
static int facts_read(const struct nctx *c, const struct pjson *o, struct facts *f)
{
    const struct pjson *v;
    int rc;
    if (o->type != PJSON_OBJ)
        return norm_fail(c, PROTO_ETYPE, "", "expected a facts object");
    if ((rc = rd_time(c, o, "createdAt", 0, &f->created)) != 0 ||
        (rc = rd_time(c, o, "updatedAt", 0, &f->updated)) != 0 ||
        (rc = rd_wallets(c, o, f)) != 0 ||
        (rc = rd_s(c, o, "referrer", S_TEXT, PROTO_MAX_STR, &f->referrer)) != 0 ||
        (rc = rd_s(c, o, "orderId", S_ADDR, PROTO_MAX_HASH, &f->order_id)) != 0)
        return rc;
    for (int l = 0; l < N_LISTS; l++)
        if ((rc = tx_list_read(c, o, LIST_KEY[l], 0, f->tx[l], &f->ntx[l])) != 0)
            return rc;
    for (int k = 0; k < N_BLOBS; k++) {
        if ((rc = rd_obj(c, o, BLOB_KEY[k], &v)) != 0)
            return rc;
        f->blob[k] = blob_keep(v, BLOB_MAX[k]);
    }
    for (int k = 0; k < N_AMOUNTS; k++) {
        if ((rc = rd_obj(c, o, AMOUNT_KEY[k], &v)) != 0)
            return rc;
        rd_amount(v, 0, NULL, &f->amount[k]);
    }
    return 0;
}

/* ---- the writer ---------------------------------------------------------------------------- */

static void put_fstr(struct pjson_buf *b, const char *key, struct fstr s)
{
    pjson_put_raw(b, key, strlen(key));
    if (s.s == NULL)
        PJSON_PUT_LIT(b, "null");
    else
        pjson_put_strn(b, s.s, s.n);
}

static void put_int(struct pjson_buf *b, const char *key, int64_t v, int64_t none)
{
    pjson_put_raw(b, key, strlen(key));
    if (v == none)
        PJSON_PUT_LIT(b, "null");
    else
        pjson_put_i64(b, v);
}

static void put_amount(struct pjson_buf *b, const struct famount *a)
{
    if (!a->present) {
        PJSON_PUT_LIT(b, "null");
        return;
    }
    put_int(b, "{\"chainId\":", a->chain, 0);
    put_fstr(b, ",\"address\":", a->address);
    put_fstr(b, ",\"symbol\":", a->symbol);
    put_fstr(b, ",\"name\":", a->name);
    put_int(b, ",\"decimals\":", a->decimals, F_NULL);
    put_fstr(b, ",\"amount\":", a->amount);
    put_fstr(b, ",\"amountFormatted\":", a->formatted);
    put_fstr(b, ",\"amountUsd\":", a->usd);
    put_fstr(b, ",\"minimumAmount\":", a->minimum);
    put_fstr(b, ",\"basis\":", a->basis);
    PJSON_PUT_LIT(b, "}");
}

/* relink: explorerUrl from ex (NULL: null) instead of the view's. */
static int put_tx(struct pjson_buf *b, const struct ftx *x, int relink,
                  const struct proto_explorers *ex)
{
    char *url = NULL;
    struct fstr link = x->explorer;
    if (relink) {
        if (proto_explorer_tx_url(ex, x->chain, x->hash.s, x->hash.n, &url) != 0)
            return PROTO_ENOMEM;
        link = (struct fstr){url, url != NULL ? strlen(url) : 0};
    }
    put_fstr(b, "{\"txHash\":", x->hash);
    put_int(b, ",\"chainId\":", x->chain, 0);
    put_fstr(b, ",\"explorerUrl\":", link);
    put_int(b, ",\"block\":", x->block, F_NULL);
    put_int(b, ",\"timestamp\":", x->ts, F_NULL);
    put_fstr(b, ",\"status\":", x->status);
    put_fstr(b, ",\"type\":", x->type);
    put_fstr(b, ",\"fee\":", x->fee);
    put_fstr(b, ",\"feeUsd\":", x->fee_usd);
    PJSON_PUT_LIT(b, "}");
    free(url);
    return 0;
}

/* A blob, member by member over its older copy when merging: the newer's members in their
 * order (a null one takes the older's value), then the older's members the newer lacks. Over
 * the blob's bound: the newer one alone. */
static void put_blob(struct pjson_buf *b, const struct pjson *v, const struct pjson *old,
                     size_t max)
{
    if (v == NULL || old == NULL) {
        pjson_put_value(b, v != NULL ? v : old);
        return;
    }
    struct pjson_buf t = {0};
    int first = 1;
    PJSON_PUT_LIT(&t, "{");
    for (const struct pjson *m = v->u.kids.first; m != NULL; m = m->next) {
        const struct pjson *o = pjson_get(old, m->key);
        if (!first)
            PJSON_PUT_LIT(&t, ",");
        first = 0;
        pjson_put_strn(&t, m->key, m->klen);
        PJSON_PUT_LIT(&t, ":");
        pjson_put_value(&t, m->type == PJSON_NULL && o != NULL ? o : m);
    }
    for (const struct pjson *m = old->u.kids.first; m != NULL; m = m->next) {
        if (pjson_get(v, m->key) != NULL)
            continue;
        if (!first)
            PJSON_PUT_LIT(&t, ",");
        first = 0;
        pjson_put_strn(&t, m->key, m->klen);
        PJSON_PUT_LIT(&t, ":");
        pjson_put_value(&t, m);
    }
    PJSON_PUT_LIT(&t, "}");
    size_t n;
    char *s = pjson_buf_finish(&t, &n);
    if (s == NULL)
        b->oom = 1;
    else if (n > max || pjson_text_depth(s, n) > PROTO_MAX_JSON_DEPTH)
        pjson_put_value(b, v);
    else
        pjson_put_raw(b, s, n);
    free(s);
}

static int emit(const struct facts *f, int relink, const struct proto_explorers *ex,
                char **out, size_t *out_len, struct proto_err *err)
{
    struct pjson_buf b = {0};
    put_int(&b, "{\"createdAt\":", f->created, F_NULL);
    put_int(&b, ",\"updatedAt\":", f->updated, F_NULL);
    put_fstr(&b, ",\"user\":", f->user);
    put_fstr(&b, ",\"sender\":", f->sender);
    put_fstr(&b, ",\"recipient\":", f->recipient);
    put_fstr(&b, ",\"refundTo\":", f->refund_to);
    put_fstr(&b, ",\"referrer\":", f->referrer);
    put_fstr(&b, ",\"requestType\":", f->request_type);
    PJSON_PUT_LIT(&b, ",\"depositAddress\":");
    if (!f->deposit.present) {
        PJSON_PUT_LIT(&b, "null");
    } else {
        put_fstr(&b, "{\"address\":", f->deposit.address);
        put_fstr(&b, ",\"type\":", f->deposit.type);
        put_fstr(&b, ",\"depositor\":", f->deposit.depositor);
        put_fstr(&b, ",\"depositTxHash\":", f->deposit.tx_hash);
        put_fstr(&b, ",\"recoveryAddress\":", f->deposit.recovery);
        PJSON_PUT_LIT(&b, "}");
    }
    for (int k = 0; k < N_AMOUNTS; k++) {
        PJSON_PUT_LIT(&b, ",\"");
        pjson_put_raw(&b, AMOUNT_KEY[k], strlen(AMOUNT_KEY[k]));
        PJSON_PUT_LIT(&b, "\":");
        put_amount(&b, &f->amount[k]);
    }
    for (int l = 0; l < N_LISTS; l++) {
        PJSON_PUT_LIT(&b, ",\"");
        pjson_put_raw(&b, LIST_KEY[l], strlen(LIST_KEY[l]));
        PJSON_PUT_LIT(&b, "\":[");
        for (size_t i = 0; i < f->ntx[l]; i++) {
            if (i > 0)
                PJSON_PUT_LIT(&b, ",");
            if (put_tx(&b, &f->tx[l][i], relink, ex) != 0)
                b.oom = 1;
        }
        PJSON_PUT_LIT(&b, "]");
    }
    for (int k = 0; k < N_BLOBS; k++) {
        PJSON_PUT_LIT(&b, ",\"");
        pjson_put_raw(&b, BLOB_KEY[k], strlen(BLOB_KEY[k]));
        PJSON_PUT_LIT(&b, "\":");
        put_blob(&b, f->blob[k], f->blob_old[k], BLOB_MAX[k]);
    }
    put_fstr(&b, ",\"orderId\":", f->order_id);
    put_fstr(&b, ",\"supersededByRequestId\":", f->superseded);
    PJSON_PUT_LIT(&b, "}");
    size_t n;
    *out = pjson_buf_finish(&b, &n);
    if (*out == NULL)
        return proto_fail(err, PROTO_ENOMEM, "", "out of memory");
    if (out_len != NULL)
        *out_len = n;
    return 0;
}

/* ---- entry points -------------------------------------------------------------------------- */

int proto_facts_from_pjson(const struct pjson *item, const char *pfx,
                           const struct proto_explorers *ex, char **out, size_t *out_len,
                           struct proto_err *err)
{
    struct nctx c = {err, pfx != NULL ? pfx : "", 0};
    struct facts *f = malloc(sizeof(*f));
    int rc;
    *out = NULL;
    if (out_len != NULL)
        *out_len = 0;
    if (f == NULL)
        return proto_fail(err, PROTO_ENOMEM, "", "out of memory");
    facts_init(f);
    if ((rc = item_read(&c, item, f)) == 0)
        rc = emit(f, 1, ex, out, out_len, err);
    free(f);
    return rc;
}

int proto_facts_from_item(const char *buf, size_t len, const struct proto_explorers *ex,
                          char **out, size_t *out_len, struct proto_err *err)
{
    struct pjson_doc doc;
    int rc;
    *out = NULL;
    if (out_len != NULL)
        *out_len = 0;
    if ((rc = pjson_parse(buf, len, &doc, err)) != 0)
        return rc;
    rc = proto_facts_from_pjson(doc.root, "", ex, out, out_len, err);
    pjson_free(&doc);
    return rc;
}

/* Parse facts text into *doc and *f. */
static int facts_load(const char *buf, size_t len, const char *pfx, struct pjson_doc *doc,
                      struct facts *f, struct proto_err *err)
{
    struct nctx c = {err, pfx, 0};
    int rc;
    facts_init(f);
    if ((rc = pjson_parse_max(buf, len, PROTO_FACTS_MAX_INPUT, doc, err)) != 0)
        return rc;
    if ((rc = facts_read(&c, doc->root, f)) != 0)
        pjson_free(doc);
    return rc;
}

static struct fstr pick(struct fstr newer, struct fstr older)
{
    return newer.s != NULL ? newer : older;
}

static int64_t pick_i(int64_t newer, int64_t older, int64_t none)
{
    return newer != none ? newer : older;
}

/* Null fields of x from the transaction with the same hash in other[0..n). */
static void tx_fill(struct ftx *x, const struct ftx *other, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct ftx *o = &other[i];
        if (o->hash.n != x->hash.n || memcmp(o->hash.s, x->hash.s, x->hash.n) != 0)
            continue;
        x->chain = pick_i(x->chain, o->chain, 0);
        x->block = pick_i(x->block, o->block, F_NULL);
        x->ts = pick_i(x->ts, o->ts, F_NULL);
        x->status = pick(x->status, o->status);
        x->type = pick(x->type, o->type);
        x->fee = pick(x->fee, o->fee);
        x->fee_usd = pick(x->fee_usd, o->fee_usd);
        x->explorer = pick(x->explorer, o->explorer);
        return;
    }
}

/* *m = newer over older (facts.h). m may alias newer, never older. */
static void facts_merge(const struct facts *nw, const struct facts *old, struct facts *m)
{
    if (m != nw)
        *m = *nw;
    m->created = pick_i(nw->created, old->created, F_NULL);
    m->updated = nw->updated > old->updated ? nw->updated : old->updated;
    m->user = pick(nw->user, old->user);
    m->sender = pick(nw->sender, old->sender);
    m->recipient = pick(nw->recipient, old->recipient);
    m->refund_to = pick(nw->refund_to, old->refund_to);
    m->referrer = pick(nw->referrer, old->referrer);
    m->request_type = pick(nw->request_type, old->request_type);
    m->order_id = pick(nw->order_id, old->order_id);
    m->superseded = pick(nw->superseded, old->superseded);
    if (!nw->deposit.present) {
        m->deposit = old->deposit;
    } else if (old->deposit.present) {
        m->deposit.address = pick(nw->deposit.address, old->deposit.address);
        m->deposit.type = pick(nw->deposit.type, old->deposit.type);
        m->deposit.depositor = pick(nw->deposit.depositor, old->deposit.depositor);
        m->deposit.tx_hash = pick(nw->deposit.tx_hash, old->deposit.tx_hash);
        m->deposit.recovery = pick(nw->deposit.recovery, old->deposit.recovery);
    }
    for (int k = 0; k < N_AMOUNTS; k++)
        if (!nw->amount[k].present)
            m->amount[k] = old->amount[k];
    for (int l = 0; l < N_LISTS; l++) {
        const struct ftx *other = nw->tx[l];
        size_t no = nw->ntx[l];
        if (nw->ntx[l] == 0) {
            memcpy(m->tx[l], old->tx[l], old->ntx[l] * sizeof(struct ftx));
            m->ntx[l] = old->ntx[l];
        } else {
            other = old->tx[l];
            no = old->ntx[l];
        }
        for (size_t i = 0; i < m->ntx[l]; i++)
            tx_fill(&m->tx[l][i], other, no);
    }
    for (int k = 0; k < N_BLOBS; k++) {
        const struct pjson *v = nw->blob[k];
        m->blob[k] = v != NULL ? v : old->blob[k];
        m->blob_old[k] = v != NULL ? old->blob[k] : NULL;
    }
}

int proto_facts_merge(const char *a, size_t alen, const char *b, size_t blen, char **out,
                      size_t *out_len, struct proto_err *err)
{
    struct pjson_doc da, db;
    struct facts *fa = malloc(sizeof(*fa)), *fb = malloc(sizeof(*fb));
    int rc;
    *out = NULL;
    if (out_len != NULL)
        *out_len = 0;
    if (fa == NULL || fb == NULL) {
        free(fa);
        free(fb);
        return proto_fail(err, PROTO_ENOMEM, "", "out of memory");
    }
    if ((rc = facts_load(a, alen, "a.", &da, fa, err)) == 0) {
        if ((rc = facts_load(b, blen, "b.", &db, fb, err)) == 0) {
            /* the later updatedAt is the newer; a tie (or two nulls): b */
            struct facts *nw = fa->updated > fb->updated ? fa : fb;
            facts_merge(nw, nw == fa ? fb : fa, nw);
            rc = emit(nw, 0, NULL, out, out_len, err);
            pjson_free(&db);
        }
        pjson_free(&da);
    }
    free(fa);
    free(fb);
    return rc;
}

int proto_facts_relink(const char *buf, size_t len, const struct proto_explorers *ex,
                       char **out, size_t *out_len, struct proto_err *err)
{
    struct pjson_doc doc;
    struct facts *f = malloc(sizeof(*f));
    int rc;
    *out = NULL;
    if (out_len != NULL)
        *out_len = 0;
    if (f == NULL)
        return proto_fail(err, PROTO_ENOMEM, "", "out of memory");
    if ((rc = facts_load(buf, len, "", &doc, f, err)) == 0) {
        rc = emit(f, 1, ex, out, out_len, err);
        pjson_free(&doc);
    }
    free(f);
    return rc;
}

/* ---- wallets -------------------------------------------------------------------------------- */

int proto_facts_wallets(const char *facts, size_t len, char out[3][PROTO_FACTS_MAX_ADDR + 1],
                        size_t *n, struct proto_err *err)
{
    static const char *const keys[] = {"user", "sender", "recipient"};
    struct pjson_doc doc;
    *n = 0;
    int rc = pjson_parse(facts, len, &doc, err);
    if (rc != 0)
        return rc;
    if (doc.root->type != PJSON_OBJ) {
        pjson_free(&doc);
        return proto_fail(err, PROTO_ETYPE, "", "expected a facts object");
    }
    for (size_t k = 0; k < 3; k++) {
        const struct pjson *v = pjson_get(doc.root, keys[k]);
        if (v == NULL || v->type == PJSON_NULL)
            continue;
        if (v->type != PJSON_STR || v->u.str.n > PROTO_FACTS_MAX_ADDR) {
            pjson_free(&doc);
            *n = 0;
            return proto_fail(err, PROTO_ETYPE, keys[k], "expected a wallet string or null");
        }
        size_t j = 0;
        while (j < *n && (strlen(out[j]) != v->u.str.n ||
                          strncasecmp(out[j], v->u.str.s, v->u.str.n) != 0))
            j++;
        if (j < *n)
            continue; /* the same wallet again */
        memcpy(out[*n], v->u.str.s, v->u.str.n);
        out[*n][v->u.str.n] = '\0';
        (*n)++;
    }
    pjson_free(&doc);
    return 0;
}
