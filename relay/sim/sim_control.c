/* sim_control.c - see sim_control.h. runs on: the simulator's lws thread.
 *
 *   GET    /_sim/health                      {"ok":true,"sanitized":bool}
 *   POST   /_sim/requests                    create a request (201 + view); with "count": N
 *                                            > 1, N of them (201 {"created","firstSeq",
 *                                            "lastSeq"}); "spanMs": each goes through its
 *                                            whole path at once and its times are spread
 *                                            over the span before now (or before "agoMs")
 *   GET    /_sim/requests?after=SEQ&limit=N  ids in creation order after SEQ (for load tools)
 *   GET    /_sim/requests/{id}               view with history and the status v3 body
 *   POST   /_sim/requests/{id}/advance       next step of the path (409 at its end)
 *   POST   /_sim/requests/{id}/status        set any status
 *   GET|POST|DELETE /_sim/faults             read / change / clear the faults
 *   GET|DELETE /_sim/stats (POST /_sim/stats/reset)   counters (the reset also zeroes the
 *                                                     per-request ones)
 *   GET    /_sim/timeline                    upstream calls per 100 ms since the last reset
 *   GET|POST /_sim/load                      the request generator {"rate","durationMs"}
 *   GET|POST|DELETE /_sim/chains             the /chains list; POST {"id", "disabled"?,
 *                                            "blockProductionLagging"?} sets one chain's
 *                                            marks, DELETE restores the defaults */
#include "relay/sim/sim_control.h"
#include "relay/sim/sim.h"
#include "relay/sim/sim_model.h"
#include "relay/sim/sim_webhook.h"
#include "relay/sim/sim_ws.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1 /* reported by /_sim/health: load tests expect less of such a build */
#else
#define SANITIZED 0
#endif

#define STR_MAX 64       /* status and reason values */
#define DETAILS_MAX 4096
#define SIM_BULK_MAX 100000 /* requests one POST /_sim/requests {"count"} makes */

static void bad(struct sim_resp *out, const char *msg)
{
    sim_resp_error(out, 400, msg, "INVALID_INPUT_PARAMETERS");
}

/* A short string field: NULL when absent; *err set when present but not a fitting string. */
static const char *opt_str(json_t *obj, const char *key, size_t max, const char **err)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return NULL;
    const char *s = json_string_value(v);
    if (s == NULL || *s == '\0' || strlen(s) > max || strlen(s) != json_string_length(v)) {
        *err = key;
        return NULL;
    }
    return s;
}

static int opt_int(json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out,
                   const char **err)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        *err = key;
        return -1;
    }
    *out = json_integer_value(v);
    return 1;
}

/* ---- views ------------------------------------------------------------------------------- */

static void view(struct sim *s, const struct sim_req *r, struct sbuf *b)
{
    sbuf_adds(b, "{\"id\":");
    sbuf_jstr(b, r->id);
    sbuf_addf(b, ",\"seq\":%llu,\"lifecycle\":", (unsigned long long)r->seq);
    sbuf_jstr(b, r->lifecycle);
    sbuf_adds(b, ",\"status\":");
    sbuf_jstr(b, r->status);
    sbuf_addf(b, ",\"pos\":%d,\"terminal\":%s,\"path\":[", r->pos, r->terminal ? "true" : "false");
    for (int i = 0; i < r->nsteps; i++) {
        if (i)
            sbuf_add(b, ",", 1);
        sbuf_adds(b, "{\"status\":");
        sbuf_jstr(b, r->steps[i].status);
        sbuf_adds(b, ",\"delayMs\":");
        sbuf_jint(b, r->steps[i].delay_ms);
        if (r->steps[i].reorg)
            sbuf_adds(b, ",\"reorg\":true");
        sbuf_add(b, "}", 1);
    }
    sbuf_adds(b, "],\"originChainId\":");
    sbuf_jint(b, r->origin);
    sbuf_adds(b, ",\"destinationChainId\":");
    sbuf_jint(b, r->dest);
    sbuf_adds(b, ",\"user\":");
    sbuf_jstr(b, r->user);
    sbuf_adds(b, ",\"depositAddress\":");
    sbuf_jstr(b, r->dep ? r->dep->address : NULL);
    sbuf_adds(b, ",\"createdAt\":");
    sbuf_jint(b, r->created_ms);
    sbuf_adds(b, ",\"updatedAt\":");
    sbuf_jint(b, r->updated_ms);
    sbuf_addf(b, ",\"subscribed\":%s,\"statusPolls\":%llu,\"requestsReads\":%llu,"
                 "\"subscribes\":%llu,\"reorged\":%s,\"history\":[",
              sim_ws_subscribed(s->ws, r->id) ? "true" : "false",
              (unsigned long long)r->counts.status_polls,
              (unsigned long long)r->counts.requests_reads,
              (unsigned long long)r->counts.subscribes, r->reorg ? "true" : "false");
    for (int i = 0; i < r->nhist; i++) {
        if (i)
            sbuf_add(b, ",", 1);
        sbuf_adds(b, "{\"status\":");
        sbuf_jstr(b, r->hist[i].status);
        sbuf_adds(b, ",\"updatedAt\":");
        sbuf_jint(b, r->hist[i].updated_ms);
        sbuf_add(b, "}", 1);
    }
    sbuf_adds(b, "],\"statusV3\":");
    sj_status_v3(b, r);
    sbuf_add(b, "}", 1);
}

