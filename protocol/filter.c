/* filter.c - see filter.h. runs on: any thread (pure). */
#include "protocol/filter.h"
#include "protocol/event.h"
#include "protocol/proto.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The keys, in the canonical order (and the fixed order of PROTO_FILTER_KEYS_FIRST). */
enum {
    K_STATUS, K_REQUEST_IDS, K_ORIGIN, K_DEST, K_EVENTS,
    K_USERS, K_REFERRERS, K_FAIL_REASONS, K_REFUND_REASONS, K_FLAGS, K_METADATA,
    K_N, K_ID = -2, K_UNKNOWN = -1
};
static const char *const key_names[K_N] = {"status", "requestIds", "originChainIds",
                                           "destinationChainIds", "events",
                                           "users", "referrers", "failReasons",
                                           "refundFailReasons", "flags", "metadata"};

/* ---- the keys users .. metadata: lists of strings (users .. flags) and an object ---------- */

/* The list of the string key kind (users .. flags) of f and its count; NULL for other keys. */
static char ***new_list(struct proto_filter *f, int kind, size_t **n)
{
    switch (kind) {
    case K_USERS: *n = &f->nusers; return &f->users;
    case K_REFERRERS: *n = &f->nreferrers; return &f->referrers;
    case K_FAIL_REASONS: *n = &f->nfail_reasons; return &f->fail_reasons;
    case K_REFUND_REASONS: *n = &f->nrefund_fail_reasons; return &f->refund_fail_reasons;
    case K_FLAGS: *n = &f->nflags; return &f->flags;
    default: return NULL;
    }
}

/* The same for reading: 1 with *v (NULL when absent) and *n for users .. flags, else 0. */
static int new_get(const struct proto_filter *f, int kind, char *const **v, size_t *n)
{
    size_t *np;
    char ***p = new_list((struct proto_filter *)f, kind, &np); /* only read through */
    if (p == NULL)
        return 0;
    *v = *p;
    *n = *np;
    return 1;
}

static void new_keys_cleanup(struct proto_filter *f)
{
    for (int kind = K_USERS; kind <= K_FLAGS; kind++) {
        size_t *n;
        char ***v = new_list(f, kind, &n);
        for (size_t i = 0; i < *n; i++)
            free((*v)[i]);
        free(*v);
    }
    json_decref(f->metadata);
}

/* Flag names "flags" accepts beyond proto_flag_name's: "facts" (a follow-up event carrying
 * request facts) and "reorg" (an event carrying statusrelay.reorg). */
static const char *const extra_flags[] = {"facts", "reorg"};

int proto_filter_flag_known(const char *name)
{
    for (unsigned bit = 1; bit & PROTO_F_MASK; bit <<= 1) {
        const char *n = proto_flag_name(bit);
        if (n != NULL && strcmp(n, name) == 0)
            return 1;
    }
    for (size_t i = 0; i < sizeof(extra_flags) / sizeof(extra_flags[0]); i++)
        if (strcmp(extra_flags[i], name) == 0)
            return 1;
    return 0;
}

const char *proto_filter_flag_names(void)
{
    return "reversal, facts, reorg, unconfirmedDeposit, unknownStatus, unknownFailReason, "
           "unknownRefundFailReason, detailsTruncated";
}

/* 1 when every byte of s[0..n) is printable ASCII without space (0x21..0x7e). */
static int printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

/* 1 when s[0..n) holds no control character (C0 or DEL; UTF-8 beyond ASCII is fine). */
static int no_controls(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f)
            return 0;
    return 1;
}

/* 1 when e is a valid value of the string key kind (users .. flags). */
static int new_str_ok(int kind, const json_t *e)
{
    if (!json_is_string(e))
        return 0;
    const char *s = json_string_value(e);
    size_t n = json_string_length(e);
    switch (kind) {
    case K_USERS: return n > 0 && n <= PROTO_FILTER_MAX_WALLET && printable(s, n);
    case K_REFERRERS:
        return n > 0 && n <= PROTO_FILTER_MAX_REFERRER && strlen(s) == n && no_controls(s, n);
    case K_FAIL_REASONS:
    case K_REFUND_REASONS: return n > 0 && n <= PROTO_FILTER_MAX_REASON && printable(s, n);
    default: return strlen(s) == n && proto_filter_flag_known(s);
    }
}

