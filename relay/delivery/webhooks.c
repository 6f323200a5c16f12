/* webhooks.c - see webhooks.h. runs on: core thread.
 *
 * Ownership: the set (struct webhooks) owns the sorted endpoint array (one reference per
 * endpoint); each reload builds new endpoint values and
 * moves them into the surviving structs. Redis replies are copied out in their callbacks. */
#include "relay/delivery/webhooks.h"
#include "protocol/addr.h"
#include "relay/core.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "store/keys.h"
#include "store/store.h"

#include <ctype.h>
#include <event2/buffer.h>
#include <openssl/crypto.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct reload_waiter {
    webhooks_done_cb *cb;
    void *arg;
    struct reload_waiter *next;
};

struct webhooks {
    struct core *c;
    int closing;
    int pending; /* store commands in flight with w as arg (w outlives them) */
    struct webhook **v; /* sorted by id; one reference each */
    size_t n;
    char version[24];
    int loading, again;
    struct reload_waiter *waiting, *running; /* for the next load / the one in flight */
    struct store_script sc_put, sc_del, sc_load, sc[WH_SC_COUNT];
    struct evdns_base *dns;
};

static void cleanse_str(char *s)
{
    OPENSSL_cleanse(s, strlen(s));
}

static void service_free(struct webhooks *w);

/* ---- endpoint values ----------------------------------------------------------------- */

static void filters_cleanup(struct webhook_filters *f)
{
    for (size_t i = 0; i < f->nstatus; i++)
        free(f->status[i]);
    for (size_t i = 0; i < f->nrequest_ids; i++)
        free(f->request_ids[i]);
    free(f->status);
    free(f->request_ids);
    free(f->origin);
    free(f->dest);
    memset(f, 0, sizeof(*f));
}

/* The values a reload replaces (everything but identity, refs and dispatcher state). */
static void values_cleanup(struct webhook *wh)
{
    free(wh->url);
    free(wh->target);
    free(wh->description);
    free(wh->filters_json);
    free(wh->headers_json);
    if (wh->header_lines)
        for (char **p = wh->header_lines; *p; p++)
            free(*p);
    free(wh->header_lines);
    filters_cleanup(&wh->f);
    if (wh->secret)
        cleanse_str(wh->secret);
    free(wh->secret);
    if (wh->prev_secret)
        cleanse_str(wh->prev_secret);
    free(wh->prev_secret);
    proto_hmac_free(wh->hmac);
    proto_hmac_free(wh->prev_hmac);
    proto_hmac_free(wh->up_hmac);
    free(wh->disabled_reason);
    wh->url = wh->target = wh->description = wh->filters_json = wh->headers_json = NULL;
    wh->header_lines = NULL;
    wh->secret = wh->prev_secret = wh->disabled_reason = NULL;
    wh->hmac = wh->prev_hmac = wh->up_hmac = NULL;
    memset(wh->seed, 0, sizeof(wh->seed));
    memset(wh->prev_seed, 0, sizeof(wh->prev_seed));
}

void webhook_ref(struct webhook *wh)
{
    wh->refs++;
}

void webhook_unref(struct webhook *wh)
{
    if (wh == NULL || --wh->refs > 0)
        return;
    values_cleanup(wh);
    free(wh);
}

static int parse_filters(const char *text, struct webhook_filters *f)
{
    memset(f, 0, sizeof(*f));
    if (text == NULL || text[0] == '\0')
        return 0;
    json_t *j = json_loads(text, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return -1;
    }
    json_t *a;
    size_t i;
    json_t *v;
    if ((a = json_object_get(j, "status")) && json_is_array(a)) {
        f->status = xcalloc(json_array_size(a) + 1, sizeof(char *));
        json_array_foreach(a, i, v) f->status[f->nstatus++] = xstrdup(json_string_value(v));
    }
    if ((a = json_object_get(j, "requestIds")) && json_is_array(a)) {
        f->request_ids = xcalloc(json_array_size(a) + 1, sizeof(char *));
        json_array_foreach(a, i, v) f->request_ids[f->nrequest_ids++] =
            xstrdup(json_string_value(v));
    }
    if ((a = json_object_get(j, "originChainIds")) && json_is_array(a)) {
        f->origin = xcalloc(json_array_size(a) + 1, sizeof(int64_t));
        json_array_foreach(a, i, v) f->origin[f->norigin++] = json_integer_value(v);
    }
    if ((a = json_object_get(j, "destinationChainIds")) && json_is_array(a)) {
        f->dest = xcalloc(json_array_size(a) + 1, sizeof(int64_t));
        json_array_foreach(a, i, v) f->dest[f->ndest++] = json_integer_value(v);
    }
    json_decref(j);
    return 0;
}

