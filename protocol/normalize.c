/* normalize.c - the upstream websocket, webhook and status v3 sources into struct
 * status_event, and the field readers every decoder of protocol/ shares
 * (normalize_internal.h: requests_v3.c reads GET /requests/v3, record.c our storage record).
 * JSON is read by protocol/'s own strict reader (json.c).
 *
 * Normalisation rules (upstream-protocol.md): required are requestId (or the caller's id),
 * status, updatedAt; everything else is optional, and a field that is present must be valid.
 * Chain ids are JSON integers 1..PROTO_MAX_CHAIN_ID (absent/null -> 0, unknown); timestamps
 * are integer ms 1..PROTO_MAX_TS. status / failReason / refundFailReason are tokens of 1..64
 * printable ASCII chars without space, quote or backslash; unknown values are kept verbatim and
 * flagged. Absent, null and "" reasons become "N/A". Hashes are validated by proto_hash_valid,
 * at most PROTO_MAX_HASHES per list, duplicates dropped (first occurrence kept). details may be
 * any JSON value: a string stays a string, any other type is kept as its compact JSON text
 * (PROTO_HAS_DETAILS_JSON); details longer than PROTO_MAX_STR is cut at a UTF-8 boundary and
 * flagged (a cut JSON text becomes a plain string); other strings over their bound are
 * PROTO_ETOOLONG. Integers beyond int64 are PROTO_ERANGE, reals PROTO_ETYPE where a number is
 * read; unknown fields are ignored.
 * runs on: any thread (pure). */
#include "protocol/normalize.h"

#include "protocol/normalize_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- field readers ----------------------------------------------------------------------- */

int norm_fail(const struct nctx *c, int code, const char *key, const char *msg)
{
    char field[64];
    /* a longer path is cut (struct proto_err holds 64 bytes anyway) */
    if (snprintf(field, sizeof(field), "%s%s", c->pfx, key) < 0)
        field[0] = '\0';
    return proto_fail(c->err, code, field, msg);
}

char *norm_mdup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

int norm_presence(const struct pjson *v)
{
    return v == NULL ? NORM_ABSENT : v->type == PJSON_NULL ? NORM_NULL : NORM_VALUE;
}

int norm_is_str(const struct pjson *v, const char *s)
{
    return v != NULL && v->type == PJSON_STR && v->u.str.n == strlen(s) &&
           memcmp(v->u.str.s, s, v->u.str.n) == 0;
}

/* An integer field in [min, max]. Sets *pres; a required field must be a value. */
int norm_rd_int(const struct nctx *c, const struct pjson *obj, const char *key, int required,
                int64_t min, int64_t max, int64_t *out, int *pres)
{
    const struct pjson *v = pjson_get(obj, key);
    *pres = norm_presence(v);
    if (*pres != NORM_VALUE) {
        if (!required)
            return 0;
        return *pres == NORM_ABSENT ? norm_fail(c, PROTO_EMISSING, key, "required")
                                    : norm_fail(c, PROTO_ETYPE, key, "null, expected an integer");
    }
    if (v->type != PJSON_INT)
        return norm_fail(c, PROTO_ETYPE, key, "expected an integer");
    if (v->big || v->u.i < min || v->u.i > max)
        return norm_fail(c, PROTO_ERANGE, key, "integer out of range");
    *out = v->u.i;
    return 0;
}

/* A string field (or null/absent when optional); *s borrowed from the document. */
int norm_rd_str(const struct nctx *c, const struct pjson *obj, const char *key, int required,
                const struct pjson **s, int *pres)
{
    const struct pjson *v = pjson_get(obj, key);
    *s = NULL;
    *pres = norm_presence(v);
    if (*pres != NORM_VALUE) {
        if (!required)
            return 0;
        return *pres == NORM_ABSENT ? norm_fail(c, PROTO_EMISSING, key, "required")
                                    : norm_fail(c, PROTO_ETYPE, key, "null, expected a string");
    }
    if (v->type != PJSON_STR)
        return norm_fail(c, PROTO_ETYPE, key, "expected a string");
    *s = v;
    return 0;
}

