/* requests.c (api) - /v1/requests: track (POST), list (GET), read one (GET /{id}), untrack
 * (DELETE /{id}), and the pinned REST shape of a request. runs on: core thread.
 *
 * Decisions (documented in README's API section):
 *   - POST /v1/requests answers 201 when at least one id was newly tracked, 200 when every id
 *     was tracked already; body {"tracked": distinct ids, "created": newly tracked}.
 *   - A tracked request not yet observed answers "status": null (and null/empty upstream
 *     fields, "seq": 0). Upstream fields use the upstream's own conventions ("N/A").
 *   - GET /v1/requests lists every known request (tracked or not; see "tracked"), oldest first
 *     by first-seen time; "limit" above 500 is clamped to 500; the cursor is opaque. */
#include "relay/api/internal.h"
#include "protocol/event.h"
#include "protocol/proto.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/ingest/track.h"
#include "store/keys.h"
#include "store/store.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACK_MAX_IDS 1000
#define METADATA_MAX PROTO_MAX_METADATA /* protocol/event.h: what a record may carry */
#define LIST_LIMIT_DEFAULT 50
#define LIST_LIMIT_MAX 500
#define CURSOR_MAX 512

/* Request fields of GET /v1/requests/{id} and of the list, in requests_read.lua's order. */
enum { RF_REC, RF_SEQ, RF_STATUS, RF_META, RF_FIRST, RF_TRK, RF_SRC, RF_WATCH, RF_WU, RF_COUNT };

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

static const redisReply *field_of(const redisReply *arr, int i)
{
    if (arr == NULL || arr->type != REDIS_REPLY_ARRAY || (size_t)i >= arr->elements)
        return NULL;
    const redisReply *r = arr->element[i];
    return r != NULL && r->type == REDIS_REPLY_STRING ? r : NULL;
}

static json_t *copy_or(json_t *data, const char *k, json_t *dflt)
{
    json_t *v = data != NULL ? json_object_get(data, k) : NULL;
    if (v != NULL) {
        json_decref(dflt);
        return json_incref(v);
    }
    return dflt;
}

static json_t *num_or_null(const redisReply *r)
{
    if (r == NULL)
        return json_null();
    char *end;
    long long v = strtoll(r->str, &end, 10);
    return end == r->str ? json_null() : json_integer(v);
}

/* The pinned REST shape of one request from its hash fields (an HMGET-like array in
 * requests_read.lua order). Returns a new object, NULL when the request does not exist. */
