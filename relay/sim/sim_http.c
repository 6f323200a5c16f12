/* sim_http.c - see sim_http.h. runs on: the simulator's lws thread.
 *
 * One HTTP transaction per session at a time (lws serialises keep-alive requests): the
 * request is copied out of lws in LWS_CALLBACK_HTTP (headers are not kept by lws later), the
 * answer is built at once (or after the body for POST), and written in HTTP_WRITEABLE,
 * possibly after a held delay (sul). The session state is reset at every new request. */
#include "relay/sim/sim_http.h"
#include "relay/sim/sim_scope.h"
#include "relay/sim/sim.h"
#include "relay/sim/sim_control.h"
#include "relay/sim/sim_map.h"
#include "relay/sim/sim_model.h"
#include "relay/sim/sim_rand.h"
#include "relay/sim/sim_search.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BODY_MAX (1024 * 1024)
#define MAX_BUCKETS 1024
#define V3_DEFAULT_LIMIT 20
#define V3_MAX_LIMIT 50

struct hsess {
    struct lws *wsi;
    struct sim *sim;
    int active;            /* a request is being handled */
    enum sim_method method;
    char path[512];
    struct sim_query q;
    char api_key[256];
    int has_key;
    char *body;
    size_t blen;
    int body_too_big;
    int responded;         /* resp is ready */
    int holding;           /* waiting for the delay timer */
    int close_after;       /* POST without a length: answer, then close */
    struct sim_resp resp;
    lws_sorted_usec_list_t sul;
};

struct bucket {
    char *key;
    int64_t *ring; /* accepted call times (mono ms), ring of cfg limit */
    int64_t head, count;
};

struct sim_http {
    struct sim *sim;
    struct sim_map *buckets;
    int64_t bucket_limit; /* limit the buckets were made for */
};

/* ---- small helpers ------------------------------------------------------------------------- */

const char *sim_query_get(const struct sim_query *q, const char *name)
{
    for (int i = 0; i < q->n; i++)
        if (strcmp(q->name[i], name) == 0)
            return q->value[i];
    return NULL;
}

void sim_resp_error(struct sim_resp *r, int status, const char *message, const char *code)
{
    r->status = status;
    r->ctype = NULL;
    r->body.len = r->body.pre;
    sj_error(&r->body, message, code);
}

const char *sim_path_name(enum sim_http_path p)
{
    switch (p) {
    case SIM_P_STATUS:
        return "/intents/status/v3";
    case SIM_P_REQUESTS:
        return "/requests/v3";
    case SIM_P_CHAINS:
        return "/chains";
    default:
        return "other";
    }
}

/* Count one upstream HTTP answer. */
static void sim_stats_http(struct sim *s, enum sim_http_path p, int code)
{
    s->stats.http_total++;
    int64_t now = wall_ms();
    if (s->stats.tl_start_ms == 0)
        s->stats.tl_start_ms = now;
    int64_t b = (now - s->stats.tl_start_ms) / SIM_TL_BUCKET_MS;
    s->stats.tl[b < 0 ? 0 : b >= SIM_TL_BUCKETS ? SIM_TL_BUCKETS - 1 : b]++;
    for (int i = 0; i < SIM_MAX_CODES; i++) {
        if (s->stats.http[p][i].code == code || s->stats.http[p][i].code == 0) {
            s->stats.http[p][i].code = code;
            s->stats.http[p][i].n++;
            return;
        }
    }
}

/* ---- rate limit --------------------------------------------------------------------------- */

struct sim_http *sim_http_new(struct sim *s)
{
    struct sim_http *h = xcalloc(1, sizeof(*h));
    h->sim = s;
    h->buckets = sim_map_new();
    return h;
}

static void bucket_free_cb(void *arg, const char *key, void *val)
{
    struct bucket *b = val;
    free(b->ring);
    free(b->key);
    free(b);
}

/* Forget every rate-limit window (after the limit changed). */
static void sim_http_reset_limits(struct sim_http *h)
{
    sim_map_each(h->buckets, bucket_free_cb, NULL);
    sim_map_free(h->buckets);
    h->buckets = sim_map_new();
}

