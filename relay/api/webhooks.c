/* webhooks.c - see webhooks.h. runs on: core thread.
 *
 * Ownership: each request is a struct op (owned here from api_webhooks_handle until its one
 * answer); the parsed body is a jansson reference owned by the op. Reads of endpoints first
 * reload the process's endpoint set, so an answer never shows a stale copy. POST /v1/replay
 * validates here and runs relay/delivery/replay.c, which answers through on_replayed. */
#include "relay/api/webhooks.h"
#include "protocol/addr.h"
#include "protocol/event.h"
#include "relay/core.h"
#include "relay/common/util.h"
#include "relay/delivery/delivery.h"
#include "relay/delivery/dispatch.h"
#include "relay/delivery/endpoints.h"
#include "relay/delivery/replay.h"
#include "store/delivery_log.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELIVERIES_LIMIT_DEFAULT 50
#define DELIVERIES_LIMIT_MAX 500

struct op {
    struct api_wh_req r;
    struct webhooks *w;
    enum api_wh_route route;
    char id[WH_ID_MAX];
    json_t *in;
    /* create / patch */
    const char *fields[40];
    char *owned[20];
    int nfields, nowned;
    char secret[PROTO_WHSEC_MAX], pub[PROTO_WHPK_MAX];
    int64_t prev_expires;
    /* deliveries */
    char state[16];
    struct store_dl_cursor *from; /* where the listing continues (owned) */
    int limit;
    /* replay */
    struct replay_spec rp;
};

static void op_free(struct op *op)
{
    store_dl_cursor_free(op->from);
    json_decref(op->in);
    for (int i = 0; i < op->nowned; i++)
        free(op->owned[i]);
    free(op);
}

static void answer_json(struct op *op, int code, json_t *body)
{
    op->r.reply_json(op->r.ctx, code, body);
    op_free(op);
}

static void answer_error(struct op *op, int code, const char *ecode, const char *field,
                         const char *msg)
{
    op->r.reply_error(op->r.ctx, code, ecode, field, msg);
    op_free(op);
}

static void answer_unavailable(struct op *op)
{
    answer_error(op, 503, "store_unavailable", NULL, "Redis is unavailable, retry shortly");
}

static void answer_not_found(struct op *op)
{
    answer_error(op, 404, "not_found", NULL, "no such webhook endpoint");
}

static void add_field(struct op *op, const char *k, const char *v)
{
    op->fields[op->nfields * 2] = k;
    op->fields[op->nfields * 2 + 1] = v;
    op->nfields++;
}

static const char *own(struct op *op, char *s)
{
    op->owned[op->nowned++] = s;
    return s;
}