/* Records list every key, nullable ones too. */
int norm_need_key(const struct nctx *c, const struct pjson *obj, const char *key)
{
    if (c->record && pjson_get(obj, key) == NULL)
        return norm_fail(c, PROTO_EMISSING, key, "required");
    return 0;
}

/* An enum-like token (status, reasons, deposit type): 1..PROTO_MAX_STATUS printable ASCII. */
int norm_check_token(const struct nctx *c, const char *key, const struct pjson *s)
{
    if (s->u.str.n == 0)
        return norm_fail(c, PROTO_EVALUE, key, "empty");
    if (s->u.str.n > PROTO_MAX_STATUS)
        return norm_fail(c, PROTO_ETOOLONG, key, "longer than PROTO_MAX_STATUS");
    for (uint32_t i = 0; i < s->u.str.n; i++) {
        unsigned char ch = (unsigned char)s->u.str.s[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == '\\')
            return norm_fail(c, PROTO_EVALUE, key, "not a printable ASCII token");
    }
    return 0;
}

int norm_copy_str(const struct nctx *c, const char *key, const struct pjson *s, char **out)
{
    if ((*out = norm_mdup(s->u.str.s, s->u.str.n)) == NULL)
        return norm_fail(c, PROTO_ENOMEM, key, "out of memory");
    return 0;
}

/* An optional free-text string (referrer, addresses) of at most PROTO_MAX_STR bytes. */
int norm_rd_text(const struct nctx *c, const struct pjson *obj, const char *key, int required,
                 char **out, int *pres)
{
    const struct pjson *s;
    int rc = norm_rd_str(c, obj, key, required, &s, pres);
    if (rc != 0 || *pres != NORM_VALUE)
        return rc;
    if (s->u.str.n > PROTO_MAX_STR)
        return norm_fail(c, PROTO_ETOOLONG, key, "longer than PROTO_MAX_STR");
    return norm_copy_str(c, key, s, out);
}

int norm_valid_request_id(const struct nctx *c, const char *key, const char *s, size_t n)
{
    if (n > PROTO_MAX_ID)
        return norm_fail(c, PROTO_ETOOLONG, key, "request id longer than PROTO_MAX_ID");
    if (!proto_request_id_valid(s, n))
        return norm_fail(c, PROTO_EVALUE, key, "request id: 1..128 chars of [A-Za-z0-9_:.-]");
    return 0;
}

static int valid_hash(const struct nctx *c, const char *key, const struct pjson *s)
{
    if (s->u.str.n > PROTO_MAX_HASH)
        return norm_fail(c, PROTO_ETOOLONG, key, "hash longer than PROTO_MAX_HASH");
    if (!proto_hash_valid(s->u.str.s, s->u.str.n))
        return norm_fail(c, PROTO_EVALUE, key,
                         "hash: printable ASCII without space/quote/backslash");
    return 0;
}

int norm_hashlist_add(const struct nctx *c, const char *key, struct hashlist *hl,
                      const struct pjson *s)
{
    int rc = valid_hash(c, key, s);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < hl->n; i++)
        if (hl->h[i]->u.str.n == s->u.str.n &&
            memcmp(hl->h[i]->u.str.s, s->u.str.s, s->u.str.n) == 0)
            return 0;
    if (hl->n == PROTO_MAX_HASHES)
        return norm_fail(c, PROTO_ETOOLONG, key, "more than PROTO_MAX_HASHES hashes");
    hl->h[hl->n++] = s;
    return 0;
}