static json_t *request_json(const char *id, const redisReply *f)
{
    int any = 0;
    for (int i = 0; i < RF_COUNT; i++)
        if (field_of(f, i) != NULL)
            any = 1;
    if (!any)
        return NULL;
    const redisReply *rec = field_of(f, RF_REC), *seq = field_of(f, RF_SEQ),
                     *st = field_of(f, RF_STATUS), *meta = field_of(f, RF_META),
                     *first = field_of(f, RF_FIRST), *trk = field_of(f, RF_TRK),
                     *src = field_of(f, RF_SRC), *watch = field_of(f, RF_WATCH),
                     *wu = field_of(f, RF_WU);
    json_t *data = NULL, *reorg = NULL;
    if (rec != NULL) {
        struct status_event ev;
        status_event_init(&ev);
        if (api_decode_record(rec->str, rec->len, &ev, id) == 0)
            data = api_event_parts(&ev, &reorg); /* reorg: the statusrelay object */
        status_event_cleanup(&ev);
    }
    json_t *o = json_object();
    if (o == NULL) {
        json_decref(data);
        json_decref(reorg);
        return NULL;
    }
    json_t *metadata = meta != NULL ? json_loadb(meta->str, meta->len, 0, NULL) : NULL;
    json_t *seqv = num_or_null(seq);
    if (json_is_null(seqv)) {
        json_decref(seqv);
        seqv = json_integer(0);
    }
    json_object_set_new(o, "requestId", json_string(id));
    json_object_set_new(
        o, "status",
        copy_or(data, "status", st != NULL ? json_stringn(st->str, st->len) : json_null()));
    json_object_set_new(o, "updatedAt", copy_or(data, "updatedAt", json_null()));
    json_object_set_new(o, "seq", seqv);
    json_object_set_new(o, "originChainId", copy_or(data, "originChainId", json_null()));
    json_object_set_new(o, "destinationChainId", copy_or(data, "destinationChainId", json_null()));
    json_object_set_new(o, "inTxHashes", copy_or(data, "inTxHashes", json_array()));
    json_object_set_new(o, "txHashes", copy_or(data, "txHashes", json_array()));
    json_object_set_new(o, "failReason", copy_or(data, "failReason", json_null()));
    json_object_set_new(o, "refundFailReason", copy_or(data, "refundFailReason", json_null()));
    json_object_set_new(o, "details", copy_or(data, "details", json_null()));
    json_object_set_new(o, "depositAddress", copy_or(data, "depositAddress", json_null()));
    json_object_set_new(o, "metadata", metadata != NULL ? metadata : json_null());
    json_object_set_new(o, "tracked",
                        json_boolean(trk != NULL && trk->len == 1 && trk->str[0] == '1'));
    json_object_set_new(o, "firstSeenAt", num_or_null(first));
    json_object_set_new(o, "lastSource",
                        src != NULL ? json_stringn(src->str, src->len) : json_null());
    /* no phase: written before watches existed (watch_migrate.lua converts the tracked
     * unfinished ones at start-up), so ended */
    json_object_set_new(o, "watch",
                        json_string(watch != NULL && watch->len > 0 ? watch->str : "ended"));
    json_t *wuv = num_or_null(wu);
    json_object_set_new(o, "watchUntil", wuv != NULL ? wuv : json_null());
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
    json_t *one = json_object_get(root, "requestId"), *many = json_object_get(root, "requestIds"),
           *meta = json_object_get(root, "metadata");
    if ((one == NULL) == (many == NULL)) {
        api_reply_error(x, 400, "invalid_body", NULL,
                        "give exactly one of \"requestId\" (string) or \"requestIds\" (array)");
        goto out;
    }
    if (one != NULL) {
        if (!json_is_string(one) ||
            !proto_request_id_valid(json_string_value(one), json_string_length(one))) {
            api_reply_error(x, 400, "invalid_request_id", "requestId",
                            "requestId must be a string of 1..%d characters of A-Z a-z "
                            "0-9 _ : . -",
                            PROTO_MAX_ID);
            goto out;
        }
        ids = xcalloc(1, sizeof(*ids));
        ids[n++] = json_string_value(one);
    } else {
        if (!json_is_array(many)) {
            api_reply_error(x, 400, "invalid_body", "requestIds", "requestIds must be an array");
            goto out;
        }
        size_t total = json_array_size(many);
        if (total == 0 || total > TRACK_MAX_IDS) {
            api_reply_error(x, 400, "invalid_body", "requestIds",
                            "requestIds must hold 1..%d ids (got %zu)", TRACK_MAX_IDS, total);
            goto out;
        }
        ids = xcalloc(total, sizeof(*ids));
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
                goto out;
            }
            ids[n++] = json_string_value(v);
        }
        /* distinct ids: "tracked" counts each once */
        qsort(ids, n, sizeof(*ids), cmp_str);
        size_t u = 0;
        for (size_t i = 0; i < n; i++)
            if (u == 0 || strcmp(ids[u - 1], ids[i]) != 0)
                ids[u++] = ids[i];
        n = u;
    }
    if (meta != NULL && !json_is_null(meta)) {
        if (!json_is_object(meta)) {
            api_reply_error(x, 400, "invalid_metadata", "metadata",
                            "metadata must be a JSON object");
            goto out;
        }
        meta_text = json_dumps(meta, JSON_COMPACT);
        if (meta_text == NULL) {
            api_reply_oom(x);
            goto out;
        }
        if (strlen(meta_text) > METADATA_MAX) {
            api_reply_error(x, 400, "invalid_metadata", "metadata",
                            "metadata must be at most %d bytes of compact JSON (got %zu)",
                            METADATA_MAX, strlen(meta_text));
            goto out;
        }
        struct proto_err pe; /* the record's own rule (statusrelay.metadata in events) */
        memset(&pe, 0, sizeof(pe));
        if (proto_metadata_parse(meta_text, strlen(meta_text), NULL, &pe) != 0) {
            if (pe.code == PROTO_ENOMEM)
                api_reply_oom(x);
            else if (pe.code == PROTO_ETOOLONG)
                api_reply_error(x, 400, "invalid_metadata", "metadata",
                                "metadata must be nested at most %d levels deep",
                                PROTO_MAX_JSON_DEPTH);
            else
                api_reply_error(x, 400, "invalid_metadata", "metadata",
                                "metadata is not storable JSON: %s", pe.msg);
            goto out;
        }
    }
    x->ntracked = n;
    if (track_requests(x->api->c, ids, n, meta_text, on_tracked, x) != 0)
        api_reply_unavailable(x, "cannot track");