void sim_http_free(struct sim_http *h)
{
    if (h == NULL)
        return;
    sim_map_each(h->buckets, bucket_free_cb, NULL);
    sim_map_free(h->buckets);
    free(h);
}

/* Sliding 60 s window per key. Returns 0 when the call may go ahead (and records it), or
 * the seconds until a slot frees up. */
static int rate_check(struct sim_http *h, const char *key)
{
    int64_t limit = h->sim->faults.rate_limit;
    if (limit <= 0)
        return 0;
    if (limit != h->bucket_limit) {
        sim_http_reset_limits(h);
        h->bucket_limit = limit;
    }
    struct bucket *b = sim_map_get(h->buckets, key);
    if (b == NULL) {
        if (sim_map_count(h->buckets) >= MAX_BUCKETS)
            key = "(overflow)";
        if ((b = sim_map_get(h->buckets, key)) == NULL) {
            b = xcalloc(1, sizeof(*b));
            b->key = xstrdup(key);
            b->ring = xcalloc((size_t)limit, sizeof(*b->ring));
            sim_map_put(h->buckets, b->key, b);
        }
    }
    int64_t now = mono_ms();
    if (b->count == limit) {
        int64_t oldest = b->ring[b->head]; /* head is the oldest once the ring is full */
        if (now - oldest < 60000) {
            int64_t wait = (oldest + 60000 - now + 999) / 1000;
            return wait < 1 ? 1 : (int)wait;
        }
    }
    b->ring[b->head] = now;
    b->head = (b->head + 1) % limit;
    if (b->count < limit)
        b->count++;
    return 0;
}

/* ---- upstream endpoints ---------------------------------------------------------------------- */

static void status_v3(struct hsess *h)
{
    struct sim_resp *r = &h->resp;
    const char *id = sim_query_get(&h->q, "requestId");
    if (id == NULL || *id == '\0') {
        sim_resp_error(r, 400, "querystring must have required property 'requestId'",
                       "INVALID_INPUT_PARAMETERS");
        return;
    }
    struct sim_req *req = sim_model_find(h->sim->model, id);
    if (req == NULL) {
        sim_resp_error(r, 404, "Request not found", "REQUEST_NOT_FOUND");
        return;
    }
    r->status = 200;
    sj_status_v3(&r->body, req);
}

enum sort_by { SORT_CREATED, SORT_UPDATED, SORT_AMOUNT };

static int64_t sort_key(const struct sim_req *r, enum sort_by by)
{
    return by == SORT_UPDATED ? r->updated_ms : by == SORT_AMOUNT ? r->amount_wei : r->created_ms;
}

/* (key, seq) ordering */
static int cmp_pos(int64_t ka, uint64_t sa, int64_t kb, uint64_t sb)
{
    if (ka != kb)
        return ka < kb ? -1 : 1;
    return sa < sb ? -1 : sa > sb ? 1 : 0;
}

/* Opaque cursor: base64url("v1.<by>.<dir>.<key>.<seq>"). */
static void cursor_encode(enum sort_by by, int desc, int64_t key, uint64_t seq, char *out,
                          size_t n)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char plain[96];
    int len = snprintf(plain, sizeof(plain), "v1.%d.%d.%" PRId64 ".%" PRIu64, (int)by, desc,
                       key, seq);
    size_t o = 0;
    for (int i = 0; i < len && o + 5 < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)plain[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)(unsigned char)plain[i + 1] << 8;
        if (i + 2 < len)
            v |= (unsigned char)plain[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        if (i + 1 < len)
            out[o++] = b64[(v >> 6) & 63];
        if (i + 2 < len)
            out[o++] = b64[v & 63];
    }
    out[o] = '\0';
}