int norm_hashlist_store(const struct nctx *c, const char *key, const struct hashlist *hl,
                        struct proto_strv *sv)
{
    if (hl->n == 0)
        return 0;
    if ((sv->v = calloc(hl->n, sizeof(*sv->v))) == NULL)
        return norm_fail(c, PROTO_ENOMEM, key, "out of memory");
    for (; sv->n < hl->n; sv->n++) {
        int rc = norm_copy_str(c, key, hl->h[sv->n], &sv->v[sv->n]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* "inTxHashes" / "txHashes": an array of hash strings. */
static int rd_hashes(const struct nctx *c, const struct pjson *obj, const char *key, int required,
                     struct proto_strv *sv, int *pres)
{
    const struct pjson *a = pjson_get(obj, key);
    struct hashlist hl;
    *pres = norm_presence(a);
    if (*pres != NORM_VALUE) {
        if (required || (*pres == NORM_NULL && c->record))
            return norm_fail(c, *pres == NORM_ABSENT ? PROTO_EMISSING : PROTO_ETYPE, key,
                             "expected an array of hashes");
        *pres = NORM_ABSENT; /* null lists add nothing: treated as absent */
        return 0;
    }
    if (a->type != PJSON_ARR)
        return norm_fail(c, PROTO_ETYPE, key, "expected an array");
    if (a->u.kids.n > PROTO_MAX_HASHES)
        return norm_fail(c, PROTO_ETOOLONG, key, "more than PROTO_MAX_HASHES hashes");
    hl.n = 0;
    for (const struct pjson *h = a->u.kids.first; h != NULL; h = h->next) {
        if (h->type != PJSON_STR)
            return norm_fail(c, PROTO_ETYPE, key, "expected an array of strings");
        int rc = norm_hashlist_add(c, key, &hl, h);
        if (rc != 0)
            return rc;
    }
    return norm_hashlist_store(c, key, &hl, sv);
}

/* failReason / refundFailReason. Upstream: absent/null/"" -> "N/A". Record: null -> NULL. */
int norm_rd_reason(const struct nctx *c, const struct pjson *obj, const char *key, char **out,
                   int *pres)
{
    const struct pjson *s;
    int rc;
    if ((rc = norm_need_key(c, obj, key)) != 0 || (rc = norm_rd_str(c, obj, key, 0, &s, pres)) != 0)
        return rc;
    if (s != NULL && s->u.str.n == 0 && !c->record)
        s = NULL;
    if (s == NULL) {
        if (c->record)
            return 0;
        if ((*out = norm_mdup("N/A", 3)) == NULL)
            return norm_fail(c, PROTO_ENOMEM, key, "out of memory");
        return 0;
    }
    if ((rc = norm_check_token(c, key, s)) != 0)
        return rc;
    return norm_copy_str(c, key, s, out);
}

int norm_rd_deposit(const struct nctx *c, const struct pjson *obj, const char *key, int required,
                    struct proto_deposit **out, int *pres)
{
    const struct pjson *d = pjson_get(obj, key);
    *pres = norm_presence(d);
    if (*pres != NORM_VALUE)
        return required && *pres == NORM_ABSENT ? norm_fail(c, PROTO_EMISSING, key, "required") : 0;
    if (d->type != PJSON_OBJ)
        return norm_fail(c, PROTO_ETYPE, key, "expected an object or null");
    char pfx[64];
    snprintf(pfx, sizeof(pfx), "%s%s.", c->pfx, key);
    struct nctx dc = {c->err, pfx, c->record};
    struct proto_deposit *dep = calloc(1, sizeof(*dep));
    if (dep == NULL)
        return norm_fail(c, PROTO_ENOMEM, key, "out of memory");
    *out = dep; /* owned by the event from here: cleaned with it on failure */
    const struct pjson *s;
    int p, rc;
    if ((rc = norm_rd_text(&dc, d, "address", 0, &dep->address, &p)) != 0 ||
        (rc = norm_rd_text(&dc, d, "depositor", 0, &dep->depositor, &p)) != 0)
        return rc;
    /* "depositAddressType" in webhook/websocket events, "type" in /requests/v3 */
    const char *tkey = pjson_get(d, "depositAddressType") != NULL ? "depositAddressType" : "type";
    if ((rc = norm_rd_str(&dc, d, tkey, 0, &s, &p)) != 0)
        return rc;
    if (s != NULL && ((rc = norm_check_token(&dc, tkey, s)) != 0 ||
                      (rc = norm_copy_str(&dc, tkey, s, &dep->type)) != 0))
        return rc;
    if ((rc = norm_rd_str(&dc, d, "depositTxHash", 0, &s, &p)) != 0)
        return rc;
    if (s != NULL && ((rc = valid_hash(&dc, "depositTxHash", s)) != 0 ||
                      (rc = norm_copy_str(&dc, "depositTxHash", s, &dep->deposit_tx_hash)) != 0))
        return rc;
    return 0;
}

/* details: any JSON value. A string is free text; any other type is kept as its compact
 * JSON text (PROTO_HAS_DETAILS_JSON), or as a plain string of that text when nested deeper
 * than PROTO_MAX_JSON_DEPTH. Upstream values over PROTO_MAX_STR are cut at a UTF-8 boundary
 * and flagged (a cut JSON text is kept as a plain string); a record's are refused. */
static int rd_details(const struct nctx *c, const struct pjson *obj, struct status_event *ev,
                      int *pres)
{
    const struct pjson *v = pjson_get(obj, "details");
    int rc;
    if ((rc = norm_need_key(c, obj, "details")) != 0)
        return rc;
    *pres = norm_presence(v);
    if (*pres != NORM_VALUE)
        return 0;
    int json = v->type != PJSON_STR;
    size_t n = json ? pjson_compact(v, NULL, 0) : v->u.str.n;
    if (n > PROTO_MAX_STR && c->record)
        return norm_fail(c, PROTO_ETOOLONG, "details", "longer than PROTO_MAX_STR");
    size_t keep = n > PROTO_MAX_STR ? PROTO_MAX_STR + 1 : n; /* + the byte after a cut */
    char *d = malloc(keep + 1);
    if (d == NULL)
        return norm_fail(c, PROTO_ENOMEM, "details", "out of memory");
    if (json)
        pjson_compact(v, d, keep);
    else
        memcpy(d, v->u.str.s, keep);
    if (n > PROTO_MAX_STR) {
        keep = PROTO_MAX_STR;
        while (keep > 0 && ((unsigned char)d[keep] & 0xc0) == 0x80)
            keep--;
        ev->flags |= PROTO_F_DETAILS_TRUNCATED;
        json = 0;
    }
    if (json && pjson_depth(v) > PROTO_MAX_JSON_DEPTH)
        json = 0;
    d[keep] = '\0';
    ev->details = d;
    if (json)
        ev->flags |= PROTO_HAS_DETAILS_JSON;
    return 0;
}

int norm_rd_status(const struct nctx *c, const struct pjson *obj, struct status_event *ev)
{
    const struct pjson *s;
    int p, rc;
    if ((rc = norm_rd_str(c, obj, "status", 1, &s, &p)) != 0 ||
        (rc = norm_check_token(c, "status", s)) != 0 ||
        (rc = norm_copy_str(c, "status", s, &ev->status)) != 0)
        return rc;
    ev->st = proto_status_parse(ev->status);
    return 0;
}

/* Flags derived from values (upstream sources; a record carries its own). */
void norm_value_flags(struct status_event *ev)
{
    if (ev->st == PROTO_ST_OTHER)
        ev->flags |= PROTO_F_UNKNOWN_STATUS;
    if (!proto_fail_reason_known(ev->fail_reason))
        ev->flags |= PROTO_F_UNKNOWN_FAIL_REASON;
    if (!proto_refund_reason_known(ev->refund_fail_reason))
        ev->flags |= PROTO_F_UNKNOWN_REFUND_REASON;
}

/* The shared payload of websocket events, upstream webhooks, status v3 bodies and records.
 * request_id: the caller's id (status v3) or NULL to read "requestId". */
int norm_payload(const struct nctx *c, const struct pjson *d, const char *request_id,
                 struct status_event *ev)
{
    int rc, p, p2;
    int64_t v;
    const struct pjson *s;
    int rec = c->record;
    int64_t chain_min = rec ? 0 : 1;

    if (request_id != NULL) {
        if ((rc = norm_valid_request_id(c, "requestId", request_id, strlen(request_id))) != 0)
            return rc;
        if ((ev->request_id = norm_mdup(request_id, strlen(request_id))) == NULL)
            return norm_fail(c, PROTO_ENOMEM, "requestId", "out of memory");
    } else if ((rc = norm_rd_str(c, d, "requestId", 1, &s, &p)) != 0 ||
               (rc = norm_valid_request_id(c, "requestId", s->u.str.s, s->u.str.n)) != 0 ||
               (rc = norm_copy_str(c, "requestId", s, &ev->request_id)) != 0) {
        return rc;
    }
    if ((rc = norm_rd_status(c, d, ev)) != 0 ||
        (rc = norm_rd_int(c, d, "updatedAt", 1, 1, PROTO_MAX_TS, &ev->updated_at, &p)) != 0 ||
        (rc = norm_rd_int(c, d, "originChainId", rec, chain_min, PROTO_MAX_CHAIN_ID,
                          &ev->origin_chain_id, &p)) != 0 ||
        (rc = norm_rd_int(c, d, "destinationChainId", rec, chain_min, PROTO_MAX_CHAIN_ID,
                          &ev->destination_chain_id, &p)) != 0)
        return rc;
    if ((rc = rd_hashes(c, d, "inTxHashes", rec, &ev->in_tx_hashes, &p)) != 0)
        return rc;
    if (p == NORM_VALUE && !rec)
        ev->flags |= PROTO_HAS_IN_TXS;
    if ((rc = rd_hashes(c, d, "txHashes", rec, &ev->tx_hashes, &p)) != 0)
        return rc;
    if (p == NORM_VALUE && !rec)
        ev->flags |= PROTO_HAS_OUT_TXS;
    if ((rc = norm_rd_reason(c, d, "failReason", &ev->fail_reason, &p)) != 0 ||
        (rc = norm_rd_reason(c, d, "refundFailReason", &ev->refund_fail_reason, &p2)) != 0)
        return rc;
    if ((p != NORM_ABSENT || p2 != NORM_ABSENT) && !rec)
        ev->flags |= PROTO_HAS_REASONS;
    if ((rc = rd_details(c, d, ev, &p)) != 0)
        return rc;
    if (p != NORM_ABSENT && !rec)
        ev->flags |= PROTO_HAS_DETAILS;
    if ((rc = norm_need_key(c, d, "referrer")) != 0 ||
        (rc = norm_rd_text(c, d, "referrer", 0, &ev->referrer, &p)) != 0)
        return rc;
    if (p != NORM_ABSENT && !rec)
        ev->flags |= PROTO_HAS_REFERRER;
    if ((rc = norm_rd_deposit(c, d, "depositAddress", rec, &ev->deposit, &p)) != 0)
        return rc;
    if (p != NORM_ABSENT && !rec)
        ev->flags |= PROTO_HAS_DEPOSIT;
    v = 0;
    if ((rc = norm_rd_int(c, d, "quoteCreatedAt", rec, rec ? 0 : 1, PROTO_MAX_TS, &v, &p)) != 0)
        return rc;
    ev->quote_created_at = v;
    if (p != NORM_ABSENT && !rec)
        ev->flags |= PROTO_HAS_QUOTE_CREATED;
    if (!rec)
        norm_value_flags(ev);
    return 0;
}

/* ---- entry points ------------------------------------------------------------------------ */

static const char event_name[] = "request.status.updated";

/* "event" of an event envelope: must be request.status.updated. */
static int check_event_name(const struct nctx *c, const struct pjson *v, const char *key)
{
    if (v == NULL)
        return norm_fail(c, PROTO_EMISSING, key, "required");
    if (v->type != PJSON_STR)
        return norm_fail(c, PROTO_ETYPE, key, "expected a string");
    if (v->u.str.n != sizeof(event_name) - 1 || memcmp(v->u.str.s, event_name, v->u.str.n) != 0)
        return norm_fail(c, PROTO_EEVENT, key, "not request.status.updated");
    return 0;
}

/* Copy a control-frame string into a fixed buffer (truncated; "" when not a string). */
static void copy_ctl(char *dst, size_t size, const struct pjson *v)
{
    dst[0] = '\0';
    if (v != NULL && v->type == PJSON_STR)
        snprintf(dst, size, "%s", v->u.str.s);
}

static int ws_control(const struct pjson *root, const struct pjson *type, struct proto_ws_msg *msg)
{
    const struct pjson *status = pjson_get(root, "status"), *data = pjson_get(root, "data");
    const struct pjson *fid = pjson_get(pjson_get(data, "filters"), "id");
    struct proto_ws_msg m;
    memset(&m, 0, sizeof(m));
    m.kind = PROTO_WS_CONTROL;
    copy_ctl(m.ctl_status, sizeof(m.ctl_status), status);
    if (norm_is_str(type, "connection") && norm_is_str(status, "ready")) {
        m.kind = PROTO_WS_READY;
        copy_ctl(m.ctl_id, sizeof(m.ctl_id), pjson_get(data, "id"));
    } else {
        if (norm_is_str(type, "subscribe") && norm_is_str(status, "success"))
            m.kind = PROTO_WS_SUB_ACK;
        else if (norm_is_str(type, "unsubscribe") && norm_is_str(status, "success"))
            m.kind = PROTO_WS_UNSUB_ACK;
        /* the echoed request id, only when it is a valid one */
        if (fid != NULL && fid->type == PJSON_STR &&
            proto_request_id_valid(fid->u.str.s, fid->u.str.n))
            memcpy(m.ctl_id, fid->u.str.s, fid->u.str.n + 1);
    }
    if (msg != NULL)
        *msg = m;
    return 0;
}

/* Common tail: published_at from an optional integer field. */
static int rd_published(const struct nctx *c, const struct pjson *obj, const char *key,
                        struct status_event *ev)
{
    int p;
    return norm_rd_int(c, obj, key, 0, 1, PROTO_MAX_TS, &ev->published_at, &p);
}

int proto_normalize_ws(const char *buf, size_t len, int64_t observed_at,
                       struct proto_ws_msg *msg, struct status_event *out,
                       struct proto_err *err)
{
    struct pjson_doc doc;
    struct nctx c = {err, "", 0};
    int rc, control = 0;
    status_event_init(out);
    if (msg != NULL)
        memset(msg, 0, sizeof(*msg)); /* kind = PROTO_WS_EVENT */
    if ((rc = pjson_parse(buf, len, &doc, err)) != 0)
        return rc;
    const struct pjson *root = doc.root, *data, *type;
    if (root->type != PJSON_OBJ) {
        rc = norm_fail(&c, PROTO_ETYPE, "", "expected an object");
        goto out;
    }
    data = pjson_get(root, "data");
    type = pjson_get(root, "type");
    if (type != NULL && type->type != PJSON_NULL && type->type != PJSON_STR) {
        rc = norm_fail(&c, PROTO_ETYPE, "type", "expected a string");
        goto out;
    }
    /* acks carry data.event too: recognise control frames first (as the SDK does) */
    if (norm_is_str(type, "connection") || norm_is_str(type, "subscribe") ||
        norm_is_str(type, "unsubscribe")) {
        control = 1;
        rc = ws_control(root, type, msg);
        goto out;
    }
    out->source = PROTO_SRC_WS;
    out->observed_at = observed_at;
    if (pjson_get(root, "event") != NULL) { /* envelope A */
        if ((rc = check_event_name(&c, pjson_get(root, "event"), "event")) != 0)
            goto out;
        if (data == NULL || data->type != PJSON_OBJ) {
            rc = norm_fail(&c, data == NULL ? PROTO_EMISSING : PROTO_ETYPE, "data",
                           "expected an object");
            goto out;
        }
        c.pfx = "data.";
        if ((rc = norm_payload(&c, data, NULL, out)) != 0)
            goto out;
        c.pfx = "";
        rc = rd_published(&c, root, "publishedAt", out);
    } else if (data != NULL && data->type == PJSON_OBJ &&
               pjson_get(data, "event") != NULL) { /* B */
        const struct pjson *inner = pjson_get(data, "data");
        if ((rc = check_event_name(&c, pjson_get(data, "event"), "data.event")) != 0)
            goto out;
        if (inner == NULL || inner->type != PJSON_OBJ) {
            rc = norm_fail(&c, inner == NULL ? PROTO_EMISSING : PROTO_ETYPE, "data.data",
                           "expected an object");
            goto out;
        }
        c.pfx = "data.data.";
        if ((rc = norm_payload(&c, inner, NULL, out)) != 0)
            goto out;
        c.pfx = "";
        if (pjson_get(root, "publishedAt") != NULL) {
            rc = rd_published(&c, root, "publishedAt", out);
        } else {
            c.pfx = "data.";
            rc = rd_published(&c, data, "publishedAt", out);
        }
    } else if (type != NULL && type->type == PJSON_STR) {
        control = 1;
        rc = ws_control(root, type, msg); /* an undocumented control frame (error, nack...) */
    } else {
        rc = norm_fail(&c, PROTO_EMISSING, "event", "neither an event nor a control frame");
    }
out:
    if (rc != 0 || control)
        status_event_cleanup(out); /* control frames leave *out empty */
    pjson_free(&doc);
    return rc;
}

int proto_normalize_status_v3(const char *buf, size_t len, const char *request_id,
                              int64_t observed_at, struct status_event *out,
                              struct proto_err *err)
{
    struct pjson_doc doc;
    struct nctx c = {err, "", 0};
    int rc;
    status_event_init(out);
    if (request_id == NULL)
        return proto_fail(err, PROTO_EMISSING, "requestId", "the caller must give the id");
    if ((rc = pjson_parse(buf, len, &doc, err)) != 0)
        return rc;
    if (doc.root->type != PJSON_OBJ) {
        rc = norm_fail(&c, PROTO_ETYPE, "", "expected an object");
    } else {
        out->source = PROTO_SRC_POLL;
        out->observed_at = observed_at;
        rc = norm_payload(&c, doc.root, request_id, out);
    }
    if (rc != 0)
        status_event_cleanup(out);
    pjson_free(&doc);
    return rc;
}

int proto_normalize_webhook(const char *buf, size_t len, int64_t observed_at,
                            struct status_event *out, struct proto_err *err)
{
    struct pjson_doc doc;
    struct nctx c = {err, "", 0};
    int rc;
    status_event_init(out);
    if ((rc = pjson_parse(buf, len, &doc, err)) != 0)
        return rc;
    const struct pjson *root = doc.root, *data = pjson_get(root, "data");
    if (root->type != PJSON_OBJ) {
        rc = norm_fail(&c, PROTO_ETYPE, "", "expected an object");
        goto out;
    }
    if ((rc = check_event_name(&c, pjson_get(root, "event"), "event")) != 0)
        goto out;
    if (data == NULL || data->type != PJSON_OBJ) {
        rc = norm_fail(&c, data == NULL ? PROTO_EMISSING : PROTO_ETYPE, "data",
                       "expected an object");
        goto out;
    }
    out->source = PROTO_SRC_WEBHOOK;
    out->observed_at = observed_at;
    c.pfx = "data.";
    if ((rc = norm_payload(&c, data, NULL, out)) != 0)
        goto out;
    c.pfx = "";
    rc = rd_published(&c, root, "timestamp", out);
out:
    if (rc != 0)
        status_event_cleanup(out);
    pjson_free(&doc);
    return rc;
}