static int id_ok(const char *s, size_t n)
{
    if (n == 0 || n >= WH_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

/* Parse the body as a JSON object. Returns 0, or -1 after answering. */
static int parse_object(struct op *op, int required)
{
    if (op->r.body == NULL || op->r.body_len == 0) {
        if (!required) {
            op->in = json_object();
            return 0;
        }
        answer_error(op, 400, "invalid_body", NULL, "a JSON body is required");
        return -1;
    }
    json_error_t je;
    op->in = json_loadb(op->r.body, op->r.body_len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(op->in)) {
        answer_error(op, 400, "invalid_json", NULL, "body must be a JSON object");
        return -1;
    }
    return 0;
}

static int only_keys(struct op *op, const char *const *allowed, size_t n)
{
    const char *k;
    json_t *v;
    json_object_foreach(op->in, k, v)
    {
        size_t i = 0;
        while (i < n && strcmp(allowed[i], k) != 0)
            i++;
        if (i == n) {
            char msg[160];
            snprintf(msg, sizeof(msg), "unknown field \"%.64s\"", k);
            answer_error(op, 400, "invalid_request", k, msg);
            return -1;
        }
    }
    return 0;
}

/* Validate the endpoint fields common to create and patch and queue their Redis values.
 * Returns 0, 1 when the URL host still needs a DNS check (op->owned holds the host last),
 * or -1 after answering. */
static int take_endpoint_fields(struct op *op, int create, char *host, size_t hostn)
{
    char err[512];
    const char *code = NULL;
    json_t *v;
    int needs_dns = 0;
    if ((v = json_object_get(op->in, "url")) != NULL || create) {
        if (!json_is_string(v)) {
            answer_error(op, 400, "invalid_request", "url", "url is required (a string)");
            return -1;
        }
        if (webhook_url_check(json_string_value(v), op->r.c->cfg->allow_private_targets,
                              &needs_dns, host, hostn, &code, err, sizeof(err)) != 0) {
            answer_error(op, 400, code, "url", err);
            return -1;
        }
        add_field(op, "url", json_string_value(v));
    }
    if ((v = json_object_get(op->in, "filters")) != NULL || create) {
        char *canon;
        if (webhook_filters_canon(v, &canon, &code, err, sizeof(err)) != 0) {
            answer_error(op, 400, code, "filters", err);
            return -1;
        }
        add_field(op, "filters", own(op, canon));
    }
    if ((v = json_object_get(op->in, "headers")) != NULL || create) {
        char *canon;
        if (webhook_headers_canon(v, &canon, &code, err, sizeof(err)) != 0) {
            answer_error(op, 400, code, "headers", err);
            return -1;
        }
        add_field(op, "headers", own(op, canon));
    }
    if ((v = json_object_get(op->in, "description")) != NULL) {
        if (!json_is_string(v) && !json_is_null(v)) {
            answer_error(op, 400, "invalid_request", "description", "description is a string");
            return -1;
        }
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        size_t want = json_is_string(v) ? json_string_length(v) : 0;
        if (strlen(s) > WH_DESC_MAX || strlen(s) != want) {
            answer_error(op, 400, "invalid_request", "description",
                         "description is at most 1024 bytes");
            return -1;
        }
        add_field(op, "description", s);
    } else if (create) {
        add_field(op, "description", "");
    }
    if ((v = json_object_get(op->in, "signatureScheme")) != NULL || create) {
        const char *s = v ? json_string_value(v) : "standard";
        if (s == NULL || (strcmp(s, "standard") && strcmp(s, "upstream") && strcmp(s, "both"))) {
            answer_error(op, 400, "invalid_request", "signatureScheme",
                         "signatureScheme is standard, upstream or both");
            return -1;
        }
        add_field(op, "signatureScheme", s);
    }
    if ((v = json_object_get(op->in, "mode")) != NULL || create) {
        const char *s = v ? json_string_value(v) : "all";
        if (s == NULL || (strcmp(s, "all") && strcmp(s, "latest"))) {
            answer_error(op, 400, "invalid_request", "mode", "mode is all or latest");
            return -1;
        }
        add_field(op, "mode", s);
    }
    if ((v = json_object_get(op->in, "rateLimit")) != NULL) {
        char rate[24];
        if (webhook_rate_limit_check(v, rate, sizeof(rate), &code, err, sizeof(err)) != 0) {
            answer_error(op, 400, code, "rateLimit", err);
            return -1;
        }
        add_field(op, "rateLimit", rate[0] ? own(op, xstrdup(rate)) : NULL);
    }
    if ((v = json_object_get(op->in, "enabled")) != NULL || create) {
        if (v != NULL && !json_is_boolean(v)) {
            answer_error(op, 400, "invalid_request", "enabled", "enabled is a boolean");
            return -1;
        }
        int on = v == NULL || json_is_true(v);
        add_field(op, "enabled", on ? "1" : "0");
        if (on) {
            add_field(op, "disabledReason", NULL);
            add_field(op, "disabledAt", NULL);
            add_field(op, "failSince", NULL);
        } else {
            add_field(op, "disabledReason", "api");
            add_field(op, "disabledAt", own(op, xasprintf("%lld", (long long)wall_ms())));
        }
    }
    return needs_dns;
}

/* ---- create and patch ------------------------------------------------------------------ */

static void on_written(void *arg, const char *err, int found)
{
    struct op *op = arg;
    if (err != NULL) {
        answer_unavailable(op);
        return;
    }
    if (!found) {
        answer_not_found(op);
        return;
    }
    struct webhook *wh = webhooks_find(op->w, op->id);
    if (wh == NULL) { /* deleted meanwhile */
        answer_not_found(op);
        return;
    }
    json_t *o = webhook_to_json(wh);
    if (op->route == API_WH_CREATE) {
        if (!wh->ed25519)
            json_object_set_new(o, "secret", json_string(op->secret));
        answer_json(op, 201, o);
    } else if (op->route == API_WH_ROTATE) {
        json_decref(o);
        o = json_object();
        if (wh->ed25519)
            json_object_set_new(o, "publicKey", json_string(op->pub));
        else
            json_object_set_new(o, "secret", json_string(op->secret));
        json_object_set_new(o, "previousSecretExpiresAt", json_integer(op->prev_expires));
        answer_json(op, 200, o);
    } else {
        answer_json(op, 200, o);
    }
}

static void write_endpoint(struct op *op)
{
    if (webhooks_put(op->w, op->id, op->route == API_WH_CREATE, op->fields, op->nfields,
                     on_written, op) != 0)
        answer_unavailable(op);
}

static void on_host_checked(void *arg, const char *code, const char *msg)
{
    struct op *op = arg;
    if (code != NULL) {
        answer_error(op, 400, code, "url", msg);
        return;
    }
    if (webhooks_of(op->r.c) == NULL) {
        answer_unavailable(op);
        return;
    }
    write_endpoint(op);
}

static void h_create(struct op *op)
{
    static const char *const keys[] = {"url",  "filters", "headers", "description",
                                       "signatureScheme", "signing", "mode", "enabled",
                                       "rateLimit"};
    if (parse_object(op, 1) != 0 || only_keys(op, keys, ARRAY_LEN(keys)) != 0)
        return;
    json_t *sg = json_object_get(op->in, "signing");
    const char *signing = sg ? json_string_value(sg) : "hmac-sha256";
    if (signing == NULL || (strcmp(signing, "hmac-sha256") && strcmp(signing, "ed25519"))) {
        answer_error(op, 400, "invalid_request", "signing", "signing is hmac-sha256 or ed25519");
        return;
    }
    char host[PROTO_HOST_MAX + 1];
    int r = take_endpoint_fields(op, 1, host, sizeof(host));
    if (r < 0)
        return;
    webhook_id_new(op->id, sizeof(op->id));
    int ed = strcmp(signing, "ed25519") == 0;
    if (ed) {
        if (webhook_seed_new(op->secret, sizeof(op->secret), op->pub, sizeof(op->pub)) != 0) {
            answer_error(op, 500, "internal", NULL, "key generation failed");
            return;
        }
    } else {
        webhook_secret_new(op->secret, sizeof(op->secret));
    }
    add_field(op, "signing", ed ? "ed25519" : "hmac-sha256");
    add_field(op, "secret", op->secret);
    add_field(op, "createdAt", own(op, xasprintf("%lld", (long long)wall_ms())));
    if (r == 1)
        webhooks_check_host(op->w, host, on_host_checked, op);
    else
        write_endpoint(op);
}

static void h_patch(struct op *op)
{
    static const char *const keys[] = {"url",  "filters", "headers", "description",
                                       "signatureScheme", "mode", "enabled", "signing",
                                       "rateLimit"};
    if (parse_object(op, 1) != 0 || only_keys(op, keys, ARRAY_LEN(keys)) != 0)
        return;
    if (json_object_get(op->in, "signing") != NULL) {
        answer_error(op, 400, "invalid_request", "signing",
                     "signing cannot be changed: register a new endpoint");
        return;
    }
    char host[PROTO_HOST_MAX + 1];
    int r = take_endpoint_fields(op, 0, host, sizeof(host));
    if (r < 0)
        return;
    if (op->nfields == 0) {
        answer_error(op, 400, "invalid_request", NULL, "nothing to change");
        return;
    }
    if (r == 1)
        webhooks_check_host(op->w, host, on_host_checked, op);
    else
        write_endpoint(op);
}

/* ---- reads that need a fresh endpoint set ---------------------------------------------- */

static void h_deliveries_read(struct op *op, struct webhook *wh);

static int cmp_created(const void *a, const void *b)
{
    const struct webhook *x = *(struct webhook *const *)a, *y = *(struct webhook *const *)b;
    return x->created_at < y->created_at ? -1 : x->created_at > y->created_at;
}

static void on_test(void *arg, long status, const char *err, int64_t latency_ms,
                    const char *body, size_t body_len, const char *event_id)
{
    struct op *op = arg;
    json_t *o = json_object();
    json_object_set_new(o, "ok", json_boolean(err == NULL && status >= 200 && status < 300));
    json_object_set_new(o, "eventId", json_string(event_id));
    json_object_set_new(o, "statusCode", status > 0 ? json_integer(status) : json_null());
    json_object_set_new(o, "latencyMs", json_integer(latency_ms));
    json_object_set_new(o, "error", err ? json_string(err) : json_null());
    json_t *resp = body_len ? json_stringn(body, body_len) : NULL;
    json_object_set_new(o, "response", resp ? resp : json_null());
    answer_json(op, 200, o);
}

static void on_fresh(void *arg, const char *err)
{
    struct op *op = arg;
    if (err != NULL || webhooks_of(op->r.c) == NULL) {
        answer_unavailable(op);
        return;
    }
    if (op->route == API_WH_LIST) {
        size_t n = webhooks_count(op->w);
        struct webhook **v = xcalloc(n + 1, sizeof(*v));
        for (size_t i = 0; i < n; i++)
            v[i] = webhooks_at(op->w, i);
        qsort(v, n, sizeof(*v), cmp_created);
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(arr, webhook_to_json(v[i]));
        free(v);
        json_t *o = json_object();
        json_object_set_new(o, "webhooks", arr);
        answer_json(op, 200, o);
        return;
    }
    struct webhook *wh = webhooks_find(op->w, op->id);
    if (wh == NULL) {
        answer_not_found(op);
        return;
    }
    switch (op->route) {
    case API_WH_GET:
        answer_json(op, 200, webhook_to_json(wh));
        return;
    case API_WH_REVEAL: {
        json_t *o = json_object();
        if (wh->ed25519)
            json_object_set_new(o, "publicKey", json_string(wh->public_key));
        else
            json_object_set_new(o, "secret", json_string(wh->secret ? wh->secret : ""));
        answer_json(op, 200, o);
        return;
    }
    case API_WH_ROTATE: {
        int64_t now = wall_ms();
        if (wh->ed25519) {
            if (webhook_seed_new(op->secret, sizeof(op->secret), op->pub, sizeof(op->pub)) != 0) {
                answer_error(op, 500, "internal", NULL, "key generation failed");
                return;
            }
        } else {
            webhook_secret_new(op->secret, sizeof(op->secret));
        }
        op->prev_expires = now + op->r.c->cfg->secret_grace_ms;
        add_field(op, "secret", op->secret);
        add_field(op, "prevSecret", own(op, xstrdup(wh->secret ? wh->secret : "")));
        add_field(op, "prevExpiresAt", own(op, xasprintf("%lld", (long long)op->prev_expires)));
        write_endpoint(op);
        return;
    }
    case API_WH_TEST:
        if (dispatch_test(delivery_dispatch(op->r.c), wh, on_test, op) != 0)
            answer_error(op, 503, "unavailable", NULL, "cannot send now");
        return;
    case API_WH_DELIVERIES:
        h_deliveries_read(op, wh);
        return;
    default:
        answer_error(op, 500, "internal", NULL, "unexpected route");
        return;
    }
}

static void fresh_then(struct op *op)
{
    webhooks_reload(op->w, on_fresh, op);
}

/* ---- delete ---------------------------------------------------------------------------- */

static void on_deleted(void *arg, const char *err, int found)
{
    struct op *op = arg;
    if (err != NULL) {
        answer_unavailable(op);
        return;
    }
    if (!found) {
        answer_not_found(op);
        return;
    }
    op->r.reply_empty(op->r.ctx, 204);
    op_free(op);
}

/* ---- deliveries ------------------------------------------------------------------------ */

static json_t *int_or_null(const char *s)
{
    return s && s[0] ? json_integer(strtoll(s, NULL, 10)) : json_null();
}

static json_t *delivery_json(const struct store_dl_listed *d)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(d->id ? d->id : ""));
    json_object_set_new(o, "eventId", json_string(d->event_id ? d->event_id : ""));
    json_object_set_new(o, "webhookId", json_string(d->webhook_id ? d->webhook_id : ""));
    json_object_set_new(o, "requestId", json_string(d->request_id ? d->request_id : ""));
    json_object_set_new(o, "seq", int_or_null(d->seq));
    json_object_set_new(o, "status", json_string(d->status ? d->status : ""));
    json_object_set_new(o, "state", json_string(d->state ? d->state : ""));
    json_t *atts = json_array();
    for (size_t i = 0; i < d->nattempts; i++) {
        json_t *a = json_loads(d->attempts[i], 0, NULL);
        if (a)
            json_array_append_new(atts, a);
    }
    json_object_set_new(o, "attempts", atts);
    json_object_set_new(o, "nextAttemptAt", d->state && !strcmp(d->state, "pending")
                                                ? int_or_null(d->next)
                                                : json_null());
    json_object_set_new(o, "createdAt", int_or_null(d->created));
    json_object_set_new(o, "eventCreatedAt", int_or_null(d->event_created));
    json_object_set_new(o, "finishedAt", int_or_null(d->done));
    json_object_set_new(o, "replay", json_boolean(d->replay && d->replay[0] == '1'));
    return o;
}