void proto_filter_cleanup(struct proto_filter *f)
{
    if (f == NULL)
        return;
    new_keys_cleanup(f);
    for (size_t i = 0; i < f->nstatus; i++)
        free(f->status[i]);
    for (size_t i = 0; i < f->nrequest_ids; i++)
        free(f->request_ids[i]);
    for (size_t i = 0; i < f->nevents; i++)
        free(f->events[i]);
    free(f->events);
    free(f->status);
    free(f->request_ids);
    free(f->origin);
    free(f->dest);
    memset(f, 0, sizeof(*f));
}

static int key_of(const char *k, unsigned flags)
{
    for (int i = 0; i < K_N; i++)
        if (strcmp(k, key_names[i]) == 0)
            return (i == K_REQUEST_IDS && !(flags & PROTO_FILTER_REQUEST_IDS)) ||
                           (i == K_EVENTS && !(flags & PROTO_FILTER_EVENTS))
                       ? K_UNKNOWN
                       : i;
    return (flags & PROTO_FILTER_ID_KEY) && strcmp(k, "id") == 0 ? K_ID : K_UNKNOWN;
}

static int reject(struct proto_filter_err *err, int code, enum proto_filter_fault fault,
                  const char *key, size_t index)
{
    if (err != NULL) {
        err->fault = fault;
        err->key = key;
        err->index = index;
        err->member = NULL;
    }
    return code;
}

static int value_ok(int kind, const json_t *e, const struct proto_filter_opts *o)
{
    if (kind >= K_USERS && kind <= K_FLAGS)
        return new_str_ok(kind, e);
    switch (kind) {
    case K_STATUS:
        return json_is_string(e) && json_string_length(e) > 0 &&
               json_string_length(e) <= o->max_status;
    case K_REQUEST_IDS:
        return json_is_string(e) &&
               proto_request_id_valid(json_string_value(e), json_string_length(e));
    case K_EVENTS:
        return json_is_string(e) && proto_event_type_parse(json_string_value(e)) >= 0;
    default:
        return json_is_integer(e) && json_integer_value(e) >= o->min_chain_id &&
               json_integer_value(e) <= o->max_chain_id;
    }
}

/* Entry i of a list, or the single value standing for a one-element list. */
static const json_t *entry(const json_t *v, size_t i)
{
    return json_is_array(v) ? json_array_get(v, i) : v;
}

static int copy_strs(const json_t *v, size_t n, char ***out, size_t *nout)
{
    if ((*out = calloc(n + 1, sizeof(char *))) == NULL)
        return PROTO_ENOMEM;
    for (; *nout < n; (*nout)++)
        if (((*out)[*nout] = strdup(json_string_value(entry(v, *nout)))) == NULL)
            return PROTO_ENOMEM; /* the caller's cleanup frees what was copied */
    return 0;
}

static int copy_ints(const json_t *v, size_t n, int64_t **out, size_t *nout)
{
    if ((*out = calloc(n + 1, sizeof(int64_t))) == NULL)
        return PROTO_ENOMEM;
    for (; *nout < n; (*nout)++)
        (*out)[*nout] = json_integer_value(entry(v, *nout));
    return 0;
}