static char **parse_header_lines(const char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    size_t n = json_is_object(j) ? json_object_size(j) : 0;
    char **lines = xcalloc(n + 1, sizeof(char *));
    const char *k;
    json_t *v;
    size_t i = 0;
    if (n > 0)
        json_object_foreach(j, k, v) if (json_is_string(v)) lines[i++] =
            xasprintf("%s: %s", k, json_string_value(v));
    json_decref(j);
    return lines;
}

static struct proto_hmac *hmac_of_secret(const char *secret)
{
    unsigned char key[PROTO_SECRET_MAX];
    size_t keylen = 0;
    if (secret == NULL || proto_whsec_parse(secret, key, &keylen) != 0)
        return NULL;
    struct proto_hmac *h = proto_hmac_new(key, keylen);
    OPENSSL_cleanse(key, sizeof(key));
    return h;
}

static int seed_of_secret(const char *secret, unsigned char seed[PROTO_ED25519_SEED])
{
    unsigned char key[PROTO_SECRET_MAX];
    size_t keylen = 0;
    if (secret == NULL || proto_whsec_parse(secret, key, &keylen) != 0 ||
        keylen != PROTO_ED25519_SEED) {
        OPENSSL_cleanse(key, sizeof(key));
        return -1;
    }
    memcpy(seed, key, PROTO_ED25519_SEED);
    OPENSSL_cleanse(key, sizeof(key));
    return 0;
}

static int64_t field_i64(const char *s)
{
    return s ? strtoll(s, NULL, 10) : 0;
}

/* Fill wh's values from a wh_load row {id, field, value, ...}. */
static void values_from_row(struct webhook *wh, const redisReply *row)
{
    const char *url = NULL, *filters = NULL, *headers = NULL, *desc = NULL, *enabled = NULL,
               *scheme = NULL, *signing = NULL, *mode = NULL, *secret = NULL, *prev = NULL,
               *prev_exp = NULL, *created = NULL, *fail_since = NULL, *dis_reason = NULL,
               *dis_at = NULL;
    for (size_t i = 1; i + 1 < row->elements; i += 2) {
        const char *k = row->element[i]->str, *v = row->element[i + 1]->str;
        if (k == NULL || v == NULL)
            continue;
        if (!strcmp(k, "url"))
            url = v;
        else if (!strcmp(k, "filters"))
            filters = v;
        else if (!strcmp(k, "headers"))
            headers = v;
        else if (!strcmp(k, "description"))
            desc = v;
        else if (!strcmp(k, "enabled"))
            enabled = v;
        else if (!strcmp(k, "signatureScheme"))
            scheme = v;
        else if (!strcmp(k, "signing"))
            signing = v;
        else if (!strcmp(k, "mode"))
            mode = v;
        else if (!strcmp(k, "secret"))
            secret = v;
        else if (!strcmp(k, "prevSecret"))
            prev = v;
        else if (!strcmp(k, "prevExpiresAt"))
            prev_exp = v;
        else if (!strcmp(k, "createdAt"))
            created = v;
        else if (!strcmp(k, "failSince"))
            fail_since = v;
        else if (!strcmp(k, "disabledReason"))
            dis_reason = v;
        else if (!strcmp(k, "disabledAt"))
            dis_at = v;
    }
    wh->url = xstrdup(url ? url : "");
    struct proto_url pu;
    char canon[PROTO_URL_MAX + 64];
    if (proto_url_parse(wh->url, &pu, NULL) == 0 &&
        proto_url_format(&pu, canon, sizeof(canon)) == 0)
        wh->target = xstrdup(canon);
    else
        wh->target = xstrdup(wh->url);
    wh->description = xstrdup(desc ? desc : "");
    wh->filters_json = xstrdup(filters ? filters : "{}");
    wh->headers_json = xstrdup(headers ? headers : "{}");
    if (parse_filters(wh->filters_json, &wh->f) != 0)
        log_warn("webhook filters unreadable, matching everything", "webhook=%s", wh->id);
    wh->header_lines = parse_header_lines(wh->headers_json);
    wh->enabled = enabled && !strcmp(enabled, "1");
    wh->latest = mode && !strcmp(mode, "latest");
    wh->ed25519 = signing && !strcmp(signing, "ed25519");
    wh->scheme = scheme && !strcmp(scheme, "upstream") ? WH_SCHEME_UPSTREAM
                 : scheme && !strcmp(scheme, "both")  ? WH_SCHEME_BOTH
                                                       : WH_SCHEME_STANDARD;
    wh->secret = secret ? xstrdup(secret) : NULL;
    wh->prev_secret = prev ? xstrdup(prev) : NULL;
    wh->prev_expires = field_i64(prev_exp);
    wh->created_at = field_i64(created);
    wh->fail_since = field_i64(fail_since);
    wh->disabled_at = field_i64(dis_at);
    wh->disabled_reason = dis_reason ? xstrdup(dis_reason) : NULL;
    wh->public_key[0] = '\0';
    if (wh->ed25519) {
        if (seed_of_secret(wh->secret, wh->seed) != 0 ||
            proto_ed25519_public(wh->seed, wh->public_key, sizeof(wh->public_key)) != 0)
            log_warn("webhook ed25519 key unreadable", "webhook=%s", wh->id);
        if (wh->prev_secret && seed_of_secret(wh->prev_secret, wh->prev_seed) != 0)
            wh->prev_expires = 0;
    } else {
        wh->hmac = hmac_of_secret(wh->secret);
        wh->prev_hmac = hmac_of_secret(wh->prev_secret);
        if (wh->hmac == NULL)
            log_warn("webhook secret unreadable", "webhook=%s", wh->id);
    }
    if (wh->secret)
        wh->up_hmac = proto_hmac_new((const unsigned char *)wh->secret, strlen(wh->secret));
}