static int cursor_decode(const char *s, enum sort_by by, int desc, int64_t *key, uint64_t *seq)
{
    char plain[96];
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (const char *p = s; *p; p++) {
        int v;
        if (*p >= 'A' && *p <= 'Z')
            v = *p - 'A';
        else if (*p >= 'a' && *p <= 'z')
            v = *p - 'a' + 26;
        else if (*p >= '0' && *p <= '9')
            v = *p - '0' + 52;
        else if (*p == '-')
            v = 62;
        else if (*p == '_')
            v = 63;
        else
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o + 1 >= sizeof(plain))
                return -1;
            plain[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    plain[o] = '\0';
    int b, d;
    long long k;
    unsigned long long q;
    char tail;
    if (sscanf(plain, "v1.%d.%d.%lld.%llu%c", &b, &d, &k, &q, &tail) != 4)
        return -1;
    if (b != (int)by || d != desc)
        return -1;
    *key = k;
    *seq = q;
    return 0;
}

static int parse_i64(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0' || errno != 0)
        return -1;
    *out = v;
    return 0;
}

static const char *v3_status(const struct sim_req *r)
{
    return strcmp(r->status, "delayed") == 0 ? "pending" : r->status;
}

/* A GET /requests/v3 query, parsed. */
struct v3_query {
    int64_t limit, start, end, origin, dest, chain; /* start/end: s; -1 / 0 = none */
    enum sort_by by;
    int desc;
    int have_cursor;
    int64_t ckey;       /* the cursor's position: sort key and sequence */
    uint64_t cseq;
    const char *id, *user, *status, *depaddr; /* exact filters, NULL = any */
    const char *term; /* the upstream's search term (sim_search.c), NULL = any */
    const char *scope; /* apiKey: a comma list of keys (sim_scope.c), NULL = any */
    const struct sim *sim;
};

/* The query string into vq with the upstream's defaults. Returns 0, or -1 with resp set to
 * the upstream's 400 for the first bad parameter. */
static int v3_parse(const struct sim_query *q, struct v3_query *vq, struct sim_resp *resp)
{
    *vq = (struct v3_query){.limit = V3_DEFAULT_LIMIT, .start = -1, .end = -1,
                            .by = SORT_CREATED, .desc = 1};
    const char *v;
    if ((v = sim_query_get(q, "limit")) != NULL &&
        (parse_i64(v, &vq->limit) != 0 || vq->limit < 1 || vq->limit > V3_MAX_LIMIT)) {
        sim_resp_error(resp, 400, "querystring/limit must be an integer between 1 and 50",
                       "INVALID_INPUT_PARAMETERS");
        return -1;
    }
    if ((v = sim_query_get(q, "sortBy")) != NULL) {
        if (strcmp(v, "updatedAt") == 0)
            vq->by = SORT_UPDATED;
        else if (strcmp(v, "amountUsd") == 0)
            vq->by = SORT_AMOUNT;
        else if (strcmp(v, "createdAt") != 0) {
            sim_resp_error(resp, 400,
                           "querystring/sortBy must be equal to one of the allowed values",
                           "INVALID_INPUT_PARAMETERS");
            return -1;
        }
    }
    if ((v = sim_query_get(q, "sortDirection")) != NULL) {
        if (strcmp(v, "asc") == 0)
            vq->desc = 0;
        else if (strcmp(v, "desc") != 0) {
            sim_resp_error(resp, 400,
                           "querystring/sortDirection must be equal to one of the allowed values",
                           "INVALID_INPUT_PARAMETERS");
            return -1;
        }
    }
    if (((v = sim_query_get(q, "startTimestamp")) != NULL && parse_i64(v, &vq->start) != 0) ||
        ((v = sim_query_get(q, "endTimestamp")) != NULL && parse_i64(v, &vq->end) != 0) ||
        ((v = sim_query_get(q, "originChainId")) != NULL && parse_i64(v, &vq->origin) != 0) ||
        ((v = sim_query_get(q, "destinationChainId")) != NULL && parse_i64(v, &vq->dest) != 0) ||
        ((v = sim_query_get(q, "chainId")) != NULL && parse_i64(v, &vq->chain) != 0)) {
        sim_resp_error(resp, 400, "querystring has a parameter that must be a number",
                       "INVALID_INPUT_PARAMETERS");
        return -1;
    }
    if ((v = sim_query_get(q, "continuation")) != NULL && *v != '\0') {
        if (cursor_decode(v, vq->by, vq->desc, &vq->ckey, &vq->cseq) != 0) {
            sim_resp_error(resp, 400, "Invalid continuation", "INVALID_INPUT_PARAMETERS");
            return -1;
        }
        vq->have_cursor = 1;
    }
    vq->id = sim_query_get(q, "id");
    vq->user = sim_query_get(q, "user");
    vq->status = sim_query_get(q, "status");
    vq->depaddr = sim_query_get(q, "depositAddress");
    vq->term = sim_query_get(q, "term"); /* sim_search.c */
    vq->scope = sim_query_get(q, "apiKey"); /* sim_scope.c */
    return 0;
}

/* 1 when r passes vq's filters and time window and lies past its cursor. */
static int v3_matches(const struct v3_query *vq, const struct sim_req *r)
{
    if (vq->id && strcmp(r->id, vq->id) != 0)
        return 0;
    if (vq->user && strcasecmp(r->user, vq->user) != 0 && strcasecmp(r->recipient, vq->user) != 0)
        return 0;
    if (vq->status && strcmp(v3_status(r), vq->status) != 0)
        return 0;
    if (vq->origin && r->origin != vq->origin)
        return 0;
    if (vq->dest && r->dest != vq->dest)
        return 0;
    if (vq->chain && r->origin != vq->chain && r->dest != vq->chain)
        return 0;
    if (vq->depaddr && (r->dep == NULL || strcasecmp(r->dep->address, vq->depaddr) != 0))
        return 0;
    if (vq->term && !sim_term_match(r, vq->term))
        return 0;
    if (vq->scope && !sim_scope_match(vq->sim, r, vq->scope))
        return 0;
    /* Time windows apply to the sort field; for amountUsd to createdAt. */
    int64_t t = sort_key(r, vq->by == SORT_AMOUNT ? SORT_CREATED : vq->by);
    if (vq->start >= 0 && t < vq->start * 1000)
        return 0;
    if (vq->end >= 0 && t > vq->end * 1000 + 999)
        return 0;
    if (vq->have_cursor) {
        int c = cmp_pos(sort_key(r, vq->by), r->seq, vq->ckey, vq->cseq);
        if (vq->desc ? c >= 0 : c <= 0)
            return 0;
    }
    return 1;
}

/* Keep the best `want` matches in page order (asc or desc): insert r into best[*nbest]. */
static void v3_keep(const struct v3_query *vq, struct sim_req **best, int *nbest, int want,
                    struct sim_req *r)
{
    int64_t k = sort_key(r, vq->by);
    int i = *nbest;
    while (i > 0) {
        struct sim_req *b = best[i - 1];
        int c = cmp_pos(k, r->seq, sort_key(b, vq->by), b->seq);
        if (vq->desc ? c < 0 : c > 0)
            break;
        i--;
    }
    if (i >= want)
        return;
    int last = *nbest < want ? *nbest : want - 1;
    memmove(&best[i + 1], &best[i], (size_t)(last - i) * sizeof(best[0]));
    best[i] = r;
    if (*nbest < want)
        (*nbest)++;
}

static void requests_v3(struct hsess *h)
{
    struct sim_resp *resp = &h->resp;
    struct v3_query vq;
    if (v3_parse(&h->q, &vq, resp) != 0)
        return;
    vq.sim = h->sim;
    /* Best limit+1 matches past the cursor, in page order (insertion into a small array). */
    struct sim_req *best[V3_MAX_LIMIT + 1];
    int nbest = 0, want = (int)vq.limit + 1;
    for (struct sim_req *r = sim_model_oldest(h->sim->model); r != NULL; r = r->next)
        if (v3_matches(&vq, r))
            v3_keep(&vq, best, &nbest, want, r);
    int more = nbest > vq.limit;
    int n = more ? (int)vq.limit : nbest;
    resp->status = 200;
    sbuf_adds(&resp->body, "{\"requests\":[");
    for (int i = 0; i < n; i++) {
        if (i)
            sbuf_add(&resp->body, ",", 1);
        sj_requests_v3_item(&resp->body, best[i]);
    }
    sbuf_add(&resp->body, "]", 1);
    if (more) {
        char cur[160];
        cursor_encode(vq.by, vq.desc, sort_key(best[n - 1], vq.by), best[n - 1]->seq, cur,
                      sizeof(cur));
        sbuf_adds(&resp->body, ",\"continuation\":");
        sbuf_jstr(&resp->body, cur);
    }
    sbuf_add(&resp->body, "}", 1);
}

static enum sim_http_path route(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 18 && strncmp(path, "/intents/status/v3", n) == 0)
        return SIM_P_STATUS;
    if (n == 12 && strncmp(path, "/requests/v3", n) == 0)
        return SIM_P_REQUESTS;
    if (n == 7 && strncmp(path, "/chains", n) == 0)
        return SIM_P_CHAINS;
    return SIM_P_OTHER;
}