/* Read the value v of key kind into f: shape, count, every entry, then copy. */
static int take_list(int kind, const char *key, const json_t *v,
                     const struct proto_filter_opts *o, struct proto_filter *f,
                     struct proto_filter_err *err)
{
    int one_ok = (o->flags & PROTO_FILTER_ONE_VALUE) != 0;
    int strs = kind == K_STATUS || kind == K_REQUEST_IDS || kind == K_EVENTS;
    size_t n;
    if (json_is_null(v) && !one_ok)
        return 0; /* null: as if the key were absent */
    strs = strs || (kind >= K_USERS && kind <= K_FLAGS);
    if (one_ok && (strs ? json_is_string(v) : json_is_integer(v)))
        n = 1;
    else if (!json_is_array(v) || (one_ok && json_array_size(v) == 0))
        return reject(err, PROTO_ETYPE, PROTO_FILTER_NOT_LIST, key, 0);
    else
        n = json_array_size(v);
    if (n > o->max_values)
        return reject(err, PROTO_ETOOLONG, PROTO_FILTER_TOO_MANY, key, 0);
    for (size_t i = 0; i < n; i++)
        if (!value_ok(kind, entry(v, i), o))
            return reject(err, PROTO_EVALUE, PROTO_FILTER_BAD_VALUE, key, i);
    size_t *nn;
    char ***nv = new_list(f, kind, &nn);
    if (nv != NULL)
        return copy_strs(v, n, nv, nn);
    switch (kind) {
    case K_STATUS:
        return copy_strs(v, n, &f->status, &f->nstatus);
    case K_REQUEST_IDS:
        return copy_strs(v, n, &f->request_ids, &f->nrequest_ids);
    case K_ORIGIN:
        return copy_ints(v, n, &f->origin, &f->norigin);
    case K_EVENTS:
        return copy_strs(v, n, &f->events, &f->nevents);
    default:
        return copy_ints(v, n, &f->dest, &f->ndest);
    }
}

/* Read "metadata": an object of 1..PROTO_FILTER_MAX_META_KEYS members, each a string, number
 * or boolean, at most PROTO_FILTER_MAX_META bytes as compact JSON; null as for lists. */
static int take_metadata(const char *key, const json_t *v, const struct proto_filter_opts *o,
                         struct proto_filter *f, struct proto_filter_err *err)
{
    if (json_is_null(v) && !(o->flags & PROTO_FILTER_ONE_VALUE))
        return 0;
    if (!json_is_object(v) || json_object_size(v) == 0)
        return reject(err, PROTO_ETYPE, PROTO_FILTER_NOT_LIST, key, 0);
    if (json_object_size(v) > PROTO_FILTER_MAX_META_KEYS ||
        json_dumpb(v, NULL, 0, JSON_COMPACT) > PROTO_FILTER_MAX_META)
        return reject(err, PROTO_ETOOLONG, PROTO_FILTER_TOO_MANY, key, 0);
    const char *k;
    json_t *m;
    size_t i = 0;
    json_object_foreach((json_t *)v, k, m)
    {
        if (!json_is_string(m) && !json_is_number(m) && !json_is_boolean(m)) {
            int rc = reject(err, PROTO_EVALUE, PROTO_FILTER_BAD_VALUE, key, i);
            if (err != NULL)
                err->member = k;
            return rc;
        }
        i++;
    }
    return (f->metadata = json_deep_copy(v)) != NULL ? 0 : PROTO_ENOMEM;
}

/* The value v of key kind into f: "metadata" or a list. */
static int take(int kind, const char *key, const json_t *v, const struct proto_filter_opts *o,
                struct proto_filter *f, struct proto_filter_err *err)
{
    return kind == K_METADATA ? take_metadata(key, v, o, f, err)
                              : take_list(kind, key, v, o, f, err);
}

static int read_lists(const json_t *filters, const struct proto_filter_opts *o,
                      struct proto_filter *out, struct proto_filter_err *err)
{
    const char *k;
    json_t *v;
    int rc;
    if (o->flags & PROTO_FILTER_KEYS_FIRST) {
        json_object_foreach((json_t *)filters, k, v)
        {
            if (key_of(k, o->flags) == K_UNKNOWN)
                return reject(err, PROTO_EVALUE, PROTO_FILTER_UNKNOWN_KEY, k, 0);
        }
        for (int kind = 0; kind < K_N; kind++)
            if ((v = json_object_get(filters, key_names[kind])) != NULL &&
                (rc = take(kind, key_names[kind], v, o, out, err)) != 0)
                return rc;
        return 0;
    }
    json_object_foreach((json_t *)filters, k, v)
    {
        int kind = key_of(k, o->flags);
        if (kind == K_UNKNOWN)
            return reject(err, PROTO_EVALUE, PROTO_FILTER_UNKNOWN_KEY, k, 0);
        if (kind != K_ID && (rc = take(kind, key_names[kind], v, o, out, err)) != 0)
            return rc;
    }
    return 0;
}