/* ---- the endpoint set ----------------------------------------------------------------- */

static int cmp_id(const void *a, const void *b)
{
    const struct webhook *x = *(struct webhook *const *)a, *y = *(struct webhook *const *)b;
    return strcmp(x->id, y->id);
}

struct webhook *webhooks_find(struct webhooks *w, const char *id)
{
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = strcmp(w->v[mid]->id, id);
        if (r == 0)
            return w->v[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t webhooks_count(const struct webhooks *w)
{
    return w->n;
}

struct webhook *webhooks_at(struct webhooks *w, size_t i)
{
    return i < w->n ? w->v[i] : NULL;
}

const char *webhooks_version(const struct webhooks *w)
{
    return w->version;
}

struct webhooks *webhooks_of(struct core *c)
{
    return c->webhooks;
}

struct core *webhooks_core(struct webhooks *w)
{
    return w->c;
}

static void load_start(struct webhooks *w);

static void on_load(void *arg, const char *err, redisReply *r)
{
    struct webhooks *w = arg;
    struct reload_waiter *done = w->running;
    w->running = NULL;
    w->loading = 0;
    w->pending--;
    if (w->closing) {
        while (done) {
            struct reload_waiter *next = done->next;
            if (done->cb)
                done->cb(done->arg, store_err_disconnected);
            free(done);
            done = next;
        }
        if (w->pending == 0)
            service_free(w);
        return;
    }
    if (err == NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 1) {
        const redisReply *ver = r->element[0];
        snprintf(w->version, sizeof(w->version), "%s", ver->str ? ver->str : "0");
        size_t n = r->elements - 1;
        struct webhook **nv = xcalloc(n + 1, sizeof(*nv));
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const redisReply *row = r->element[i + 1];
            if (row->type != REDIS_REPLY_ARRAY || row->elements < 1 || row->element[0]->str == NULL)
                continue;
            const char *id = row->element[0]->str;
            struct webhook *wh = webhooks_find(w, id);
            if (wh) {
                webhook_ref(wh);
                values_cleanup(wh);
            } else {
                wh = xcalloc(1, sizeof(*wh));
                wh->refs = 1;
                snprintf(wh->id, sizeof(wh->id), "%s", id);
                /* slow start: a new endpoint earns its window (a hostile one never holds
                 * more than a few connections before its timeouts halve it) */
                wh->cwnd = w->c->cfg->endpoint_concurrency < WH_CWND_START
                               ? (double)w->c->cfg->endpoint_concurrency
                               : WH_CWND_START;
            }
            values_from_row(wh, row);
            nv[k++] = wh;
        }
        qsort(nv, k, sizeof(*nv), cmp_id);
        /* drop the old set's references; endpoints not in the new set are deleted */
        for (size_t i = 0; i < w->n; i++) {
            struct webhook *old = w->v[i];
            if (old->refs == 1)
                old->deleted = 1;
            else {
                int found = 0;
                for (size_t j = 0; j < k && !found; j++)
                    found = nv[j] == old;
                old->deleted = !found;
            }
            webhook_unref(old);
        }
        free(w->v);
        w->v = nv;
        w->n = k;
    } else if (err == NULL) {
        err = store_err_server;
    }
    if (err)
        log_warn("webhook endpoints reload failed", "err=%s", err);
    while (done) {
        struct reload_waiter *next = done->next;
        if (done->cb)
            done->cb(done->arg, err);
        free(done);
        done = next;
    }
    if (w->again && !w->closing)
        load_start(w);
}

static void load_start(struct webhooks *w)
{
    char kidx[KEY_MAX], kver[KEY_MAX];
    const char *tag = store_tag(w->c->store);
    key_build(kidx, sizeof(kidx), tag, "whs", NULL, NULL);
    key_build(kver, sizeof(kver), tag, "whv", NULL, NULL);
    const char *argv[] = {kidx, kver, tag};
    w->again = 0;
    w->running = w->waiting;
    w->waiting = NULL;
    w->loading = 1;
    w->pending++;
    if (store_eval(w->c->store, &w->sc_load, on_load, w, 2, 3, argv, NULL) != 0) {
        w->pending--;
        w->loading = 0;
        struct reload_waiter *done = w->running;
        w->running = NULL;
        while (done) {
            struct reload_waiter *next = done->next;
            if (done->cb)
                done->cb(done->arg, store_err_disconnected);
            free(done);
            done = next;
        }
    }
}

void webhooks_reload(struct webhooks *w, webhooks_done_cb *cb, void *arg)
{
    if (cb) {
        struct reload_waiter *rw = xcalloc(1, sizeof(*rw));
        rw->cb = cb;
        rw->arg = arg;
        rw->next = w->waiting;
        w->waiting = rw;
    }
    if (w->closing) {
        if (cb) {
            struct reload_waiter *rw = w->waiting;
            w->waiting = rw->next;
            free(rw);
            cb(arg, store_err_disconnected);
        }
        return;
    }
    if (w->loading) {
        w->again = 1;
        return;
    }
    load_start(w);
}

/* ---- matching -------------------------------------------------------------------------- */

int webhook_matches(const struct webhook *wh, const struct status_event *ev)
{
    return ev->created_at >= wh->created_at && webhook_matches_filters(wh, ev);
}

int webhook_matches_filters(const struct webhook *wh, const struct status_event *ev)
{
    const struct webhook_filters *f = &wh->f;
    if (f->status) {
        size_t i = 0;
        while (i < f->nstatus && strcmp(f->status[i], ev->status ? ev->status : "") != 0)
            i++;
        if (i == f->nstatus)
            return 0;
    }
    if (f->request_ids) {
        size_t i = 0;
        while (i < f->nrequest_ids && strcmp(f->request_ids[i], ev->request_id) != 0)
            i++;
        if (i == f->nrequest_ids)
            return 0;
    }
    if (f->origin) {
        size_t i = 0;
        while (i < f->norigin && f->origin[i] != ev->origin_chain_id)
            i++;
        if (i == f->norigin)
            return 0;
    }
    if (f->dest) {
        size_t i = 0;
        while (i < f->ndest && f->dest[i] != ev->destination_chain_id)
            i++;
        if (i == f->ndest)
            return 0;
    }
    return 1;
}

/* ---- validation ------------------------------------------------------------------------ */

static int fail(const char **code, const char *c, char *err, size_t errn, const char *msg)
{
    *code = c;
    snprintf(err, errn, "%s", msg);
    return -1;
}

int webhook_filters_canon(json_t *filters, char **out_json, const char **code, char *err,
                          size_t errn)
{
    *out_json = NULL;
    if (filters == NULL || json_is_null(filters)) {
        *out_json = xstrdup("{}");
        return 0;
    }
    if (!json_is_object(filters))
        return fail(code, "invalid_request", err, errn, "filters must be an object");
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(filters, k, v)
    {
        int strs = !strcmp(k, "status") || !strcmp(k, "requestIds");
        int nums = !strcmp(k, "originChainIds") || !strcmp(k, "destinationChainIds");
        if (!strs && !nums) {
            json_decref(out);
            snprintf(err, errn, "unknown filter \"%s\"", k);
            *code = "invalid_request";
            return -1;
        }
        if (json_is_null(v))
            continue;
        if (!json_is_array(v) || json_array_size(v) > WH_MAX_FILTER_VALUES) {
            json_decref(out);
            snprintf(err, errn, "filters.%s must be a list of at most %d values", k,
                     WH_MAX_FILTER_VALUES);
            *code = "invalid_request";
            return -1;
        }
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            int ok = strs ? json_is_string(e) && json_string_length(e) > 0 &&
                                json_string_length(e) <= (k[0] == 's' ? PROTO_MAX_STATUS
                                                                       : PROTO_MAX_ID)
                          : json_is_integer(e) && json_integer_value(e) >= 0 &&
                                json_integer_value(e) <= PROTO_MAX_CHAIN_ID;
            if (ok && k[0] == 'r')
                ok = proto_request_id_valid(json_string_value(e), json_string_length(e));
            if (!ok) {
                json_decref(out);
                snprintf(err, errn, "filters.%s[%zu] is not a valid %s", k, i,
                         strs ? "string" : "chain id");
                *code = "invalid_request";
                return -1;
            }
        }
        json_object_set(out, k, v);
    }
    *out_json = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(out);
    if (*out_json == NULL)
        return fail(code, "internal", err, errn, "out of memory");
    return 0;
}

