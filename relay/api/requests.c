/* requests.c (api) - /v1/requests: track (POST), list (GET), read one (GET /{id}), untrack
 * (DELETE /{id}), and the pinned REST shape of a request. runs on: core thread.
 *
 * Decisions (documented in README's API section):
 *   - POST /v1/requests answers 201 when at least one id was newly tracked, 200 when every id
 *     was tracked already; body {"tracked": distinct ids, "created": newly tracked}.
 *   - A tracked request not yet observed answers "status": null (and null/empty upstream
 *     fields, "seq": 0). Upstream fields use the upstream's own conventions ("N/A").
 *   - GET /v1/requests lists every known request (tracked or not; see "tracked"), oldest
 *     created first (first seen until its facts say: {P}:ct), with status= too; "limit" above 500 is clamped to 500; the cursor is opaque.
 *   - With q, user, txHash, referrer, from or to it is a search (relay/api/search.h,
 *     docs/search.md): oldest created first, the same cursor shape over the creation time. */
#include "relay/api/internal.h"
#include "relay/api/search.h"
#include "protocol/event.h"
#include "protocol/proto.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "protocol/facts.h"
#include "relay/ingest/chains.h"
#include "relay/ingest/track.h"
#include "store/facts.h"
#include "store/requests.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACK_MAX_IDS 1000
#define METADATA_MAX PROTO_MAX_METADATA /* protocol/event.h: what a record may carry */
#define LIST_LIMIT_DEFAULT 50
#define LIST_LIMIT_MAX 500
#define CURSOR_MAX 512

/* ---- opaque list cursor: base64url (no padding) of "<score>|<id>" ---------------------------- */

static const char b64u[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *cursor_encode(const char *score, const char *id)
{
    char raw[CURSOR_MAX];
    int n = snprintf(raw, sizeof(raw), "%s|%s", score, id);
    if (n < 0 || (size_t)n >= sizeof(raw))
        return NULL;
    char *out = xmalloc((size_t)n * 4 / 3 + 4);
    size_t o = 0;
    for (int i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)raw[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)raw[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)raw[i + 2];
        out[o++] = b64u[(v >> 18) & 63];
        out[o++] = b64u[(v >> 12) & 63];
        if (i + 1 < n)
            out[o++] = b64u[(v >> 6) & 63];
        if (i + 2 < n)
            out[o++] = b64u[v & 63];
    }
    out[o] = '\0';
    return out;
}

