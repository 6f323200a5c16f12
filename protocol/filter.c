/* filter.c - see filter.h. runs on: any thread (pure). */
#include "protocol/filter.h"
#include "protocol/event.h"
#include "protocol/proto.h"

#include <stdlib.h>
#include <string.h>

/* The keys, in the canonical order (and the fixed order of PROTO_FILTER_KEYS_FIRST). */
enum { K_STATUS, K_REQUEST_IDS, K_ORIGIN, K_DEST, K_EVENTS, K_N, K_ID = -2, K_UNKNOWN = -1 };
static const char *const key_names[K_N] = {"status", "requestIds", "originChainIds",
                                           "destinationChainIds", "events"};

void proto_filter_cleanup(struct proto_filter *f)
{
    if (f == NULL)
        return;
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
    }
    return code;
}

static int value_ok(int kind, const json_t *e, const struct proto_filter_opts *o)
{
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
                (rc = take_list(kind, key_names[kind], v, o, out, err)) != 0)
                return rc;
        return 0;
    }
    json_object_foreach((json_t *)filters, k, v)
    {
        int kind = key_of(k, o->flags);
        if (kind == K_UNKNOWN)
            return reject(err, PROTO_EVALUE, PROTO_FILTER_UNKNOWN_KEY, k, 0);
        if (kind != K_ID && (rc = take_list(kind, key_names[kind], v, o, out, err)) != 0)
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
    return (f->status == NULL || has_str(f->status, f->nstatus, s->status ? s->status : "")) &&
           (f->request_ids == NULL ||
            has_str(f->request_ids, f->nrequest_ids, s->request_id ? s->request_id : "")) &&
           (f->origin == NULL || has_int(f->origin, f->norigin, s->origin)) &&
           (f->dest == NULL || has_int(f->dest, f->ndest, s->dest));
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

int proto_filter_equal(const struct proto_filter *a, const struct proto_filter *b)
{
    return same_strs(a->status, a->nstatus, b->status, b->nstatus) &&
           same_strs(a->request_ids, a->nrequest_ids, b->request_ids, b->nrequest_ids) &&
           same_ints(a->origin, a->norigin, b->origin, b->norigin) &&
           same_ints(a->dest, a->ndest, b->dest, b->ndest) &&
           same_strs(a->events, a->nevents, b->events, b->nevents);
}

int proto_filter_is_all(const struct proto_filter *f)
{
    return f->status == NULL && f->request_ids == NULL && f->origin == NULL && f->dest == NULL &&
           f->events == NULL;
}