/* ---- requests ---------------------------------------------------------------------------- */

/* An optional boolean field: 0 when absent or null; *err set when not a boolean. */
static int opt_bool(json_t *obj, const char *key, const char **err)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_boolean(v)) {
        *err = key;
        return 0;
    }
    return json_is_true(v);
}

static void create(struct sim *s, json_t *in, struct sim_resp *out)
{
    struct sim_spec spec = {0};
    struct sim_step steps[SIM_MAX_STEPS];
    const char *err = NULL;
    spec.deposit = -1;
    spec.id = opt_str(in, "id", SIM_ID_MAX - 1, &err);
    spec.lifecycle = opt_str(in, "lifecycle", STR_MAX, &err);
    spec.referrer = opt_str(in, "referrer", STR_MAX, &err);
    spec.user = opt_str(in, "user", SIM_ADDR_MAX - 1, &err);
    const char *api_key = opt_str(in, "apiKey", SIM_KEY_MAX - 1, &err);
    opt_int(in, "stepMs", 0, 86400000, &spec.step_ms, &err);
    opt_int(in, "originChainId", 1, 9007199254740991LL, &spec.origin, &err);
    opt_int(in, "destinationChainId", 1, 9007199254740991LL, &spec.dest, &err);
    json_t *auto_h = json_object_get(in, "autoHashes");
    if (auto_h != NULL && !json_is_boolean(auto_h))
        err = "autoHashes";
    spec.no_auto_hashes = json_is_false(auto_h);
    json_t *dep = json_object_get(in, "depositAddress");
    if (json_is_boolean(dep)) {
        spec.deposit = json_is_true(dep);
    } else if (json_is_object(dep)) {
        spec.deposit = 1;
        spec.deposit_type = opt_str(dep, "type", STR_MAX, &err);
        if (spec.deposit_type && strcmp(spec.deposit_type, "open") != 0 &&
            strcmp(spec.deposit_type, "strict") != 0)
            err = "depositAddress.type";
    } else if (dep != NULL && !json_is_null(dep)) {
        err = "depositAddress";
    }
    json_t *path = json_object_get(in, "path");
    if (path != NULL && !json_is_null(path)) {
        if (!json_is_array(path) || json_array_size(path) == 0 ||
            json_array_size(path) > SIM_MAX_STEPS) {
            bad(out, "path must be a list of 1..32 statuses or step objects");
            return;
        }
        size_t i;
        json_t *st;
        json_array_foreach(path, i, st) {
            struct sim_step *p = &steps[i];
            memset(p, 0, sizeof(*p));
            p->delay_ms = -1;
            if (json_is_string(st)) {
                p->status = json_string_value(st);
                if (*p->status == '\0' || strlen(p->status) > STR_MAX)
                    err = "path";
            } else if (json_is_object(st)) {
                p->status = opt_str(st, "status", STR_MAX, &err);
                p->fail_reason = opt_str(st, "failReason", STR_MAX, &err);
                p->refund_fail_reason = opt_str(st, "refundFailReason", STR_MAX, &err);
                p->details = opt_str(st, "details", DETAILS_MAX, &err);
                opt_int(st, "delayMs", 0, 86400000, &p->delay_ms, &err);
                p->reorg = opt_bool(st, "reorg", &err);
                if (p->status == NULL)
                    err = "path[].status";
            } else {
                err = "path";
            }
        }
        spec.steps = steps;
        spec.nsteps = (int)json_array_size(path);
        if (spec.lifecycle != NULL && err == NULL) {
            bad(out, "give either lifecycle or path");
            return;
        }
    }
    if (err != NULL) {
        char msg[160];
        snprintf(msg, sizeof(msg), "invalid field \"%s\"", err);
        bad(out, msg);
        return;
    }
    const char *why = NULL;
    int64_t count = 1, span = 0;
    opt_int(in, "count", 1, SIM_BULK_MAX, &count, &err);
    int64_t ago = 0;
    opt_int(in, "spanMs", 0, 7 * 86400000LL, &span, &err);
    opt_int(in, "agoMs", 0, 7 * 86400000LL, &ago, &err);
    if (err == NULL && span > 0 && count < 2)
        err = "spanMs";
    if (err == NULL && count > 1 && spec.id != NULL)
        err = "count";
    if (err != NULL) {
        char msg[160];
        snprintf(msg, sizeof(msg), "invalid field \"%s\"", err);
        bad(out, msg);
        return;
    }
    if (count > 1) { /* a bulk create (load tools): ids generated, no view */
        uint64_t first = 0, last = 0;
        for (int64_t i = 0; i < count; i++) {
            struct sim_req *r = sim_model_create(s->model, &spec, &why);
            if (r == NULL)
                break;
            if (api_key != NULL)
                snprintf(r->api_key, sizeof(r->api_key), "%s", api_key);
            if (span > 0) { /* its whole path now, then spread over the span before now */
                while (sim_model_advance(s->model, r) == 0)
                    ;
                sim_model_backdate(s->model, r, ago + span - span * (i + 1) / count);
            }
            first = first ? first : r->seq;
            last = r->seq;
        }
        if (last == 0) {
            sim_resp_error(out, 400, why, "INVALID_INPUT_PARAMETERS");
            return;
        }
        log_info("scripted requests created", "count=%llu first_seq=%llu",
                 (unsigned long long)(last - first + 1), (unsigned long long)first);
        out->status = 201;
        sbuf_addf(&out->body, "{\"created\":%llu,\"firstSeq\":%llu,\"lastSeq\":%llu}",
                  (unsigned long long)(last - first + 1), (unsigned long long)first,
                  (unsigned long long)last);
        return;
    }
    struct sim_req *r = sim_model_create(s->model, &spec, &why);
    if (r == NULL) {
        sim_resp_error(out, strstr(why, "exists") ? 409 : 400, why,
                       strstr(why, "exists") ? "CONFLICT" : "INVALID_INPUT_PARAMETERS");
        return;
    }
    if (api_key != NULL) /* the key scope of /requests/v3 (sim_scope.c) */
        snprintf(r->api_key, sizeof(r->api_key), "%s", api_key);
    log_info("scripted request created", "id=%s lifecycle=%s steps=%d", r->id, r->lifecycle,
             r->nsteps);
    out->status = 201;
    view(s, r, &out->body);
}