int proto_filter_from_json(const json_t *filters, const struct proto_filter_opts *o,
                           struct proto_filter *out, struct proto_filter_err *err)
{
    memset(out, 0, sizeof(*out));
    if (filters == NULL || json_is_null(filters))
        return 0;
    if (!json_is_object(filters))
        return reject(err, PROTO_ETYPE, PROTO_FILTER_NOT_OBJECT, NULL, 0);
    int rc = read_lists(filters, o, out, err);
    if (rc != 0)
        proto_filter_cleanup(out);
    return rc;
}

/* ---- writer ------------------------------------------------------------------------------ */

static json_t *str_array(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++)
        if (json_array_append_new(a, json_string(v[i])) != 0) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

static json_t *int_array(const int64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < n; i++)
        if (json_array_append_new(a, json_integer(v[i])) != 0) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

/* users .. metadata into o (after the other keys: the canonical order). 0 or -1. */
static int new_keys_to_json(const struct proto_filter *f, json_t *o)
{
    for (int kind = K_USERS; kind <= K_METADATA; kind++) {
        char *const *sv = NULL;
        size_t n;
        json_t *v;
        if (new_get(f, kind, &sv, &n))
            v = sv != NULL ? str_array(sv, n) : NULL;
        else
            v = f->metadata != NULL ? json_deep_copy(f->metadata) : NULL;
        if ((kind == K_METADATA ? f->metadata != NULL : sv != NULL) &&
            json_object_set_new(o, key_names[kind], v) != 0) /* steals v, NULL included */
            return -1;
    }
    return 0;
}