/* Decode a cursor into score digits and a valid id. Returns 0 or -1. */
static int cursor_decode(const char *s, char *score, size_t scoren, char *id, size_t idn)
{
    char raw[CURSOR_MAX];
    size_t len = strlen(s), o = 0;
    if (len == 0 || len >= sizeof(raw) || len % 4 == 1)
        return -1;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        const char *p = strchr(b64u, s[i]);
        if (p == NULL || s[i] == '\0')
            return -1;
        acc = (acc << 6) | (unsigned)(p - b64u);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            raw[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    raw[o] = '\0';
    char *bar = memchr(raw, '|', o);
    if (bar == NULL)
        return -1;
    size_t sl = (size_t)(bar - raw), il = o - sl - 1;
    if (sl == 0 || sl >= scoren || sl > 17 || il >= idn || !proto_request_id_valid(bar + 1, il))
        return -1;
    for (size_t i = 0; i < sl; i++)
        if (raw[i] < '0' || raw[i] > '9')
            return -1;
    memcpy(score, raw, sl);
    score[sl] = '\0';
    memcpy(id, bar + 1, il);
    id[il] = '\0';
    return 0;
}

/* ---- request record -> JSON ------------------------------------------------------------------ */

static json_t *copy_or(json_t *data, const char *k, json_t *dflt)
{
    json_t *v = data != NULL ? json_object_get(data, k) : NULL;
    if (v != NULL) {
        json_decref(dflt);
        return json_incref(v);
    }
    return dflt;
}

static json_t *num_or_null(const struct store_field *f)
{
    if (f->str == NULL)
        return json_null();
    char *end;
    long long v = strtoll(f->str, &end, 10);
    return end == f->str ? json_null() : json_integer(v);
}

static json_t *str_or_null(const struct store_field *f)
{
    return f->str != NULL ? json_stringn(f->str, f->len) : json_null();
}

/* The upstream-shaped fields of the request's newest record (into o), copied from the
 * webhook body's "data"; the status falls back on the hash's. */
static void set_data_fields(json_t *o, json_t *data, const struct store_request *r)
{
    static const char *const nulls[] = {"originChainId",    "destinationChainId",
                                        "failReason",       "refundFailReason", "details",
                                        "depositAddress"};
    json_object_set_new(o, "status", copy_or(data, "status", str_or_null(&r->status)));
    json_object_set_new(o, "updatedAt", copy_or(data, "updatedAt", json_null()));
    json_t *seqv = num_or_null(&r->seq);
    if (json_is_null(seqv)) {
        json_decref(seqv);
        seqv = json_integer(0);
    }
    json_object_set_new(o, "seq", seqv);
    for (size_t i = 0; i < 2; i++)
        json_object_set_new(o, nulls[i], copy_or(data, nulls[i], json_null()));
    json_object_set_new(o, "inTxHashes", copy_or(data, "inTxHashes", json_array()));
    json_object_set_new(o, "txHashes", copy_or(data, "txHashes", json_array()));
    for (size_t i = 2; i < ARRAY_LEN(nulls); i++)
        json_object_set_new(o, nulls[i], copy_or(data, nulls[i], json_null()));
}

/* The request facts (DESIGN "Request facts") of a stored value, explorer links built again
 * from the chain list known now (facts stored before it arrived have none): a new object, or
 * null when there are none (or they are unreadable). Shared with the dashboard (search.h). */
json_t *api_facts_json(const struct store_field *f, const struct proto_explorers *ex)
{
    char *text = NULL, *linked = NULL;
    size_t len = 0, llen = 0;
    struct proto_err perr = {0};
    json_t *o = NULL;
    if (f->str == NULL || store_facts_decode(f->str, f->len, &text, &len) != 0)
        return json_null();
    if (ex != NULL && proto_facts_relink(text, len, ex, &linked, &llen, &perr) == 0) {
        free(text);
        text = linked;
        len = llen;
    }
    o = json_loadb(text, len, 0, NULL);
    free(text);
    return o != NULL ? o : json_null();
}

/* The pinned REST shape of one request from its hash fields (SRF_REST). Returns a new
 * object, NULL when the request does not exist. */
static json_t *request_json(const char *id, const struct store_request *r)
{
    if (!r->found)
        return NULL;
    json_t *data = NULL, *reorg = NULL;
    if (r->rec.str != NULL) {
        struct status_event ev;
        status_event_init(&ev);
        if (api_decode_record(r->rec.str, r->rec.len, &ev, id) == 0)
            data = api_event_parts(&ev, &reorg); /* reorg: the statusrelay object */
        status_event_cleanup(&ev);
    }
    json_t *o = json_object();
    if (o == NULL) {
        json_decref(data);
        json_decref(reorg);
        return NULL;
    }
    json_t *metadata = r->meta.str != NULL ? json_loadb(r->meta.str, r->meta.len, 0, NULL) : NULL;
    json_object_set_new(o, "requestId", json_string(id));
    set_data_fields(o, data, r);
    json_object_set_new(o, "metadata", metadata != NULL ? metadata : json_null());
    json_object_set_new(o, "tracked", json_boolean(r->tracked));
    json_object_set_new(o, "firstSeenAt", num_or_null(&r->first));
    json_object_set_new(o, "lastSource", str_or_null(&r->src));
    /* no phase: written before watches existed (watch_migrate.lua converts the tracked
     * unfinished ones at start-up), so ended */
    json_object_set_new(o, "watch", r->watch.str != NULL && r->watch.len > 0
                                        ? json_stringn(r->watch.str, r->watch.len)
                                        : json_string("ended"));
    json_object_set_new(o, "watchUntil", num_or_null(&r->wu));
    json_object_set_new(o, "reorg", copy_or(reorg, "reorg", json_null()));
    json_decref(data);
    json_decref(reorg);
    return o;
}

/* ---- POST /v1/requests ----------------------------------------------------------------------- */

static void on_tracked(void *arg, const char *err, size_t created)
{
    struct ctx *x = arg;
    if (err != NULL) {
        api_reply_unavailable(x, "tracking not stored");
        return;
    }
    api_reply_json(
        x, created > 0 ? 201 : 200,
        json_pack("{s:I,s:I}", "tracked", (json_int_t)x->ntracked, "created", (json_int_t)created));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The ids of root ({"requestId": id} or {"requestIds": [...]}, distinct) into *ids (malloc'd,
 * borrowed from root) and *n. Returns 0, or -1 after answering 400. */
static int parse_ids(struct ctx *x, json_t *root, const char ***ids, size_t *n)
{
    json_t *one = json_object_get(root, "requestId"), *many = json_object_get(root, "requestIds");
    *n = 0;
    if ((one == NULL) == (many == NULL)) {
        api_reply_error(x, 400, "invalid_body", NULL,
                        "give exactly one of \"requestId\" (string) or \"requestIds\" (array)");
        return -1;
    }
    if (one != NULL) {
        if (!json_is_string(one) ||
            !proto_request_id_valid(json_string_value(one), json_string_length(one))) {
            api_reply_error(x, 400, "invalid_request_id", "requestId",
                            "requestId must be a string of 1..%d characters of A-Z a-z "
                            "0-9 _ : . -",
                            PROTO_MAX_ID);
            return -1;
        }
        *ids = xcalloc(1, sizeof(**ids));
        (*ids)[(*n)++] = json_string_value(one);
        return 0;
    }
    if (!json_is_array(many)) {
        api_reply_error(x, 400, "invalid_body", "requestIds", "requestIds must be an array");
        return -1;
    }
    size_t total = json_array_size(many);
    if (total == 0 || total > TRACK_MAX_IDS) {
        api_reply_error(x, 400, "invalid_body", "requestIds",
                        "requestIds must hold 1..%d ids (got %zu)", TRACK_MAX_IDS, total);
        return -1;
    }
    *ids = xcalloc(total, sizeof(**ids));
    for (size_t i = 0; i < total; i++) {
        json_t *v = json_array_get(many, i);
        if (!json_is_string(v) ||
            !proto_request_id_valid(json_string_value(v), json_string_length(v))) {
            char field[32];
            snprintf(field, sizeof(field), "requestIds[%zu]", i);
            api_reply_error(x, 400, "invalid_request_id", field,
                            "%s is not a valid request id (a string of 1..%d characters of "
                            "A-Z a-z 0-9 _ : . -)",
                            field, PROTO_MAX_ID);
            return -1;
        }
        (*ids)[(*n)++] = json_string_value(v);
    }
    /* distinct ids: "tracked" counts each once */
    qsort(*ids, *n, sizeof(**ids), cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < *n; i++)
        if (u == 0 || strcmp((*ids)[u - 1], (*ids)[i]) != 0)
            (*ids)[u++] = (*ids)[i];
    *n = u;
    return 0;
}

/* The "metadata" of a track body (NULL or null: none) as stored text into *text (malloc'd,
 * NULL when none). Returns 0, or -1 after answering 400 / 500. */
static int parse_metadata(struct ctx *x, json_t *meta, char **text)
{
    *text = NULL;
    if (meta == NULL || json_is_null(meta))
        return 0;
    if (!json_is_object(meta)) {
        api_reply_error(x, 400, "invalid_metadata", "metadata", "metadata must be a JSON object");
        return -1;
    }
    if ((*text = json_dumps(meta, JSON_COMPACT)) == NULL) {
        api_reply_oom(x);
        return -1;
    }
    size_t len = strlen(*text);
    if (len > METADATA_MAX) {
        api_reply_error(x, 400, "invalid_metadata", "metadata",
                        "metadata must be at most %d bytes of compact JSON (got %zu)",
                        METADATA_MAX, len);
        return -1;
    }
    struct proto_err pe; /* the record's own rule (statusrelay.metadata in events) */
    memset(&pe, 0, sizeof(pe));
    if (proto_metadata_parse(*text, len, NULL, &pe) == 0)
        return 0;
    if (pe.code == PROTO_ENOMEM)
        api_reply_oom(x);
    else if (pe.code == PROTO_ETOOLONG)
        api_reply_error(x, 400, "invalid_metadata", "metadata",
                        "metadata must be nested at most %d levels deep", PROTO_MAX_JSON_DEPTH);
    else
        api_reply_error(x, 400, "invalid_metadata", "metadata",
                        "metadata is not storable JSON: %s", pe.msg);
    return -1;
}

void api_h_track(struct ctx *x)
{
    json_t *root = api_parse_body(x);
    if (root == NULL)
        return;
    const char **ids = NULL;
    char *meta_text = NULL;
    size_t n = 0;
    if (json_is_array(root)) {
        api_reply_error(x, 400, "invalid_body", NULL,
                        "a bare JSON array is not accepted: send {\"requestIds\": [...]}");
        goto out;
    }
    if (!json_is_object(root)) {
        api_reply_error(x, 400, "invalid_body", NULL,
                        "body must be a JSON object with \"requestId\" or \"requestIds\"");
        goto out;
    }
    if (parse_ids(x, root, &ids, &n) != 0 ||
        parse_metadata(x, json_object_get(root, "metadata"), &meta_text) != 0)
        goto out;
    x->ntracked = n;
    if (track_requests(x->api->c, ids, n, meta_text, on_tracked, x) != 0)
        api_reply_unavailable(x, "cannot track");
out:
    free(meta_text);
    free(ids);
    json_decref(root);
}

/* ---- GET /v1/requests/{id} ------------------------------------------------------------------- */

static void on_get(void *arg, const char *err, const struct store_request *r)
{
    struct ctx *x = arg;
    if (err != NULL) {
        api_reply_unavailable(x, "cannot read");
        return;
    }
    json_t *o = request_json(x->id, r);
    if (o == NULL) {
        api_reply_error(x, 404, "not_found", NULL, "request %s is not known", x->id);
        return;
    }
    json_object_set_new(o, "request",
                        api_facts_json(&r->facts, chains_explorers(x->api->c->chains)));
    api_reply_json(x, 200, o);
}

void api_h_get(struct ctx *x)
{
    if (api_take_id(x, x->param[0], x->param_len[0], "requestId") != 0)
        return;
    if (store_request_get(x->api->c->store, x->id, SRF_REST | SRF_FACTS, on_get, x) != 0)
        api_reply_unavailable(x, "cannot read");
}

/* ---- DELETE /v1/requests/{id} ---------------------------------------------------------------- */

static void on_untracked(void *arg, const char *err, int found)
{
    struct ctx *x = arg;
    if (err != NULL)
        api_reply_unavailable(x, "cannot untrack");
    else if (!found)
        api_reply_error(x, 404, "not_found", NULL, "request %s is not known", x->id);
    else
        api_reply_empty(x, 204);
}

void api_h_untrack(struct ctx *x)
{
    if (api_take_id(x, x->param[0], x->param_len[0], "requestId") != 0)
        return;
    if (untrack_request(x->api->c, x->id, on_untracked, x) != 0)
        api_reply_unavailable(x, "cannot untrack");
}

/* ---- GET /v1/requests?status=&stuck=&cursor=&limit=&q=&user=&txHash=&referrer=&from=&to= ----
 * A page of the index (every partition's, merged: store/requests.h) or of a search
 * (store/search.h, relay/api/search.h), then the records of its ids, put in the page's
 * order. */
struct list_read {
    struct ctx *x;
    json_t **obj; /* per id of x->ids: its REST shape, NULL when it vanished meanwhile */
};

static void on_list_each(void *arg, size_t i, const struct store_request *r)
{
    struct list_read *lr = arg;
    lr->obj[i] = request_json(lr->x->ids[i], r);
}

static void on_list_read(void *arg, const char *err)
{
    struct list_read *lr = arg;
    struct ctx *x = lr->x;
    size_t n = x->nids; /* x is freed by its answer */
    if (x->req == NULL || x->api == NULL) {
        api_ctx_free(x);
    } else if (err != NULL) {
        api_reply_unavailable(x, "cannot list");
    } else {
        json_t *list = json_array();
        for (size_t i = 0; i < x->nids; i++) {
            json_t *o = lr->obj[i];
            const char *st = o != NULL ? json_string_value(json_object_get(o, "status")) : NULL;
            if (o == NULL || (x->only_status[0] != '\0' && /* stuck list by status */
                              (st == NULL || strcmp(st, x->only_status) != 0)))
                continue;
            json_array_append(list, o);
        }
        json_t *cur = x->next_cursor != NULL ? json_string(x->next_cursor) : json_null();
        api_reply_json(x, 200, json_pack("{s:o,s:o}", "requests", list, "cursor", cur));
    }
    for (size_t i = 0; i < n; i++)
        json_decref(lr->obj[i]); /* NULL-safe; the list holds its own references */
    free(lr->obj);
    free(lr);
}

static void on_list_page(void *arg, const char *err, const struct store_req_ref *e, size_t n,
                         int more)
{
    struct ctx *x = arg;
    if (x->req == NULL || x->api == NULL) { /* gone: skip the second read */
        api_ctx_free(x);
        return;
    }
    if (err != NULL) {
        api_reply_unavailable(x, "cannot list");
        return;
    }
    if (more) /* a next page: the cursor is the last entry shown */
        x->next_cursor = cursor_encode(e[n - 1].score, e[n - 1].id);
    if (n == 0) {
        api_reply_json(x, 200, json_pack("{s:[],s:n}", "requests", "cursor"));
        return;
    }
    x->ids = xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        x->ids[x->nids++] = xstrdup(e[i].id);
    struct list_read *lr = xcalloc(1, sizeof(*lr));
    lr->x = x;
    lr->obj = xcalloc(n, sizeof(*lr->obj));
    store_requests_read(x->api->c->store, (const char *const *)x->ids, n, on_list_each,
                        on_list_read, lr);
}

/* A search page (store/search.h): the query and its cursor, kept across the one upstream
 * term lookup a search that found nothing may make (relay/api/search.h). */
struct list_search {
    struct ctx *x;
    struct store_search_query q; /* strings borrowed from x's query, but for the cursor's */
    char score[24], cid[PROTO_MAX_ID + 1];
    int looked_up;
    int probed; /* the term alone: 0 not asked, 1 unknown here, 2 known (or unreadable) */
};

static void on_search_page(void *arg, const char *err, const struct store_req_ref *e, size_t n,
                           int more);

static void on_term_done(void *arg, size_t found)
{
    struct list_search *ls = arg;
    struct ctx *x = ls->x;
    (void)found;
    ls->looked_up = 1;
    if (x->req == NULL || x->api == NULL) {
        api_ctx_free(x);
        free(ls);
        return;
    }
    store_search_page(x->api->c->store, &ls->q, on_search_page, ls);
}

/* The term alone (the other parts excluded what it found, or not): known here or not. */
static void on_term_probe(void *arg, const char *err, const struct store_req_ref *e, size_t n,
                          int more)
{
    struct list_search *ls = arg;
    (void)e;
    (void)more;
    ls->probed = err != NULL || n > 0 ? 2 : 1;
    on_search_page(ls, NULL, NULL, 0, 0);
}

static void on_search_page(void *arg, const char *err, const struct store_req_ref *e, size_t n,
                           int more)
{
    struct list_search *ls = arg;
    struct ctx *x = ls->x;
    const char *term = api_search_term(&ls->q);
    if (err == NULL && n == 0 && !ls->looked_up && ls->probed != 2 && ls->score[0] == '\0' &&
        term != NULL && x->req != NULL && x->api != NULL) {
        const struct store_search_query *q = &ls->q;
        if (ls->probed == 0 && (q->user != NULL || q->referrer != NULL || q->from >= 0 ||
                                q->to >= 0 || q->status != NULL ||
                                (q->q != NULL && q->tx_hash != NULL))) {
            /* other parts given: is the term itself unknown here? */
            struct store_search_query probe = {.q = q->q, .tx_hash = q->q ? NULL : q->tx_hash,
                                               .from = -1, .to = -1, .limit = 1};
            store_search_page(x->api->c->store, &probe, on_term_probe, ls);
            return;
        }
        /* nothing known here: ask the upstream once */
        int rc = api_search_term_lookup(x, term, on_term_done, ls);
        if (rc == 0)
            return;
        if (rc > 0) {
            char ra[16];
            snprintf(ra, sizeof(ra), "%d", rc);
            evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", ra);
            free(ls);
            api_reply_error(x, 429, "rate_limited", NULL,
                            "too many searches for terms unknown here from this address (at "
                            "most %lld a minute without the admin token); retry in %d s",
                            (long long)x->api->c->cfg->anon_miss_rate, rc);
            return;
        }
    }
    free(ls);
    on_list_page(x, err, e, n, more);
}

static void list_search(struct ctx *x, const struct store_search_query *q, const char *status,
                        const char *score, const char *cid)
{
    struct list_search *ls = xcalloc(1, sizeof(*ls));
    ls->x = x;
    ls->q = *q;
    snprintf(ls->score, sizeof(ls->score), "%s", score);
    snprintf(ls->cid, sizeof(ls->cid), "%s", cid);
    ls->q.status = status != NULL && status[0] != '\0' ? status : NULL;
    ls->q.after_score = ls->score;
    ls->q.after_id = ls->cid;
    ls->q.limit = x->limit;
    store_search_page(x->api->c->store, &ls->q, on_search_page, ls);
}

static int status_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > PROTO_MAX_STATUS)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

void api_h_list(struct ctx *x)
{
    if (api_parse_limit(x, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX) != 0)
        return;
    const char *status = api_query_get(x, "status"), *cursor = api_query_get(x, "cursor");
    char score[24] = "", cid[PROTO_MAX_ID + 1] = "";
    if (status != NULL && status[0] != '\0' && !status_name_valid(status)) {
        api_reply_error(x, 400, "invalid_parameter", "status",
                        "status must be 1..%d characters of A-Z a-z 0-9 _ -", PROTO_MAX_STATUS);
        return;
    }
    if (cursor != NULL && cursor[0] != '\0' &&
        cursor_decode(cursor, score, sizeof(score), cid, sizeof(cid)) != 0) {
        api_reply_error(x, 400, "invalid_cursor", "cursor", "cursor is not one this API returned");
        return;
    }
    const char *stuck = api_query_get(x, "stuck");
    if (stuck != NULL && strcmp(stuck, "true") != 0 && strcmp(stuck, "false") != 0) {
        api_reply_error(x, 400, "invalid_parameter", "stuck", "stuck must be true or false");
        return;
    }
    struct core *c = x->api->c;
    struct store_req_query q = {.index = STORE_REQ_ALL, .after_score = score, .after_id = cid,
                                .limit = x->limit};
    if (stuck != NULL && strcmp(stuck, "true") == 0) {
        /* active, not waiting, status unchanged for STUCK_AFTER ({P}:act by last change) */
        q.index = STORE_REQ_STUCK;
        q.max = wall_ms() - c->cfg->stuck_after_ms - 1;
        if (status != NULL)
            snprintf(x->only_status, sizeof(x->only_status), "%s", status);
    } else if (status != NULL && status[0] != '\0') {
        q.index = STORE_REQ_STATUS;
        q.status = status;
    }
    struct store_search_query sq = {.from = -1, .to = -1};
    if (api_search_parse(x, &sq) != 0)
        return;
    if (store_search_given(&sq)) {
        if (q.index == STORE_REQ_STUCK) {
            api_reply_error(x, 400, "invalid_parameter", "stuck",
                            "stuck cannot be combined with q, user, txHash, referrer, from, to");
            return;
        }
        list_search(x, &sq, status, score, cid);
        return;
    }
    store_requests_page(c->store, &q, on_list_page, x);
}