static void list(struct sim *s, const struct sim_query *q, struct sim_resp *out)
{
    unsigned long long after = 0;
    long limit = 1000;
    const char *v;
    if ((v = sim_query_get(q, "after")) != NULL)
        after = strtoull(v, NULL, 10);
    if ((v = sim_query_get(q, "limit")) != NULL) {
        limit = strtol(v, NULL, 10);
        if (limit < 1 || limit > 10000)
            limit = 1000;
    }
    /* Walk back from the newest to the first one after `after`, then forward. */
    struct sim_req *r = sim_model_newest(s->model);
    while (r != NULL && r->prev != NULL && r->prev->seq > after)
        r = r->prev;
    if (r != NULL && r->seq <= after)
        r = NULL;
    out->status = 200;
    struct sbuf *b = &out->body;
    sbuf_adds(b, "{\"requests\":[");
    unsigned long long last = after;
    for (long n = 0; r != NULL && n < limit; r = r->next, n++) {
        if (n)
            sbuf_add(b, ",", 1);
        sbuf_adds(b, "{\"id\":");
        sbuf_jstr(b, r->id);
        sbuf_addf(b, ",\"seq\":%llu,\"status\":", (unsigned long long)r->seq);
        sbuf_jstr(b, r->status);
        sbuf_adds(b, ",\"lifecycle\":");
        sbuf_jstr(b, r->lifecycle);
        sbuf_add(b, "}", 1);
        last = r->seq;
    }
    sbuf_addf(b, "],\"last\":%llu}", last);
}