static void inject_error(struct sim *s, struct sim_resp *r)
{
    int code = s->faults.http_error_status;
    if (code == 0) {
        static const int codes[] = {429, 500, 503};
        code = codes[sim_rng_below(&s->fault_rng, 3)];
    }
    switch (code) {
    case 429:
        sim_resp_error(r, 429, "Too many requests, please try again later", "RATE_LIMITED");
        r->retry_after_s = 1;
        break;
    case 500:
        sim_resp_error(r, 500, "Failed to fetch token price", "PRICE_FETCH_FAILED");
        break;
    case 502: /* what a proxy in front of the upstream answers: HTML, not JSON */
        r->status = 502;
        r->ctype = "text/html";
        r->body.len = r->body.pre;
        sbuf_adds(&r->body, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
                            "<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n");
        break;
    case 504:
        sim_resp_error(r, 504, "Gateway timeout", "GATEWAY_TIMEOUT");
        break;
    default:
        sim_resp_error(r, code, "Service temporarily unavailable", "SERVICE_UNAVAILABLE");
        break;
    }
}

/* Answer an upstream call: auth, rate limit, injected faults, then the endpoint. */
static void upstream(struct hsess *h)
{
    struct sim *s = h->sim;
    struct sim_resp *r = &h->resp;
    enum sim_http_path p = route(h->path);
    const char *key = h->has_key ? h->api_key : "";
    struct sim_faults *f = &s->faults;

    if (h->method != SIM_M_GET || p == SIM_P_OTHER) {
        sim_resp_error(r, 404, "Route not found", "NOT_FOUND");
        if (strcmp(h->path, "/") == 0 && h->method == SIM_M_GET) {
            r->status = 200;
            r->body.len = r->body.pre;
            sbuf_addf(&r->body,
                      "{\"name\":\"statusrelay-sim\",\"websocket\":\"/\",\"endpoints\":"
                      "[\"/intents/status/v3\",\"/requests/v3\",\"/chains\"],\"control\":"
                      "\"/_sim/\"}");
        }
        goto out;
    }
    /* Per-request counters: every call naming the id, whatever the answer. */
    if (p == SIM_P_STATUS)
        sim_model_count_call(s->model, sim_query_get(&h->q, "requestId"), SIM_COUNT_STATUS_POLL);
    else if (p == SIM_P_REQUESTS)
        sim_model_count_call(s->model, sim_query_get(&h->q, "id"), SIM_COUNT_REQUESTS_READ);
    if (f->refuse_key != 0 && h->has_key) { /* a revoked key */
        if (f->refuse_key == 403)
            sim_resp_error(r, 403, "API key is disabled", "FORBIDDEN");
        else
            sim_resp_error(r, 401, "Invalid API key", "UNAUTHORIZED");
        goto out;
    }
    if (s->cfg.api_key != NULL) {
        if (h->has_key && strcmp(h->api_key, s->cfg.api_key) != 0) {
            sim_resp_error(r, 401, "Invalid API key", "UNAUTHORIZED");
            goto out;
        }
        if (!h->has_key && p == SIM_P_REQUESTS) {
            sim_resp_error(r, 401, "Missing API key: x-api-key header is required",
                           "UNAUTHORIZED");
            goto out;
        }
    }
    int wait = rate_check(s->http, key);
    if (wait > 0) {
        s->stats.http_rate_limited++;
        sim_resp_error(r, 429, "Too many requests, please try again later", "RATE_LIMITED");
        r->retry_after_s = wait;
        goto out;
    }
    if ((f->http_error_count > 0 || f->http_error_rate > 0) &&
        strncmp(h->path, f->http_error_path, strlen(f->http_error_path)) == 0) {
        int hit = 0;
        if (f->http_error_count > 0) {
            f->http_error_count--;
            hit = 1;
        } else if (sim_rng_unit(&s->fault_rng) < f->http_error_rate) {
            hit = 1;
        }
        if (hit) {
            s->stats.http_injected++;
            inject_error(s, r);
            goto out;
        }
    }
    switch (p) {
    case SIM_P_STATUS:
        status_v3(h);
        break;
    case SIM_P_REQUESTS:
        requests_v3(h);
        break;
    default:
        r->status = 200;
        sj_chains(&r->body, s->chain_flags);
        break;
    }
out:
    r->delay_ms = f->http_delay_ms;
    sim_stats_http(s, p, r->status);
    log_debug("upstream call", "path=%s status=%d", h->path, r->status);
}