static void on_listed(void *arg, const char *err, const struct store_dl_listed *e, size_t n,
                      const char *next)
{
    struct op *op = arg;
    if (err != NULL) {
        answer_unavailable(op);
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, delivery_json(&e[i]));
    json_t *o = json_object();
    json_object_set_new(o, "deliveries", arr);
    json_object_set_new(o, "cursor", next != NULL ? json_string(next) : json_null());
    answer_json(op, 200, o);
}

/* Every partition's list of the endpoint's deliveries, merged (store/delivery_log.h). */
static void h_deliveries_read(struct op *op, struct webhook *wh)
{
    store_dl_list(op->r.c->store, wh->id, op->state, op->from, op->limit, on_listed, op);
}

static void h_deliveries(struct op *op)
{
    const char *st = op->r.query(op->r.ctx, "state");
    if (st && st[0]) {
        static const char *const states[] = {"pending", "delivered", "dead", "superseded",
                                             "skipped"};
        size_t i = 0;
        while (i < ARRAY_LEN(states) && strcmp(states[i], st) != 0)
            i++;
        if (i == ARRAY_LEN(states)) {
            answer_error(op, 400, "invalid_parameter", "state",
                         "state is pending, delivered, dead, superseded or skipped");
            return;
        }
        snprintf(op->state, sizeof(op->state), "%s", st);
    }
    const char *cur = op->r.query(op->r.ctx, "cursor");
    if ((op->from = store_dl_cursor_parse(op->r.c->store, cur)) == NULL) {
        answer_error(op, 400, "invalid_parameter", "cursor", "malformed cursor");
        return;
    }
    op->limit = DELIVERIES_LIMIT_DEFAULT;
    const char *lim = op->r.query(op->r.ctx, "limit");
    if (lim && lim[0]) {
        char *end;
        long v = strtol(lim, &end, 10);
        if (*end != '\0' || v < 1 || lim[0] < '0' || lim[0] > '9') {
            answer_error(op, 400, "invalid_parameter", "limit", "limit is a positive integer");
            return;
        }
        op->limit = v > DELIVERIES_LIMIT_MAX ? DELIVERIES_LIMIT_MAX : (int)v;
    }
    fresh_then(op);
}