static void set_status(struct sim *s, struct sim_req *r, json_t *in, struct sim_resp *out)
{
    struct sim_set set = {0};
    const char *err = NULL;
    set.status = opt_str(in, "status", STR_MAX, &err);
    set.fail_reason = opt_str(in, "failReason", STR_MAX, &err);
    set.refund_fail_reason = opt_str(in, "refundFailReason", STR_MAX, &err);
    json_t *d = json_object_get(in, "details");
    if (d != NULL) {
        set.details_set = 1;
        set.details = opt_str(in, "details", DETAILS_MAX, &err);
    }
    opt_int(in, "updatedAt", 1, 9007199254740991LL, &set.updated_at, &err);
    json_t *auto_h = json_object_get(in, "autoHashes");
    set.no_auto_hashes = json_is_false(auto_h);
    set.reorg = opt_bool(in, "reorg", &err);
    const char *lists[2] = {"inTxHashes", "txHashes"};
    for (int k = 0; k < 2; k++) {
        json_t *a = json_object_get(in, lists[k]);
        if (a == NULL)
            continue;
        if (!json_is_array(a) || json_array_size(a) > 8) {
            err = lists[k];
            continue;
        }
        size_t i;
        json_t *h;
        json_array_foreach(a, i, h) {
            const char *x = json_string_value(h);
            if (x == NULL || *x == '\0' || strlen(x) > 128) {
                err = lists[k];
                break;
            }
            if (k == 0)
                set.in_hashes[set.nin++] = x;
            else
                set.out_hashes[set.nout++] = x;
        }
    }
    if (set.status == NULL && err == NULL)
        err = "status";
    if (err != NULL) {
        char msg[160];
        snprintf(msg, sizeof(msg), "invalid field \"%s\"", err);
        bad(out, msg);
        return;
    }
    sim_model_set_status(s->model, r, &set);
    out->status = 200;
    view(s, r, &out->body);
}

static void requests(struct sim *s, enum sim_method m, const char *rest,
                     const struct sim_query *q, json_t *in, struct sim_resp *out)
{
    if (*rest == '\0' || strcmp(rest, "/") == 0) {
        if (m == SIM_M_POST && in != NULL && !json_is_object(in)) {
            bad(out, "expected a JSON object");
        } else if (m == SIM_M_POST) {
            json_t *empty = in ? NULL : json_object();
            create(s, in ? in : empty, out);
            json_decref(empty);
        }
        else if (m == SIM_M_GET)
            list(s, q, out);
        else
            sim_resp_error(out, 405, "method not allowed", "METHOD_NOT_ALLOWED");
        return;
    }
    /* /{id}[/advance|/status] */
    char id[SIM_ID_MAX];
    const char *p = rest + 1, *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    if (n == 0 || n >= sizeof(id)) {
        sim_resp_error(out, 404, "request not found", "NOT_FOUND");
        return;
    }
    memcpy(id, p, n);
    id[n] = '\0';
    struct sim_req *r = sim_model_find(s->model, id);
    if (r == NULL) {
        sim_resp_error(out, 404, "request not found", "NOT_FOUND");
        return;
    }
    const char *action = slash ? slash + 1 : "";
    if (*action == '\0' && m == SIM_M_GET) {
        out->status = 200;
        view(s, r, &out->body);
    } else if (strcmp(action, "advance") == 0 && m == SIM_M_POST) {
        if (sim_model_advance(s->model, r) != 0) {
            sim_resp_error(out, 409, "the request is at the end of its path", "CONFLICT");
            return;
        }
        out->status = 200;
        view(s, r, &out->body);
    } else if (strcmp(action, "status") == 0 && m == SIM_M_POST) {
        if (in == NULL || !json_is_object(in)) {
            bad(out, "expected a JSON object with \"status\"");
            return;
        }
        set_status(s, r, in, out);
    } else {
        sim_resp_error(out, 404, "no such control endpoint", "NOT_FOUND");
    }
}

/* ---- faults ------------------------------------------------------------------------------- */