out:
    free(meta_text);
    free(ids);
    json_decref(root);
}

/* ---- GET /v1/requests/{id} ------------------------------------------------------------------- */

static void on_get(void *arg, const char *err, redisReply *r)
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
    api_reply_json(x, 200, o);
}

void api_h_get(struct ctx *x)
{
    if (api_take_id(x, x->param[0], x->param_len[0], "requestId") != 0)
        return;
    struct core *c = x->api->c;
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag_of(c->store, x->id), "req", x->id, NULL);
    if (store_cmd(c->store, on_get, x, "HMGET %s rec seq status meta first trk src watch wu", k) != 0)
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

/* ---- GET /v1/requests?status=&stuck=&cursor=&limit= ------------------------------------------------- */

static void on_list_read(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements != x->nids) {
        api_reply_unavailable(x, "cannot list");
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < x->nids; i++) {
        json_t *o = request_json(x->ids[i], r->element[i]);
        const char *st = o != NULL ? json_string_value(json_object_get(o, "status")) : NULL;
        if (o != NULL && x->only_status[0] != '\0' &&
            (st == NULL || strcmp(st, x->only_status) != 0)) {
            json_decref(o); /* stuck list filtered by status: another status */
            continue;
        }
        if (o != NULL) /* NULL: the request vanished between the two reads */
            json_array_append_new(list, o);
    }
    json_t *cur = x->next_cursor != NULL ? json_string(x->next_cursor) : json_null();
    api_reply_json(x, 200, json_pack("{s:o,s:o}", "requests", list, "cursor", cur));
}

static void on_list_page(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (x->req == NULL || x->api == NULL) { /* gone: skip the second read */
        api_ctx_free(x);
        return;
    }
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        api_reply_unavailable(x, "cannot list");
        return;
    }
    size_t n = r->elements / 2;
    if (n > (size_t)x->limit) {
        n = (size_t)x->limit;
        const redisReply *id = r->element[2 * n - 2], *score = r->element[2 * n - 1];
        if (id->type == REDIS_REPLY_STRING && score->type == REDIS_REPLY_STRING)
            x->next_cursor = cursor_encode(score->str, id->str);
    }
    if (n == 0) {
        api_reply_json(x, 200, json_pack("{s:[],s:n}", "requests", "cursor"));
        return;
    }
    struct core *c = x->api->c;
    x->ids = xcalloc(n, sizeof(char *));
    const char **argv = xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        const redisReply *id = r->element[2 * i];
        x->ids[x->nids++] = xstrndup(id->type == REDIS_REPLY_STRING ? id->str : "",
                                     id->type == REDIS_REPLY_STRING ? id->len : 0);
        char *k = xmalloc(KEY_MAX);
        key_build(k, KEY_MAX, store_tag(c->store), "req", x->ids[i], NULL);
        argv[i] = k;
    }
    int rc = store_eval(c->store, &x->api->read_sc, on_list_read, x, (int)n, (int)n, argv, NULL);
    for (size_t i = 0; i < n; i++)
        free((char *)argv[i]);
    free(argv);
    if (rc != 0)
        api_reply_unavailable(x, "cannot list");
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

