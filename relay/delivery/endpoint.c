/* endpoint.c - see endpoint.h. runs on: core thread.
 *
 * Ownership: an endpoint owns its values (strings, parsed filters, header lines, signing
 * keys; secrets are wiped when freed) and the dispatcher's block in dispatch_x. */
#include "relay/delivery/endpoint.h"
#include "protocol/addr.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void cleanse_str(char *s)
{
    OPENSSL_cleanse(s, strlen(s));
}

/* ---- values ---------------------------------------------------------------------------- */

/* The webhook rules of the filter shape (protocol/filter.h): lists only, requestIds known. */
static const struct proto_filter_opts wh_filter_opts = {
    .flags = PROTO_FILTER_REQUEST_IDS | PROTO_FILTER_EVENTS,
    .max_values = WH_MAX_FILTER_VALUES,
    .max_status = PROTO_MAX_STATUS,
    .min_chain_id = 0,
    .max_chain_id = PROTO_MAX_CHAIN_ID,
};

/* ENOMEM from protocol/: relay/ never handles OOM locally (relay/common/util.h). */
static void oom_abort(const char *where)
{
    log_err("out of memory", "in=%s", where);
    abort();
}

/* The values a reload replaces (everything but identity, refs and dispatcher state). */
void webhook_values_clear(struct webhook *wh)
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
    proto_filter_cleanup(&wh->f);
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
    if (wh->stored)
        OPENSSL_cleanse(wh->stored, wh->stored_len);
    free(wh->stored);
    wh->stored = NULL;
    wh->stored_len = 0;
    wh->url = wh->target = wh->description = wh->filters_json = wh->headers_json = NULL;
    wh->header_lines = NULL;
    wh->secret = wh->prev_secret = wh->disabled_reason = NULL;
    wh->hmac = wh->prev_hmac = wh->up_hmac = NULL;
    memset(wh->seed, 0, sizeof(wh->seed));
    memset(wh->prev_seed, 0, sizeof(wh->prev_seed));
}

struct webhook *webhook_new(const char *id)
{
    struct webhook *wh = xcalloc(1, sizeof(*wh));
    wh->refs = 1;
    snprintf(wh->id, sizeof(wh->id), "%s", id);
    return wh;
}

void webhook_ref(struct webhook *wh)
{
    wh->refs++;
}

void webhook_unref(struct webhook *wh)
{
    if (wh == NULL || --wh->refs > 0)
        return;
    webhook_values_clear(wh);
    free(wh->dispatch_x); /* holds no references by now: see endpoint.h */
    free(wh);
}

/* Stored filters text (written by webhook_filters_canon) into f; -1 when unreadable (f is
 * then empty: matches everything). */