static void faults_json(const struct sim *s, struct sbuf *b, int dropped, int malformed)
{
    const struct sim_faults *f = &s->faults;
    sbuf_addf(b,
              "{\"silent\":%s,\"duplicate\":%s,\"reorder\":%s,\"wsRefuse\":%s,\"envelope\":\"%s\","
              "\"wsMinimal\":%s,\"delayMs\":%lld,\"httpErrorRate\":%g,\"httpErrorStatus\":%d,"
              "\"httpErrorCount\":%lld,\"httpErrorPath\":",
              f->silent ? "true" : "false", f->duplicate ? "true" : "false",
              f->reorder ? "true" : "false", f->ws_refuse ? "true" : "false",
              f->envelope_b ? "B" : "A", f->ws_minimal ? "true" : "false",
              (long long)f->delay_ms, f->http_error_rate, f->http_error_status,
              (long long)f->http_error_count);
    sbuf_jstr(b, f->http_error_path);
    sbuf_addf(b, ",\"httpDelayMs\":%lld,\"rateLimitPerMin\":%lld,\"refuseKey\":%d",
              (long long)f->http_delay_ms, (long long)f->rate_limit, f->refuse_key);
    if (dropped >= 0)
        sbuf_addf(b, ",\"dropped\":%d", dropped);
    if (malformed >= 0)
        sbuf_addf(b, ",\"malformedTo\":%d", malformed);
    sbuf_add(b, "}", 1);
}

static int get_bool(json_t *v, int *out)
{
    if (!json_is_boolean(v))
        return -1;
    *out = json_is_true(v);
    return 0;
}

/* dropWs: "abrupt" (0: no close frame) or a close code a peer may send (number or text).
 * Returns 1 and sets *drop, or 0 when v is neither. */
static int parse_drop(json_t *v, int *drop)
{
    const char *d = json_string_value(v);
    if (d != NULL && strcmp(d, "abrupt") == 0) {
        *drop = 0;
        return 1;
    }
    int64_t code = d ? strtoll(d, NULL, 10) : json_integer_value(v);
    int ok = (d || json_is_integer(v)) && code >= 1000 && code <= 4999 && code != 1005 &&
             code != 1006 && code != 1015;
    if (ok)
        *drop = (int)code;
    return ok;
}

/* The numeric faults (delays, counts, the rate limit: 0..1e9 each). Returns 1 and sets it,
 * or 0 when v is out of range. */
static int set_count(struct sim_faults *f, const char *key, json_t *v)
{
    int ok = json_is_integer(v) && json_integer_value(v) >= 0 &&
             json_integer_value(v) <= 1000000000;
    if (ok) {
        int64_t x = json_integer_value(v);
        if (key[0] == 'd')
            f->delay_ms = x;
        else if (strcmp(key, "httpDelayMs") == 0)
            f->http_delay_ms = x;
        else if (strcmp(key, "httpErrorCount") == 0)
            f->http_error_count = x;
        else
            f->rate_limit = x;
    }
    return ok;
}

/* One key of a POST /_sim/faults body into f, or the one-shot actions *drop (dropWs) and
 * *malformed. Returns 1, or 0 for an unknown key or a bad value. */
static int set_fault(struct sim_faults *f, const char *key, json_t *v, int *drop,
                     int *malformed)
{
    int ok = 0;
    if (strcmp(key, "silent") == 0)
        ok = get_bool(v, &f->silent) == 0;
    else if (strcmp(key, "duplicate") == 0)
        ok = get_bool(v, &f->duplicate) == 0;
    else if (strcmp(key, "reorder") == 0)
        ok = get_bool(v, &f->reorder) == 0;
    else if (strcmp(key, "wsRefuse") == 0)
        ok = get_bool(v, &f->ws_refuse) == 0;
    else if (strcmp(key, "wsMinimal") == 0)
        ok = get_bool(v, &f->ws_minimal) == 0;
    else if (strcmp(key, "envelope") == 0) {
        const char *e = json_string_value(v);
        ok = e && (strcmp(e, "A") == 0 || strcmp(e, "B") == 0);
        if (ok)
            f->envelope_b = e[0] == 'B';
    } else if (strcmp(key, "delayMs") == 0 || strcmp(key, "httpDelayMs") == 0 ||
               strcmp(key, "httpErrorCount") == 0 || strcmp(key, "rateLimitPerMin") == 0) {
        ok = set_count(f, key, v);
    } else if (strcmp(key, "httpErrorRate") == 0) {
        double x = json_number_value(v);
        ok = json_is_number(v) && x >= 0 && x <= 1 && !isnan(x);
        if (ok)
            f->http_error_rate = x;
    } else if (strcmp(key, "httpErrorStatus") == 0) {
        int64_t x = json_integer_value(v);
        ok = json_is_integer(v) &&
             (x == 0 || x == 429 || x == 500 || x == 502 || x == 503 || x == 504);
        if (ok)
            f->http_error_status = (int)x;
    } else if (strcmp(key, "refuseKey") == 0) {
        int64_t x = json_integer_value(v);
        ok = json_is_integer(v) && (x == 0 || x == 401 || x == 403);
        if (ok)
            f->refuse_key = (int)x;
    } else if (strcmp(key, "httpErrorPath") == 0) {
        const char *p = json_is_null(v) ? "" : json_string_value(v);
        ok = p != NULL && strlen(p) < sizeof(f->http_error_path);
        if (ok)
            snprintf(f->http_error_path, sizeof(f->http_error_path), "%s", p);
    } else if (strcmp(key, "dropWs") == 0) {
        ok = parse_drop(v, drop);
    } else if (strcmp(key, "malformed") == 0) {
        ok = json_is_integer(v) && json_integer_value(v) >= 0 &&
             json_integer_value(v) <= 1000;
        if (ok)
            *malformed = (int)json_integer_value(v);
    }
    return ok;
}