/* ---- the same list with several partitions (docs/partitions.md) ----------------------------
 * Each partition's index is paged from the same cursor, the pages are merged in the order of
 * one zset - score, then id bytes - which is the order across partitions too, so the cursor
 * keeps its meaning; then the states are read partition by partition and put back in order. */
struct list_merge {
    struct ctx *x;
    unsigned np, pending;
    int failed;
    size_t n, cap;
    struct lm_entry {
        char *id, *score;
        json_t *obj; /* after the read: its REST shape, NULL when it vanished */
    } *e;
};

static void lm_free(struct list_merge *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->e[i].id);
        free(m->e[i].score);
        if (m->e[i].obj != NULL)
            json_decref(m->e[i].obj);
    }
    free(m->e);
    free(m);
}

static int lm_cmp(const void *a, const void *b)
{
    const struct lm_entry *x = a, *y = b;
    long long sx = strtoll(x->score, NULL, 10), sy = strtoll(y->score, NULL, 10);
    if (sx != sy)
        return sx < sy ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* The last answer is in: reply, or free everything when the client left. */
static void lm_reply(struct list_merge *m)
{
    struct ctx *x = m->x;
    if (x->req == NULL || x->api == NULL) {
        api_ctx_free(x);
    } else if (m->failed) {
        api_reply_unavailable(x, "cannot list");
    } else {
        json_t *list = json_array();
        for (size_t i = 0; i < m->n; i++) {
            json_t *o = m->e[i].obj;
            const char *st = o != NULL ? json_string_value(json_object_get(o, "status")) : NULL;
            if (o == NULL || (x->only_status[0] != '\0' &&
                              (st == NULL || strcmp(st, x->only_status) != 0)))
                continue;
            json_array_append(list, o);
        }
        json_t *cur = x->next_cursor != NULL ? json_string(x->next_cursor) : json_null();
        api_reply_json(x, 200, json_pack("{s:o,s:o}", "requests", list, "cursor", cur));
    }
    lm_free(m);
}

/* One partition's requests_read.lua answer: arg is the list_merge, the entries of that
 * partition are found again by partition (their order is kept within it). */
struct lm_read {
    struct list_merge *m;
    unsigned part;
};

static void on_lm_read(void *arg, const char *err, redisReply *r)
{
    struct lm_read *rd = arg;
    struct list_merge *m = rd->m;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        m->failed = 1;
    } else {
        size_t j = 0;
        for (size_t i = 0; i < m->n && j < r->elements; i++)
            if (key_partition(m->e[i].id, strlen(m->e[i].id), m->np) == rd->part)
                m->e[i].obj = request_json(m->e[i].id, r->element[j++]);
    }
    free(rd);
    if (--m->pending == 0)
        lm_reply(m);
}

static void lm_read(struct list_merge *m)
{
    struct ctx *x = m->x;
    struct store *s = x->api->c->store;
    m->pending = 1; /* this loop's own share */
    const char **ids = xcalloc(m->n, sizeof(*ids)), **sel = xcalloc(m->n, sizeof(*sel));
    char **keys = xcalloc(m->n, sizeof(*keys));
    for (size_t i = 0; i < m->n; i++)
        ids[i] = m->e[i].id;
    for (unsigned p = 0; p < m->np; p++) {
        size_t k = key_ids_in(p, m->np, ids, m->n, sel);
        if (k == 0)
            continue;
        for (size_t i = 0; i < k; i++) {
            keys[i] = xmalloc(KEY_MAX);
            key_build(keys[i], KEY_MAX, store_part_tag(s, p), "req", sel[i], NULL);
        }
        struct lm_read *rd = xcalloc(1, sizeof(*rd));
        rd->m = m;
        rd->part = p;
        m->pending++;
        if (store_eval(s, &x->api->read_sc, on_lm_read, rd, (int)k, (int)k,
                       (const char **)keys, NULL) != 0) {
            m->pending--;
            m->failed = 1;
            free(rd);
        }
        for (size_t i = 0; i < k; i++)
            free(keys[i]);
    }
    free(keys);
    free(ids);
    free(sel);
    if (--m->pending == 0)
        lm_reply(m);
}