/* ---- session ---------------------------------------------------------------------------------- */

static void sess_reset(struct hsess *h)
{
    lws_sul_cancel(&h->sul);
    free(h->body);
    h->body = NULL;
    h->blen = 0;
    h->body_too_big = 0;
    sbuf_free(&h->resp.body);
    memset(&h->resp, 0, sizeof(h->resp));
    h->responded = h->holding = h->active = h->close_after = 0;
    h->has_key = 0;
    h->q.n = 0;
    h->q.used = 0;
}

static void on_hold_done(lws_sorted_usec_list_t *sul)
{
    struct hsess *h = lws_container_of(sul, struct hsess, sul);
    h->holding = 0;
    lws_callback_on_writable(h->wsi);
}

/* The request is complete: build the answer and ask to write it. */
static void dispatch(struct hsess *h)
{
    struct sim *s = h->sim;
    sbuf_init(&h->resp.body, LWS_PRE);
    h->resp.status = 500;
    if (strncmp(h->path, "/_sim/", 6) == 0 || strcmp(h->path, "/_sim") == 0) {
        s->stats.control_calls++;
        if (h->body_too_big)
            sim_resp_error(&h->resp, 413, "request body over 1 MiB", "PAYLOAD_TOO_LARGE");
        else
            sim_control_handle(s, h->method, h->path, &h->q, h->body, h->blen, &h->resp);
    } else {
        upstream(h);
    }
    h->responded = 1;
    if (h->resp.delay_ms > 0) {
        h->holding = 1;
        lws_set_timeout(h->wsi, PENDING_TIMEOUT_HTTP_CONTENT,
                        (int)(h->resp.delay_ms / 1000) + 30);
        lws_sul_schedule(s->ctx, 0, &h->sul, on_hold_done, h->resp.delay_ms * LWS_US_PER_MS);
        return;
    }
    lws_callback_on_writable(h->wsi);
}