static int is_tchar(int c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static const char *const forbidden_headers[] = {
    "host", "content-length", "content-type", "connection", "keep-alive", "proxy-connection",
    "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization",
    "proxy-authenticate", "expect", "traceparent", "tracestate", "statusrelay-replay"};

int webhook_headers_canon(json_t *headers, char **out_json, const char **code, char *err,
                          size_t errn)
{
    *out_json = NULL;
    if (headers == NULL || json_is_null(headers)) {
        *out_json = xstrdup("{}");
        return 0;
    }
    if (!json_is_object(headers))
        return fail(code, "invalid_request", err, errn, "headers must be an object");
    if (json_object_size(headers) > WH_MAX_HEADERS)
        return fail(code, "invalid_request", err, errn, "too many headers (at most 32)");
    const char *k;
    json_t *v;
    json_object_foreach(headers, k, v)
    {
        size_t n = strlen(k);
        int ok = n > 0 && n <= 256;
        for (size_t i = 0; ok && i < n; i++)
            ok = is_tchar((unsigned char)k[i]);
        if (!ok) {
            snprintf(err, errn, "header name \"%.64s\" is not an HTTP token", k);
            *code = "invalid_request";
            return -1;
        }
        for (size_t i = 0; i < ARRAY_LEN(forbidden_headers); i++)
            if (!strcasecmp(k, forbidden_headers[i]))
                ok = 0;
        if (!strncasecmp(k, "webhook-", 8) || !strncasecmp(k, "x-signature-", 12))
            ok = 0;
        if (!ok) {
            snprintf(err, errn, "header \"%.64s\" cannot be set", k);
            *code = "invalid_request";
            return -1;
        }
        const char *s = json_string_value(v);
        if (s == NULL || json_string_length(v) > 4096 || strpbrk(s, "\r\n") != NULL ||
            strlen(s) != json_string_length(v)) {
            snprintf(err, errn, "header \"%.64s\" needs a string value without CR/LF", k);
            *code = "invalid_request";
            return -1;
        }
    }
    *out_json = json_dumps(headers, JSON_COMPACT | JSON_SORT_KEYS);
    if (*out_json == NULL)
        return fail(code, "internal", err, errn, "out of memory");
    return 0;
}

int webhook_url_check(const char *url, int allow_private, int *needs_dns, char *host,
                      size_t hostn, const char **code, char *err, size_t errn)
{
    struct proto_url pu;
    struct proto_err pe = {0};
    *needs_dns = 0;
    if (proto_url_parse(url, &pu, &pe) != 0) {
        snprintf(err, errn, "url is not a valid http(s) URL (%s: %s)", pe.field, pe.msg);
        *code = "invalid_request";
        return -1;
    }
    snprintf(host, hostn, "%s", pu.host);
    if (allow_private)
        return 0;
    if (pu.family != 0) {
        socklen_t len = pu.family == AF_INET ? sizeof(struct sockaddr_in)
                                             : sizeof(struct sockaddr_in6);
        int why = proto_addr_forbidden((const struct sockaddr *)&pu.addr, len);
        if (why) {
            snprintf(err, errn, "url targets a %s address", proto_addr_reason(why));
            *code = "forbidden_target";
            return -1;
        }
        return 0;
    }
    *needs_dns = 1;
    return 0;
}

struct dns_req {
    webhooks_dns_cb *cb;
    void *arg;
    char host[PROTO_HOST_MAX + 1];
};

static void on_dns(int result, struct evutil_addrinfo *res, void *arg)
{
    struct dns_req *q = arg;
    const char *code = NULL;
    char msg[160] = "";
    for (struct evutil_addrinfo *ai = res; ai && code == NULL; ai = ai->ai_next) {
        int why = proto_addr_forbidden(ai->ai_addr, (socklen_t)ai->ai_addrlen);
        if (why) {
            code = "forbidden_target";
            snprintf(msg, sizeof(msg), "url host %.100s resolves to a %s address", q->host,
                     proto_addr_reason(why));
        }
    }
    if (res)
        evutil_freeaddrinfo(res);
    /* A name that does not resolve now is accepted: every connection is checked anyway. */
    q->cb(q->arg, code, msg);
    free(q);
}

void webhooks_check_host(struct webhooks *w, const char *host, webhooks_dns_cb *cb, void *arg)
{
    struct dns_req *q = xcalloc(1, sizeof(*q));
    q->cb = cb;
    q->arg = arg;
    snprintf(q->host, sizeof(q->host), "%s", host);
    if (w->dns == NULL) {
        w->dns = evdns_base_new(w->c->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                                EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (w->dns == NULL) /* no resolv.conf: hosts file only */
            w->dns = evdns_base_new(w->c->base, 0);
        if (w->dns)
            evdns_base_load_hosts(w->dns, NULL);
    }
    struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    if (w->dns == NULL) {
        cb(arg, NULL, "");
        free(q);
        return;
    }
    evdns_getaddrinfo(w->dns, host, NULL, &hints, on_dns, q); /* may call on_dns now */
}

/* ---- secrets and ids ------------------------------------------------------------------- */

void webhook_secret_new(char *out, size_t outn)
{
    unsigned char rnd[PROTO_SECRET_BYTES];
    os_random(rnd, sizeof(rnd));
    proto_whsec_format(rnd, sizeof(rnd), out, outn);
    OPENSSL_cleanse(rnd, sizeof(rnd));
}

int webhook_seed_new(char *out, size_t outn, char *pub, size_t pubn)
{
    unsigned char seed[PROTO_ED25519_SEED];
    os_random(seed, sizeof(seed));
    int r = proto_whsec_format(seed, sizeof(seed), out, outn) == 0 &&
                    proto_ed25519_public(seed, pub, pubn) == 0
                ? 0
                : -1;
    OPENSSL_cleanse(seed, sizeof(seed));
    return r;
}

int webhook_public_key(const char *secret, char *pub, size_t pubn)
{
    unsigned char seed[PROTO_ED25519_SEED];
    int r = seed_of_secret(secret, seed) == 0 && proto_ed25519_public(seed, pub, pubn) == 0
                ? 0
                : -1;
    OPENSSL_cleanse(seed, sizeof(seed));
    return r;
}

void webhook_id_new(char *out, size_t outn)
{
    unsigned char rnd[12];
    os_random(rnd, sizeof(rnd));
    char hex[25];
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
    snprintf(out, outn, "wh_%s", hex);
}

/* ---- CRUD ------------------------------------------------------------------------------ */

struct put_op {
    struct webhooks *w;
    webhooks_put_cb *cb;
    void *arg;
    int found;
};

static void on_put_reloaded(void *arg, const char *err)
{
    struct put_op *op = arg;
    op->cb(op->arg, NULL, op->found);
    free(op);
}

static void on_put(void *arg, const char *err, redisReply *r)
{
    struct put_op *op = arg;
    struct webhooks *w = op->w;
    w->pending--;
    if (w->closing) {
        op->cb(op->arg, store_err_disconnected, 0);
        free(op);
        if (w->pending == 0)
            service_free(w);
        return;
    }
    if (err != NULL || r->type != REDIS_REPLY_INTEGER) {
        op->cb(op->arg, err ? err : store_err_server, 0);
        free(op);
        return;
    }
    op->found = r->integer != 0;
    if (!op->found) {
        op->cb(op->arg, NULL, 0);
        free(op);
        return;
    }
    webhooks_reload(op->w, on_put_reloaded, op);
}

int webhooks_put(struct webhooks *w, const char *id, int create, const char *const *fields,
                 int nfields, webhooks_put_cb *cb, void *arg)
{
    const char *tag = store_tag(w->c->store);
    char kwh[KEY_MAX], kidx[KEY_MAX], kver[KEY_MAX], now[24];
    key_build(kwh, sizeof(kwh), tag, "wh", id, NULL);
    key_build(kidx, sizeof(kidx), tag, "whs", NULL, NULL);
    key_build(kver, sizeof(kver), tag, "whv", NULL, NULL);
    snprintf(now, sizeof(now), "%lld", (long long)wall_ms());
    int argc = 6 + 2 * nfields;
    const char **argv = xcalloc((size_t)argc, sizeof(char *));
    size_t *lens = xcalloc((size_t)argc, sizeof(size_t));
    argv[0] = kwh, argv[1] = kidx, argv[2] = kver, argv[3] = id;
    argv[4] = create ? "create" : "update", argv[5] = now;
    for (int i = 0; i < 2 * nfields; i++)
        argv[6 + i] = fields[i] ? fields[i] : "\0del";
    for (int i = 0; i < argc; i++)
        lens[i] = argv[i][0] == '\0' && i >= 6 && fields[i - 6] == NULL ? 4 : strlen(argv[i]);
    struct put_op *op = xcalloc(1, sizeof(*op));
    op->w = w, op->cb = cb, op->arg = arg;
    w->pending++;
    int r = store_eval(w->c->store, &w->sc_put, on_put, op, 3, argc, argv, lens);
    free(argv);
    free(lens);
    if (r != 0) {
        w->pending--;
        free(op);
    }
    return r;
}

int webhooks_delete(struct webhooks *w, const char *id, webhooks_put_cb *cb, void *arg)
{
    const char *tag = store_tag(w->c->store);
    char k[7][KEY_MAX];
    key_build(k[0], KEY_MAX, tag, "wh", id, NULL);
    key_build(k[1], KEY_MAX, tag, "whs", NULL, NULL);
    key_build(k[2], KEY_MAX, tag, "whv", NULL, NULL);
    key_build(k[3], KEY_MAX, tag, "due", NULL, NULL);
    key_build(k[4], KEY_MAX, tag, "inflight", NULL, NULL);
    key_build(k[5], KEY_MAX, tag, "dead", NULL, NULL);
    key_build(k[6], KEY_MAX, tag, "skipped", NULL, NULL);
    const char *argv[] = {k[0], k[1], k[2], k[3], k[4], k[5], k[6], tag, id};
    struct put_op *op = xcalloc(1, sizeof(*op));
    op->w = w, op->cb = cb, op->arg = arg;
    w->pending++;
    if (store_eval(w->c->store, &w->sc_del, on_put, op, 7, 9, argv, NULL) != 0) {
        w->pending--;
        free(op);
        return -1;
    }
    return 0;
}

const struct store_script *webhooks_script(struct webhooks *w, enum wh_script which)
{
    return &w->sc[which];
}

/* ---- JSON ------------------------------------------------------------------------------ */

static const char *scheme_name(enum wh_scheme s)
{
    return s == WH_SCHEME_UPSTREAM ? "upstream" : s == WH_SCHEME_BOTH ? "both" : "standard";
}

json_t *webhook_to_json(const struct webhook *wh)
{
    json_t *o = json_object();
    json_t *filters = json_loads(wh->filters_json, 0, NULL);
    json_t *headers = json_loads(wh->headers_json, 0, NULL);
    json_object_set_new(o, "id", json_string(wh->id));
    json_object_set_new(o, "url", json_string(wh->url));
    json_object_set_new(o, "filters", filters ? filters : json_object());
    json_object_set_new(o, "headers", headers ? headers : json_object());
    json_object_set_new(o, "enabled", json_boolean(wh->enabled));
    json_object_set_new(o, "signatureScheme", json_string(scheme_name(wh->scheme)));
    json_object_set_new(o, "signing", json_string(wh->ed25519 ? "ed25519" : "hmac-sha256"));
    json_object_set_new(o, "mode", json_string(wh->latest ? "latest" : "all"));
    json_object_set_new(o, "description", json_string(wh->description));
    json_object_set_new(o, "createdAt", json_integer(wh->created_at));
    if (wh->ed25519)
        json_object_set_new(o, "publicKey", json_string(wh->public_key));
    if (!wh->enabled && wh->disabled_reason) {
        json_object_set_new(o, "disabledReason", json_string(wh->disabled_reason));
        json_object_set_new(o, "disabledAt", json_integer(wh->disabled_at));
    }
    json_object_set_new(o, "failingSince",
                        wh->fail_since ? json_integer(wh->fail_since) : json_null());
    if (wh->prev_secret && wh->prev_expires > wall_ms())
        json_object_set_new(o, "previousSecretExpiresAt", json_integer(wh->prev_expires));
    return o;
}

/* ---- service --------------------------------------------------------------------------- */

static void on_store_state(void *arg, int up)
{
    struct webhooks *w = arg;
    if (up)
        webhooks_reload(w, NULL, NULL);
}

struct webhooks *webhooks_new(struct core *c)
{
    struct webhooks *w = xcalloc(1, sizeof(*w));
    w->c = c;
    snprintf(w->version, sizeof(w->version), "-");
    store_script_init(&w->sc_put, "wh_put");
    store_script_init(&w->sc_del, "wh_del");
    store_script_init(&w->sc_load, "wh_load");
    store_script_init(&w->sc[WH_SC_LIST], "wh_list");
    store_script_init(&w->sc[WH_SC_REQUEUE], "wh_requeue");
    store_script_init(&w->sc[WH_SC_FANOUT], "wh_fanout");
    store_script_init(&w->sc[WH_SC_EVENTS_BY_REQUEST], "events_by_request");
    c->webhooks = w;
    store_on_state(c->store, on_store_state, w);
    if (store_ready(c->store))
        webhooks_reload(w, NULL, NULL);
    return w;
}

static void service_free(struct webhooks *w)
{
    free(w);
}

void webhooks_detach(struct webhooks *w)
{
    if (w == NULL)
        return;
    w->closing = 1;
    if (w->c->webhooks == w)
        w->c->webhooks = NULL;
}

void webhooks_close(struct webhooks *w)
{
    if (w == NULL)
        return;
    webhooks_detach(w);
    if (w->dns)
        evdns_base_free(w->dns, 1); /* pending look-ups complete (cancelled) now */
    w->dns = NULL;
    for (size_t i = 0; i < w->n; i++) {
        w->v[i]->deleted = 1;
        webhook_unref(w->v[i]);
    }
    free(w->v);
    w->v = NULL;
    w->n = 0;
    for (struct reload_waiter *l = w->waiting, *n; l; l = n) {
        n = l->next;
        if (l->cb)
            l->cb(l->arg, store_err_disconnected);
        free(l);
    }
    w->waiting = NULL;
    if (w->pending == 0)
        service_free(w); /* else the last store callback frees it */
}

/* ---- metrics --------------------------------------------------------------------------- */