static void faults(struct sim *s, enum sim_method m, json_t *in, struct sim_resp *out)
{
    if (m == SIM_M_DELETE) {
        int64_t base = s->cfg.rate_limit;
        memset(&s->faults, 0, sizeof(s->faults));
        s->faults.rate_limit = base;
        s->faults.envelope_b = s->cfg.envelope[0] == 'B';
        log_info("faults cleared", "%s", "");
        out->status = 200;
        faults_json(s, &out->body, -1, -1);
        return;
    }
    if (m == SIM_M_GET) {
        out->status = 200;
        faults_json(s, &out->body, -1, -1);
        return;
    }
    if (m != SIM_M_POST || in == NULL || !json_is_object(in)) {
        bad(out, "expected a JSON object of faults");
        return;
    }
    struct sim_faults f = s->faults;
    int drop = -1, malformed = 0;
    const char *key;
    json_t *v;
    json_object_foreach(in, key, v) {
        if (!set_fault(&f, key, v, &drop, &malformed)) {
            char msg[160];
            snprintf(msg, sizeof(msg), "invalid or unknown fault \"%s\"", key);
            bad(out, msg);
            return;
        }
    }
    s->faults = f;
    int dropped = -1, mal_to = -1;
    if (drop >= 0)
        dropped = sim_ws_drop_all(s->ws, drop);
    if (malformed > 0)
        mal_to = sim_ws_send_malformed(s->ws, malformed);
    char *text = json_dumps(in, JSON_COMPACT);
    log_info("faults changed", "set=%s", text ? text : "?");
    free(text);
    out->status = 200;
    faults_json(s, &out->body, dropped, mal_to);
}

/* ---- stats and load ------------------------------------------------------------------------- */