json_t *proto_filter_to_json(const struct proto_filter *f)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    /* json_object_set_new steals the value even when it fails (NULL included) */
    if ((f->status && json_object_set_new(o, key_names[K_STATUS],
                                          str_array(f->status, f->nstatus)) != 0) ||
        (f->request_ids && json_object_set_new(o, key_names[K_REQUEST_IDS],
                                               str_array(f->request_ids, f->nrequest_ids)) != 0) ||
        (f->origin && json_object_set_new(o, key_names[K_ORIGIN],
                                          int_array(f->origin, f->norigin)) != 0) ||
        (f->dest &&
         json_object_set_new(o, key_names[K_DEST], int_array(f->dest, f->ndest)) != 0) ||
        (f->events &&
         json_object_set_new(o, key_names[K_EVENTS], str_array(f->events, f->nevents)) != 0)) {
        json_decref(o);
        return NULL;
    }
    if (new_keys_to_json(f, o) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- matching ---------------------------------------------------------------------------- */

static int has_str(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return 1;
    return 0;
}

static int has_int(const int64_t *v, size_t n, int64_t x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* 1 when some entry of v[0..n) is one of s[0..ns). */
static int has_any(char *const *v, size_t n, const char *const *s, size_t ns)
{
    for (size_t i = 0; i < ns; i++)
        if (s[i] != NULL && has_str(v, n, s[i]))
            return 1;
    return 0;
}

static int is_0x(const char *s)
{
    return s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

/* Wallets: two 0x addresses in any case are one; anything else compares exactly. */
static int wallet_eq(const char *a, const char *b)
{
    return is_0x(a) && is_0x(b) ? strcasecmp(a + 2, b + 2) == 0 : strcmp(a, b) == 0;
}

static int users_match(const struct proto_filter *f, const struct proto_filter_subject *s)
{
    for (size_t i = 0; i < s->nwallets; i++)
        for (size_t k = 0; s->wallets[i] != NULL && k < f->nusers; k++)
            if (wallet_eq(f->users[k], s->wallets[i]))
                return 1;
    return 0;
}

/* A reason: NULL is "N/A" (none). */
static int reason_match(char *const *v, size_t n, const char *reason)
{
    return has_str(v, n, reason != NULL ? reason : "N/A");
}

/* JSON equality of a filter member and the event's, numbers by value (1 equals 1.0). */
static int meta_value_eq(const json_t *want, const json_t *got)
{
    if (json_is_number(want) && json_is_number(got))
        return json_number_value(want) == json_number_value(got) &&
               (!json_is_integer(want) || !json_is_integer(got) ||
                json_integer_value(want) == json_integer_value(got));
    return json_equal((json_t *)want, (json_t *)got);
}

static int metadata_match(const json_t *want, const json_t *got)
{
    if (!json_is_object(got))
        return 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)want, k, v)
    {
        const json_t *g = json_object_get(got, k);
        if (g == NULL || !meta_value_eq(v, g))
            return 0;
    }
    return 1;
}

/* The keys users .. metadata. */
static int match_new_keys(const struct proto_filter *f, const struct proto_filter_subject *s)
{
    return (f->users == NULL || users_match(f, s)) &&
           (f->referrers == NULL ||
            (s->referrer != NULL && has_str(f->referrers, f->nreferrers, s->referrer))) &&
           (f->fail_reasons == NULL ||
            reason_match(f->fail_reasons, f->nfail_reasons, s->fail_reason)) &&
           (f->refund_fail_reasons == NULL ||
            reason_match(f->refund_fail_reasons, f->nrefund_fail_reasons,
                         s->refund_fail_reason)) &&
           (f->flags == NULL || has_any(f->flags, f->nflags, s->flags, s->nflags)) &&
           (f->metadata == NULL || metadata_match(f->metadata, s->metadata));
}

/* "events": the type must be listed; without the key only request.status.updated passes. */
static int events_match(const struct proto_filter *f, const char *type)
{
    const char *t = type != NULL ? type : PROTO_EVENT_STATUS_UPDATED;
    if (f->events == NULL)
        return strcmp(t, PROTO_EVENT_STATUS_UPDATED) == 0;
    return has_str(f->events, f->nevents, t);
}

/* An event type that concerns no request (endpoint.disabled): the request keys do not apply. */
static int without_request(const char *type)
{
    return type != NULL && proto_event_type_parse(type) == PROTO_EV_ENDPOINT_DISABLED;
}

int proto_filter_match(const struct proto_filter *f, const struct proto_filter_subject *s)
{
    if (!events_match(f, s->type))
        return 0;
    if (without_request(s->type))
        return 1;
    const char *status = s->status, *request_id = s->request_id;
    return (f->status == NULL || has_str(f->status, f->nstatus, status ? status : "")) &&
           (f->request_ids == NULL ||
            has_str(f->request_ids, f->nrequest_ids, request_id ? request_id : "")) &&
           (f->origin == NULL || has_int(f->origin, f->norigin, s->origin)) &&
           (f->dest == NULL || has_int(f->dest, f->ndest, s->dest)) && match_new_keys(f, s);
}

static int same_strs(char *const *a, size_t na, char *const *b, size_t nb)
{
    if ((a == NULL) != (b == NULL) || na != nb)
        return 0;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return 0;
    return 1;
}

static int same_ints(const int64_t *a, size_t na, const int64_t *b, size_t nb)
{
    return (a == NULL) == (b == NULL) && na == nb &&
           (na == 0 || memcmp(a, b, na * sizeof(*a)) == 0);
}

/* users .. metadata of a and b are the same. */
static int new_keys_equal(const struct proto_filter *a, const struct proto_filter *b)
{
    for (int kind = K_USERS; kind <= K_FLAGS; kind++) {
        char *const *va, *const *vb;
        size_t na, nb;
        new_get(a, kind, &va, &na);
        new_get(b, kind, &vb, &nb);
        if (!same_strs(va, na, vb, nb))
            return 0;
    }
    return a->metadata == NULL ? b->metadata == NULL
                               : b->metadata != NULL && json_equal(a->metadata, b->metadata);
}

int proto_filter_equal(const struct proto_filter *a, const struct proto_filter *b)
{
    if (!new_keys_equal(a, b))
        return 0;
    return same_strs(a->status, a->nstatus, b->status, b->nstatus) &&
           same_strs(a->request_ids, a->nrequest_ids, b->request_ids, b->nrequest_ids) &&
           same_ints(a->origin, a->norigin, b->origin, b->norigin) &&
           same_ints(a->dest, a->ndest, b->dest, b->ndest) &&
           same_strs(a->events, a->nevents, b->events, b->nevents);
}

int proto_filter_is_all(const struct proto_filter *f)
{
    if (f->users != NULL || f->referrers != NULL || f->fail_reasons != NULL ||
        f->refund_fail_reasons != NULL || f->flags != NULL || f->metadata != NULL)
        return 0;
    return f->status == NULL && f->request_ids == NULL && f->origin == NULL && f->dest == NULL &&
           f->events == NULL;
}