static int parse_filters(const char *text, struct proto_filter *f)
{
    memset(f, 0, sizeof(*f));
    if (text == NULL || text[0] == '\0')
        return 0;
    json_t *j = json_loads(text, 0, NULL);
    int rc = j != NULL ? proto_filter_from_json(j, &wh_filter_opts, f, NULL) : PROTO_EJSON;
    json_decref(j);
    if (rc == PROTO_ENOMEM)
        oom_abort("webhook parse_filters");
    return rc != 0 ? -1 : 0;
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

/* kv as one "field\0value\0..." block (pairs with a NULL skipped, as values_set does). */
static void stored_keep(struct webhook *wh, const char *const *kv, size_t nkv)
{
    size_t len = 0;
    for (size_t i = 0; i < nkv; i++)
        if (kv[2 * i] && kv[2 * i + 1])
            len += strlen(kv[2 * i]) + strlen(kv[2 * i + 1]) + 2;
    char *b = xmalloc(len + 1);
    size_t o = 0;
    for (size_t i = 0; i < nkv; i++) {
        if (kv[2 * i] == NULL || kv[2 * i + 1] == NULL)
            continue;
        for (int h = 0; h < 2; h++) {
            size_t l = strlen(kv[2 * i + h]) + 1;
            memcpy(b + o, kv[2 * i + h], l);
            o += l;
        }
    }
    wh->stored = b;
    wh->stored_len = len;
}

int webhook_values_same(const struct webhook *wh, const char *const *kv, size_t nkv)
{
    if (wh->stored == NULL)
        return 0;
    size_t o = 0;
    for (size_t i = 0; i < nkv; i++) {
        if (kv[2 * i] == NULL || kv[2 * i + 1] == NULL)
            continue;
        for (int h = 0; h < 2; h++) {
            size_t l = strlen(kv[2 * i + h]) + 1;
            if (l > wh->stored_len - o || memcmp(wh->stored + o, kv[2 * i + h], l) != 0)
                return 0;
            o += l;
        }
    }
    return o == wh->stored_len;
}

static int64_t field_i64(const char *s)
{
    return s ? strtoll(s, NULL, 10) : 0;
}

void webhook_values_set(struct webhook *wh, const char *const *kv, size_t nkv)
{
    const char *url = NULL, *filters = NULL, *headers = NULL, *desc = NULL, *enabled = NULL,
               *scheme = NULL, *signing = NULL, *mode = NULL, *secret = NULL, *prev = NULL,
               *prev_exp = NULL, *created = NULL, *fail_since = NULL, *dis_reason = NULL,
               *dis_at = NULL, *rate = NULL;
    for (size_t i = 0; i < nkv; i++) {
        const char *k = kv[2 * i], *v = kv[2 * i + 1];
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
        else if (!strcmp(k, "rateLimit"))
            rate = v;
    }
    stored_keep(wh, kv, nkv);
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
    wh->rate_limit = rate ? strtol(rate, NULL, 10) : 0;
    if (wh->rate_limit < 0 || wh->rate_limit > WH_RATE_LIMIT_MAX)
        wh->rate_limit = 0;
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

/* ---- matching -------------------------------------------------------------------------- */

int webhook_matches(const struct webhook *wh, struct event_subject *x)
{
    return x->ev->created_at >= wh->created_at && webhook_matches_subject(wh, x);
}

void subject_from_event(const struct status_event *ev, struct event_subject *x)
{
    size_t nf = 0, nw = 0;
    for (unsigned bit = 1; (bit & PROTO_F_MASK) && nf < SUBJECT_MAX_FLAGS - 1; bit <<= 1)
        if ((ev->flags & bit) && proto_flag_name(bit) != NULL)
            x->flags[nf++] = proto_flag_name(bit);
    if (ev->reorg != NULL)
        x->flags[nf++] = "reorg";
    if (ev->deposit != NULL && ev->deposit->depositor != NULL)
        x->wallets[nw++] = ev->deposit->depositor;
    x->ev = ev;
    x->metadata = NULL;
    x->wallets_read = x->metadata_read = 0;
    x->s = (struct proto_filter_subject){
        .type = proto_event_type_name(ev->type),
        .status = ev->status,
        .request_id = ev->type == PROTO_EV_ENDPOINT_DISABLED ? NULL : ev->request_id,
        .origin = ev->origin_chain_id,
        .dest = ev->destination_chain_id,
        .fail_reason = proto_fail_reason_out(ev),
        .refund_fail_reason = ev->refund_fail_reason,
        .flags = x->flags,
        .nflags = nf,
        .wallets = x->wallets,
        .nwallets = nw,
        .referrer = ev->referrer,
        .metadata = NULL,
    };
}

/* The parsed fields f asks for and x has not read yet. */
static void subject_read(struct event_subject *x, const struct proto_filter *f)
{
    const struct status_event *ev = x->ev;
    if (f->users != NULL && !x->wallets_read) {
        x->wallets_read = 1;
        size_t nfw = 0;
        if (ev->facts != NULL && proto_facts_wallets(ev->facts, strlen(ev->facts),
                                                     x->facts_wallets, &nfw, NULL) == 0)
            for (size_t i = 0; i < nfw && x->s.nwallets < SUBJECT_MAX_WALLETS; i++)
                x->wallets[x->s.nwallets++] = x->facts_wallets[i];
    }
    if (f->metadata != NULL && !x->metadata_read) {
        x->metadata_read = 1;
        if (ev->metadata != NULL) /* unreadable: matches no metadata */
            x->s.metadata = x->metadata = json_loads(ev->metadata, 0, NULL);
    }
}

void subject_cleanup(struct event_subject *x)
{
    json_decref(x->metadata);
    x->metadata = NULL;
    x->s.metadata = NULL;
}

int webhook_matches_subject(const struct webhook *wh, struct event_subject *x)
{
    subject_read(x, &wh->f);
    return proto_filter_match(&wh->f, &x->s);
}


/* ---- validation ------------------------------------------------------------------------ */

static int fail(const char **code, const char *c, char *err, size_t errn, const char *msg)
{
    *code = c;
    snprintf(err, errn, "%s", msg);
    return -1;
}

static int key_is(const struct proto_filter_err *e, const char *k)
{
    return e->key != NULL && strcmp(e->key, k) == 0;
}

/* The REST message of a filter rejection: the key, what it takes and its limit. */
static void filter_error(const struct proto_filter_err *e, char *err, size_t errn)
{
    const char *k = e->key;
    switch (e->fault) {
    case PROTO_FILTER_NOT_OBJECT:
        snprintf(err, errn, "filters must be an object");
        return;
    case PROTO_FILTER_UNKNOWN_KEY:
        snprintf(err, errn,
                 "unknown filter \"%.64s\" (known: status, requestIds, originChainIds, "
                 "destinationChainIds, events, users, referrers, failReasons, refundFailReasons, "
                 "flags, metadata)",
                 k);
        return;
    case PROTO_FILTER_NOT_LIST:
        if (key_is(e, "metadata"))
            snprintf(err, errn,
                     "filters.metadata must be an object of 1 to %d members, each a string, "
                     "number or boolean",
                     PROTO_FILTER_MAX_META_KEYS);
        else
            snprintf(err, errn, "filters.%s must be a list of at most %d values", k,
                     WH_MAX_FILTER_VALUES);
        return;
    case PROTO_FILTER_TOO_MANY:
        if (key_is(e, "metadata"))
            snprintf(err, errn, "filters.metadata: at most %d members and %d bytes",
                     PROTO_FILTER_MAX_META_KEYS, PROTO_FILTER_MAX_META);
        else
            snprintf(err, errn, "filters.%s: at most %d values", k, WH_MAX_FILTER_VALUES);
        return;
    case PROTO_FILTER_BAD_VALUE:
        break;
    }
    if (key_is(e, "events"))
        snprintf(err, errn,
                 "filters.events[%zu] is not an event type (request.status.updated, "
                 "request.watch.ended, request.stuck, endpoint.disabled)",
                 e->index);
    else if (key_is(e, "metadata"))
        snprintf(err, errn, "filters.metadata.%.64s must be a string, number or boolean",
                 e->member ? e->member : "");
    else if (key_is(e, "users"))
        snprintf(err, errn,
                 "filters.users[%zu] is not a wallet: 1 to %d printable characters without "
                 "spaces",
                 e->index, PROTO_FILTER_MAX_WALLET);
    else if (key_is(e, "referrers"))
        snprintf(err, errn,
                 "filters.referrers[%zu] is not a referrer: a string of 1 to %d bytes without "
                 "control characters",
                 e->index, PROTO_FILTER_MAX_REFERRER);
    else if (key_is(e, "failReasons") || key_is(e, "refundFailReasons"))
        snprintf(err, errn,
                 "filters.%s[%zu] is not a reason code: 1 to %d printable characters (\"N/A\" "
                 "for none)",
                 k, e->index, PROTO_FILTER_MAX_REASON);
    else if (key_is(e, "flags"))
        snprintf(err, errn, "filters.flags[%zu] is not a known flag (known: %s)", e->index,
                 proto_filter_flag_names());
    else
        snprintf(err, errn, "filters.%s[%zu] is not a valid %s", k, e->index,
                 key_is(e, "status") || key_is(e, "requestIds") ? "string" : "chain id");
}

int webhook_filters_canon(json_t *filters, char **out_json, const char **code, char *err,
                          size_t errn)
{
    struct proto_filter f;
    struct proto_filter_err e;
    *out_json = NULL;
    int rc = proto_filter_from_json(filters, &wh_filter_opts, &f, &e);
    if (rc == PROTO_ENOMEM)
        return fail(code, "internal", err, errn, "out of memory");
    if (rc != 0) {
        *code = "invalid_request";
        filter_error(&e, err, errn);
        return -1;
    }
    json_t *out = proto_filter_to_json(&f);
    proto_filter_cleanup(&f);
    *out_json = out != NULL ? json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
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
        /* names differing only in case are one header to HTTP: which would the receiver see? */
        const char *k2;
        json_t *v2;
        json_object_foreach(headers, k2, v2)
        {
            if (k2 == k)
                break; /* only the names before this one */
            if (strcasecmp(k2, k) == 0) {
                snprintf(err, errn, "headers \"%.64s\" and \"%.64s\" differ only in case", k2,
                         k);
                *code = "invalid_request";
                return -1;
            }
        }
        const char *s = json_string_value(v);
        if (s == NULL) {
            snprintf(err, errn, "header \"%.64s\" needs a string value", k);
            *code = "invalid_request";
            return -1;
        }
        size_t vn = json_string_length(v);
        if (vn > WH_HEADER_VALUE_MAX) {
            snprintf(err, errn, "header \"%.64s\" value is too long (%zu bytes; at most %d)", k,
                     vn, WH_HEADER_VALUE_MAX);
            *code = "invalid_request";
            return -1;
        }
        for (size_t i = 0; i < vn; i++) {
            unsigned char c = (unsigned char)s[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                snprintf(err, errn,
                         "header \"%.64s\" value contains a control character (0x%02x at byte "
                         "%zu): CR, LF, NUL and the others are refused, only tab is allowed",
                         k, c, i);
                *code = "invalid_request";
                return -1;
            }
        }
    }
    *out_json = json_dumps(headers, JSON_COMPACT | JSON_SORT_KEYS);
    if (*out_json == NULL)
        return fail(code, "internal", err, errn, "out of memory");
    return 0;
}

int webhook_rate_limit_check(json_t *v, char *out, size_t outn, const char **code, char *err,
                             size_t errn)
{
    out[0] = '\0';
    if (v == NULL || json_is_null(v))
        return 0;
    double x = json_is_number(v) ? json_number_value(v) : 0;
    if (!json_is_number(v) || !(x >= 1 && x <= WH_RATE_LIMIT_MAX) || x != (double)(long)x) {
        snprintf(err, errn,
                 "rateLimit is null (no limit) or a whole number of deliveries per second, "
                 "1 to %d",
                 WH_RATE_LIMIT_MAX);
        *code = "invalid_request";
        return -1;
    }
    snprintf(out, outn, "%ld", (long)x);
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
    if (proto_host_is_localhost(pu.host)) { /* "a.localhost", "LOCALHOST.": loopback names */
        snprintf(err, errn, "url targets a loopback name");
        *code = "forbidden_target";
        return -1;
    }
    *needs_dns = 1;
    return 0;
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

void webhook_id_new(char *out, size_t outn)
{
    unsigned char rnd[12];
    os_random(rnd, sizeof(rnd));
    char hex[25];
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
    snprintf(out, outn, "wh_%s", hex);
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
    json_object_set_new(o, "rateLimit",
                        wh->rate_limit > 0 ? json_integer(wh->rate_limit) : json_null());
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