static void stats(struct sim *s, struct sim_resp *out)
{
    const struct sim_stats *st = &s->stats;
    struct sbuf *b = &out->body;
    out->status = 200;
    sbuf_addf(b, "{\"uptimeMs\":%lld,\"ws\":{", (long long)(mono_ms() - s->started_mono_ms));
    sbuf_addf(b,
              "\"connections\":%zu,\"connectionsTotal\":%llu,\"rejected\":%llu,"
              "\"subscriptions\":%zu,\"framesSent\":%llu,\"eventFrames\":%llu,\"acks\":%llu,"
              "\"malformed\":%llu,\"bytes\":%llu,\"subscribes\":%llu,\"unsubscribes\":%llu,"
              "\"badMessages\":%llu,\"suppressed\":%llu,\"droppedAbrupt\":%llu,"
              "\"droppedClose\":%llu,\"slowClosed\":%llu},",
              sim_ws_connections(s->ws), (unsigned long long)st->ws_connections,
              (unsigned long long)st->ws_rejected, sim_ws_subscriptions(s->ws),
              (unsigned long long)st->ws_frames, (unsigned long long)st->ws_event_frames,
              (unsigned long long)st->ws_acks, (unsigned long long)st->ws_malformed,
              (unsigned long long)st->ws_bytes, (unsigned long long)st->ws_subscribes,
              (unsigned long long)st->ws_unsubscribes, (unsigned long long)st->ws_bad_messages,
              (unsigned long long)st->ws_suppressed, (unsigned long long)st->ws_dropped_abrupt,
              (unsigned long long)st->ws_dropped_close, (unsigned long long)st->ws_slow_closed);
    sbuf_addf(b, "\"http\":{\"total\":%llu,\"rateLimited\":%llu,\"injected\":%llu,\"byPath\":{",
              (unsigned long long)st->http_total, (unsigned long long)st->http_rate_limited,
              (unsigned long long)st->http_injected);
    for (int p = 0; p < SIM_P_N; p++) {
        if (p)
            sbuf_add(b, ",", 1);
        sbuf_jstr(b, sim_path_name((enum sim_http_path)p));
        sbuf_add(b, ":{", 2);
        for (int i = 0; i < SIM_MAX_CODES && st->http[p][i].code != 0; i++)
            sbuf_addf(b, "%s\"%d\":%llu", i ? "," : "", st->http[p][i].code,
                      (unsigned long long)st->http[p][i].n);
        sbuf_add(b, "}", 1);
    }
    sbuf_adds(b, "}},\"webhooks\":");
    if (s->wh != NULL) {
        struct sim_webhook_stats w;
        sim_webhook_stats(s->wh, &w);
        sbuf_addf(b,
                  "{\"enabled\":true,\"queued\":%llu,\"sent\":%llu,\"delivered\":%llu,"
                  "\"failed\":%llu,\"retries\":%llu,\"gaveUp\":%llu,\"dropped\":%llu,"
                  "\"pending\":%llu}",
                  (unsigned long long)w.queued, (unsigned long long)w.attempts,
                  (unsigned long long)w.delivered, (unsigned long long)w.failed,
                  (unsigned long long)w.retries, (unsigned long long)w.gave_up,
                  (unsigned long long)w.dropped, (unsigned long long)w.pending);
    } else {
        sbuf_adds(b, "{\"enabled\":false,\"queued\":0,\"sent\":0,\"delivered\":0,\"failed\":0,"
                     "\"retries\":0,\"gaveUp\":0,\"dropped\":0,\"pending\":0}");
    }
    sbuf_addf(b,
              ",\"requests\":{\"created\":%llu,\"active\":%zu,\"retained\":%zu,\"evicted\":%llu,"
              "\"statusChanges\":%llu},\"load\":{\"running\":%s,\"rate\":%lld,\"made\":%llu},"
              "\"controlCalls\":%llu}",
              (unsigned long long)st->requests_created, sim_model_active(s->model),
              sim_model_count(s->model), (unsigned long long)sim_model_evicted(s->model),
              (unsigned long long)st->status_changes, s->gen_running ? "true" : "false",
              (long long)s->gen_rate, (unsigned long long)s->gen_made,
              (unsigned long long)st->control_calls);
}

/* Upstream HTTP answers per 100 ms since the last stats reset, up to the last non-empty
 * bucket: {"startMs", "bucketMs", "counts"}. */
static void timeline(struct sim *s, struct sim_resp *out)
{
    const struct sim_stats *st = &s->stats;
    int n = SIM_TL_BUCKETS;
    while (n > 0 && st->tl[n - 1] == 0)
        n--;
    out->status = 200;
    sbuf_addf(&out->body, "{\"startMs\":%lld,\"bucketMs\":%d,\"counts\":[",
              (long long)st->tl_start_ms, SIM_TL_BUCKET_MS);
    for (int i = 0; i < n; i++)
        sbuf_addf(&out->body, "%s%u", i ? "," : "", st->tl[i]);
    sbuf_adds(&out->body, "]}");
}

static void load(struct sim *s, enum sim_method m, json_t *in, struct sim_resp *out)
{
    if (m == SIM_M_POST) {
        int64_t rate = 0, dur = 0;
        const char *err = NULL;
        if (in == NULL || !json_is_object(in) || opt_int(in, "rate", 0, 1000000, &rate, &err) != 1 ||
            opt_int(in, "durationMs", 0, 86400000LL * 365, &dur, &err) < 0) {
            bad(out, "expected {\"rate\": N, \"durationMs\"?: N}");
            return;
        }
        sim_load_set(s, rate, dur);
    } else if (m != SIM_M_GET) {
        sim_resp_error(out, 405, "method not allowed", "METHOD_NOT_ALLOWED");
        return;
    }
    out->status = 200;
    sbuf_addf(&out->body, "{\"running\":%s,\"rate\":%lld,\"made\":%llu}",
              s->gen_running ? "true" : "false", (long long)s->gen_rate,
              (unsigned long long)s->gen_made);
}