static void copy_args(struct hsess *h)
{
    struct sim_query *q = &h->q;
    for (int i = 0; q->n < SIM_MAX_ARGS; i++) {
        size_t room = sizeof(q->buf) - q->used;
        if (room < 2)
            break;
        int n = lws_hdr_copy_fragment(h->wsi, q->buf + q->used, (int)room,
                                      WSI_TOKEN_HTTP_URI_ARGS, i);
        if (n < 0)
            break;
        char *arg = q->buf + q->used;
        q->used += (size_t)n + 1;
        char *eq = strchr(arg, '=');
        if (eq != NULL)
            *eq = '\0';
        q->name[q->n] = arg;
        q->value[q->n] = eq ? eq + 1 : "";
        q->n++;
    }
}

static enum sim_method method_of(struct lws *wsi)
{
    if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI))
        return SIM_M_GET;
    if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI))
        return SIM_M_POST;
    if (lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI))
        return SIM_M_DELETE;
    if (lws_hdr_total_length(wsi, WSI_TOKEN_PUT_URI))
        return SIM_M_PUT;
    return SIM_M_OTHER;
}

/* Write the answer: headers, then the whole body (lws buffers what the socket does not
 * take yet and completes the transaction after it). Returns -1 to close. */
static int write_answer(struct hsess *h)
{
    struct sim_resp *r = &h->resp;
    unsigned char hdr[LWS_PRE + 1024], *start = hdr + LWS_PRE, *p = start,
                                       *end = hdr + sizeof(hdr) - 1;
    size_t blen = sbuf_textlen(&r->body);
    if (lws_add_http_common_headers(h->wsi, (unsigned)r->status,
                                    r->ctype ? r->ctype : "application/json", blen, &p, end))
        return -1;
    if (r->retry_after_s > 0) {
        char v[16];
        int n = snprintf(v, sizeof(v), "%d", r->retry_after_s);
        if (lws_add_http_header_by_name(h->wsi, (const unsigned char *)"retry-after:",
                                        (const unsigned char *)v, n, &p, end))
            return -1;
    }
    if (lws_finalize_write_http_header(h->wsi, start, &p, end))
        return -1;
    if (blen > 0 && lws_write(h->wsi, (unsigned char *)r->body.p + LWS_PRE, blen,
                              LWS_WRITE_HTTP_FINAL) < 0)
        return -1;
    int close_after = h->close_after;
    sess_reset(h);
    if (close_after && !lws_send_pipe_choked(h->wsi))
        return -1; /* lws still expects a body on this connection: do not reuse it */
    if (lws_http_transaction_completed(h->wsi))
        return -1;
    return 0;
}