static void lm_paged(struct list_merge *m);

static void on_lm_page(void *arg, const char *err, redisReply *r)
{
    struct list_merge *m = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        m->failed = 1;
    } else {
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
            const redisReply *id = r->element[i], *sc = r->element[i + 1];
            if (id->type != REDIS_REPLY_STRING || sc->type != REDIS_REPLY_STRING)
                continue;
            if (m->n == m->cap) {
                m->cap = m->cap ? 2 * m->cap : 64;
                m->e = xrealloc(m->e, m->cap * sizeof(*m->e));
            }
            m->e[m->n++] = (struct lm_entry){xstrndup(id->str, id->len),
                                             xstrndup(sc->str, sc->len), NULL};
        }
    }
    lm_paged(m);
}

/* One page answer (or the asking loop) is done: once all are, merge and read. */
static void lm_paged(struct list_merge *m)
{
    if (--m->pending > 0)
        return;
    struct ctx *x = m->x;
    if (m->failed || x->req == NULL || x->api == NULL || !store_ready(x->api->c->store)) {
        m->failed = 1;
        lm_reply(m);
        return;
    }
    if (m->n > 1)
        qsort(m->e, m->n, sizeof(*m->e), lm_cmp);
    if (m->n > (size_t)x->limit) { /* a next page: the cursor is its last entry shown */
        x->next_cursor = cursor_encode(m->e[x->limit - 1].score, m->e[x->limit - 1].id);
        while (m->n > (size_t)x->limit) {
            m->n--;
            free(m->e[m->n].id);
            free(m->e[m->n].score);
        }
    }
    if (m->n == 0) {
        lm_reply(m);
        return;
    }
    lm_read(m);
}

/* requests_page.lua on every partition's index of kind (and status). */
static void list_parts(struct ctx *x, const char *kind, const char *status, const char *score,
                       const char *cid, const char *want, const char *max)
{
    struct store *s = x->api->c->store;
    struct list_merge *m = xcalloc(1, sizeof(*m));
    m->x = x;
    m->np = store_partitions(s);
    m->pending = 1; /* this loop's own share */
    char k[KEY_MAX];
    for (unsigned p = 0; p < m->np; p++) {
        key_build(k, sizeof(k), store_part_tag(s, p), kind, status, NULL);
        const char *argv[] = {k, score, cid, want, max};
        m->pending++;
        if (store_eval(s, &x->api->page_sc, on_lm_page, m, 1, 5, argv, NULL) != 0) {
            m->pending--;
            m->failed = 1;
        }
    }
    lm_paged(m); /* the loop's share */
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
    char k[KEY_MAX], want[16], max[24] = "";
    if (stuck != NULL && strcmp(stuck, "true") == 0) {
        /* active, not waiting, status unchanged for STUCK_AFTER ({P}:act by last change) */
        key_build(k, sizeof(k), store_tag(c->store), "act", NULL, NULL);
        snprintf(max, sizeof(max), "%lld", (long long)(wall_ms() - c->cfg->stuck_after_ms - 1));
        if (status != NULL)
            snprintf(x->only_status, sizeof(x->only_status), "%s", status);
    } else if (status != NULL && status[0] != '\0') {
        key_build(k, sizeof(k), store_tag(c->store), "st", status, NULL);
    } else {
        key_build(k, sizeof(k), store_tag(c->store), "all", NULL, NULL);
    }
    snprintf(want, sizeof(want), "%d", x->limit + 1);
    if (store_partitions(c->store) > 1) { /* every partition's index, merged */
        int st = status != NULL && status[0] != '\0' && max[0] == '\0';
        list_parts(x, max[0] != '\0' ? "act" : st ? "st" : "all", st ? status : NULL, score, cid,
                   want, max);
        return;
    }
    const char *argv[] = {k, score, cid, want, max};
    if (store_eval(c->store, &x->api->page_sc, on_list_page, x, 1, 5, argv, NULL) != 0)
        api_reply_unavailable(x, "cannot list");
}