/* An optional boolean that may be absent: -1 when absent, else 0/1; *err set when not one. */
static int tri_bool(json_t *obj, const char *key, const char **err)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL)
        return -1;
    if (!json_is_boolean(v))
        *err = key;
    return json_is_true(v);
}

static void chains(struct sim *s, enum sim_method m, json_t *in, struct sim_resp *out)
{
    if (m == SIM_M_DELETE) {
        for (size_t i = 0; i < sim_chain_count(); i++)
            s->chain_flags[i] = (unsigned char)sim_chain_default_flags(i);
    } else if (m == SIM_M_POST) {
        int64_t id = 0;
        const char *err = NULL;
        int ok = in != NULL && json_is_object(in) &&
                 opt_int(in, "id", INT64_MIN, INT64_MAX, &id, &err) == 1;
        int disabled = ok ? tri_bool(in, "disabled", &err) : -1;
        int lagging = ok ? tri_bool(in, "blockProductionLagging", &err) : -1;
        if (!ok || err != NULL) {
            bad(out, "expected {\"id\": N, \"disabled\"?: bool, \"blockProductionLagging\"?: "
                     "bool}");
            return;
        }
        int i = sim_chain_index(id);
        if (i < 0) {
            sim_resp_error(out, 404, "no such chain", "NOT_FOUND");
            return;
        }
        unsigned f = s->chain_flags[i];
        if (disabled >= 0)
            f = disabled ? f | SIM_CHAIN_DISABLED : f & ~SIM_CHAIN_DISABLED;
        if (lagging >= 0)
            f = lagging ? f | SIM_CHAIN_LAGGING : f & ~SIM_CHAIN_LAGGING;
        s->chain_flags[i] = (unsigned char)f;
    } else if (m != SIM_M_GET) {
        sim_resp_error(out, 405, "method not allowed", "METHOD_NOT_ALLOWED");
        return;
    }
    out->status = 200;
    sj_chains(&out->body, s->chain_flags);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

void sim_control_handle(struct sim *s, enum sim_method method, const char *path,
                        const struct sim_query *q, const char *body, size_t len,
                        struct sim_resp *out)
{
    json_t *in = NULL;
    if (len > 0) {
        json_error_t jerr;
        in = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (in == NULL) {
            char msg[256];
            snprintf(msg, sizeof(msg), "body is not JSON: %s", jerr.text);
            bad(out, msg);
            return;
        }
    }
    const char *rest = path + 5; /* after "/_sim" */
    if (strcmp(rest, "/health") == 0) {
        out->status = 200;
        sbuf_addf(&out->body, "{\"ok\":true,\"sanitized\":%s}", SANITIZED ? "true" : "false");
    } else if (strncmp(rest, "/requests", 9) == 0 && (rest[9] == '\0' || rest[9] == '/')) {
        requests(s, method, rest + 9, q, in, out);
    } else if (strcmp(rest, "/faults") == 0 || strcmp(rest, "/faults/reset") == 0) {
        faults(s, strcmp(rest, "/faults/reset") == 0 ? SIM_M_DELETE : method, in, out);
    } else if (strcmp(rest, "/stats") == 0 && method == SIM_M_GET) {
        stats(s, out);
    } else if ((strcmp(rest, "/stats") == 0 && method == SIM_M_DELETE) ||
               (strcmp(rest, "/stats/reset") == 0 && method == SIM_M_POST)) {
        memset(&s->stats, 0, sizeof(s->stats));
        sim_model_reset_counts(s->model);
        if (s->wh != NULL)
            sim_webhook_reset_stats(s->wh);
        stats(s, out);
    } else if (strcmp(rest, "/timeline") == 0 && method == SIM_M_GET) {
        timeline(s, out);
    } else if (strcmp(rest, "/load") == 0) {
        load(s, method, in, out);
    } else if (strcmp(rest, "/chains") == 0) {
        chains(s, method, in, out);
    } else {
        sim_resp_error(out, 404, "no such control endpoint", "NOT_FOUND");
    }
    json_decref(in);
}