size_t sim_http_session_size(void)
{
    return sizeof(struct hsess);
}

int sim_http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                      size_t len)
{
    struct hsess *h = user;
    struct sim *s = lws_context_user(lws_get_context(wsi));

    switch (reason) {
    case LWS_CALLBACK_HTTP: {
        sess_reset(h);
        h->wsi = wsi;
        h->sim = s;
        h->active = 1;
        h->method = method_of(wsi);
        snprintf(h->path, sizeof(h->path), "%s", in ? (const char *)in : "/");
        copy_args(h);
        int kl = lws_hdr_custom_length(wsi, "x-api-key:", 10);
        if (kl > 0 && kl < (int)sizeof(h->api_key) &&
            lws_hdr_custom_copy(wsi, h->api_key, sizeof(h->api_key), "x-api-key:", 10) >= 0)
            h->has_key = 1;
        if (h->method == SIM_M_POST || h->method == SIM_M_PUT) {
            /* The body follows (HTTP_BODY, then HTTP_BODY_COMPLETION, also for an explicit
             * Content-Length: 0 on POST). */
            if (!lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) &&
                !lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING)) {
                /* No body at all (curl -X POST without -d): lws would wait for one. */
                h->close_after = 1;
                dispatch(h);
            }
            return 0;
        }
        dispatch(h);
        return 0;
    }

    case LWS_CALLBACK_HTTP_BODY:
        if (!h->active || h->responded)
            return 0;
        if (h->blen + len > BODY_MAX) {
            h->body_too_big = 1;
            return 0;
        }
        if (len > 0) {
            h->body = xrealloc(h->body, h->blen + len + 1);
            memcpy(h->body + h->blen, in, len);
            h->blen += len;
            h->body[h->blen] = '\0';
        }
        return 0;

    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        if (h->active && !h->responded)
            dispatch(h);
        return 0;

    case LWS_CALLBACK_HTTP_WRITEABLE:
        if (!h->active || !h->responded || h->holding)
            return 0;
        return write_answer(h);

    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        if (h != NULL)
            sess_reset(h);
        return 0;

    default:
        return 0;
    }
}