/* ---- replay (the operation itself: relay/delivery/replay.c) ---------------------------- */

static int get_ms(struct op *op, const char *k, int64_t *out, int *has)
{
    json_t *v = json_object_get(op->in, k);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        char msg[96];
        snprintf(msg, sizeof(msg), "%s is unix milliseconds (an integer)", k);
        answer_error(op, 400, "invalid_request", k, msg);
        return -1;
    }
    *out = json_integer_value(v);
    *has = 1;
    return 0;
}

static int get_bool(struct op *op, const char *k, int *out)
{
    json_t *v = json_object_get(op->in, k);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_boolean(v)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "%s is a boolean", k);
        answer_error(op, 400, "invalid_request", k, msg);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

static void on_replayed(void *arg, const char *err, long long count, const char *replay_id)
{
    struct op *op = arg;
    if (err == replay_err_not_found) {
        answer_not_found(op);
        return;
    }
    if (err != NULL) {
        answer_unavailable(op);
        return;
    }
    json_t *o = json_object();
    if (replay_id != NULL)
        json_object_set_new(o, "replayId", json_string(replay_id));
    json_object_set_new(o, "count", json_integer(count));
    answer_json(op, op->rp.dry ? 200 : 202, o);
}

static void h_replay(struct op *op)
{
    static const char *const keys[] = {"since", "until", "requestId", "webhookId",
                                       "dead",  "skipped", "dryRun"};
    if (parse_object(op, 1) != 0 || only_keys(op, keys, ARRAY_LEN(keys)) != 0)
        return;
    if (get_ms(op, "since", &op->rp.since, &op->rp.has_since) != 0 ||
        get_ms(op, "until", &op->rp.until, &op->rp.has_until) != 0 ||
        get_bool(op, "dead", &op->rp.dead) != 0 ||
        get_bool(op, "skipped", &op->rp.skipped) != 0 || get_bool(op, "dryRun", &op->rp.dry) != 0)
        return;
    json_t *v;
    if ((v = json_object_get(op->in, "requestId")) != NULL && !json_is_null(v)) {
        const char *s = json_string_value(v);
        if (s == NULL || !proto_request_id_valid(s, strlen(s)) || strlen(s) > PROTO_MAX_ID) {
            answer_error(op, 400, "invalid_request_id", "requestId", "requestId is malformed");
            return;
        }
        snprintf(op->rp.request_id, sizeof(op->rp.request_id), "%s", s);
    }
    if ((v = json_object_get(op->in, "webhookId")) != NULL && !json_is_null(v)) {
        const char *s = json_string_value(v);
        if (s == NULL || !id_ok(s, strlen(s))) {
            answer_error(op, 404, "not_found", "webhookId", "no such webhook endpoint");
            return;
        }
        snprintf(op->rp.webhook_id, sizeof(op->rp.webhook_id), "%s", s);
    }
    if (!op->rp.dead && !op->rp.skipped && !op->rp.has_since && !op->rp.request_id[0] &&
        !op->rp.webhook_id[0]) {
        answer_error(op, 400, "invalid_request", NULL,
                     "say what to replay: since, requestId, webhookId, dead or skipped");
        return;
    }
    if (op->rp.has_since && op->rp.has_until && op->rp.until < op->rp.since) {
        answer_error(op, 400, "invalid_request", "until", "until is before since");
        return;
    }
    replay_start(op->r.c, &op->rp, on_replayed, op);
}

/* ---- entry ----------------------------------------------------------------------------- */

static void on_delete_checked(struct op *op)
{
    if (webhooks_delete(op->w, op->id, on_deleted, op) != 0)
        answer_unavailable(op);
}

void api_webhooks_handle(enum api_wh_route route, const struct api_wh_req *r)
{
    struct op *op = xcalloc(1, sizeof(*op));
    op->r = *r;
    op->route = route;
    op->r.body = NULL; /* valid during this call only: parse_object reads r->body */
    op->r.body_len = 0;
    op->w = webhooks_of(r->c);
    if (op->w == NULL || !store_ready(r->c->store)) {
        answer_unavailable(op);
        return;
    }
    if (r->id != NULL) {
        if (!id_ok(r->id, r->id_len) || strlen(r->id) != r->id_len) {
            answer_not_found(op);
            return;
        }
        memcpy(op->id, r->id, r->id_len);
        op->id[r->id_len] = '\0';
    }
    op->r.body = r->body;
    op->r.body_len = r->body_len;
    switch (route) {
    case API_WH_CREATE:
        h_create(op);
        break;
    case API_WH_PATCH:
        h_patch(op);
        break;
    case API_WH_REPLAY:
        h_replay(op);
        break;
    case API_WH_DELIVERIES:
        op->r.body = NULL;
        h_deliveries(op);
        return;
    case API_WH_DELETE:
        op->r.body = NULL;
        on_delete_checked(op);
        return;
    case API_WH_LIST:
    case API_WH_GET:
    case API_WH_REVEAL:
    case API_WH_ROTATE:
    case API_WH_TEST:
        op->r.body = NULL;
        fresh_then(op);
        return;
    }
}
