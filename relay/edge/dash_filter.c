/* dash_filter.c - see dash_filter.h. runs on: any thread. */
#include "relay/edge/dash_filter.h"
#include "relay/common/util.h"

#include <stdlib.h>
#include <string.h>

void dash_broad_cleanup(struct dash_broad *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->nstatus; i++)
        free(f->status[i]);
    free(f->status);
    free(f->origin);
    free(f->dest);
    memset(f, 0, sizeof(*f));
}

static int chain_list(const json_t *v, int64_t **out, size_t *n, const char **why)
{
    if (v == NULL)
        return 0;
    json_t *one = NULL;
    if (json_is_integer(v)) {
        one = json_array();
        json_array_append(one, (json_t *)v);
        v = one;
    }
    int rc = -1;
    if (!json_is_array(v) || json_array_size(v) == 0) {
        *why = "chain id filters are a number or a non-empty list of numbers";
        goto out;
    }
    if (json_array_size(v) > DASH_FILTER_MAX_VALUES) {
        *why = "too many chain ids in one filter (at most 64)";
        goto out;
    }
    *out = xcalloc(json_array_size(v), sizeof(**out));
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x)
    {
        if (!json_is_integer(x) || json_integer_value(x) <= 0) {
            *why = "chain ids are positive integers";
            goto out;
        }
        (*out)[(*n)++] = json_integer_value(x);
    }
    rc = 0;
out:
    json_decref(one);
    return rc;
}

static int status_list(const json_t *v, struct dash_broad *f, const char **why)
{
    if (v == NULL)
        return 0;
    json_t *one = NULL;
    if (json_is_string(v)) {
        one = json_array();
        json_array_append(one, (json_t *)v);
        v = one;
    }
    int rc = -1;
    if (!json_is_array(v) || json_array_size(v) == 0) {
        *why = "status is a string or a non-empty list of strings";
        goto out;
    }
    if (json_array_size(v) > DASH_FILTER_MAX_VALUES) {
        *why = "too many statuses in one filter (at most 64)";
        goto out;
    }
    f->status = xcalloc(json_array_size(v), sizeof(char *));
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x)
    {
        size_t len = json_is_string(x) ? json_string_length(x) : 0;
        if (len == 0 || len > DASH_FILTER_MAX_STATUS) {
            *why = "a status is a string of 1 to 31 characters";
            goto out;
        }
        f->status[f->nstatus++] = xstrdup(json_string_value(x));
    }
    rc = 0;
out:
    json_decref(one);
    return rc;
}

int dash_broad_from_json(const json_t *filters, struct dash_broad *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    if (filters == NULL || json_is_null(filters))
        return 0;
    if (!json_is_object(filters)) {
        *why = "filters must be an object";
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)filters, k, v)
    {
        if (strcmp(k, "status") != 0 && strcmp(k, "originChainIds") != 0 &&
            strcmp(k, "destinationChainIds") != 0 && strcmp(k, "id") != 0) {
            *why = "unknown filter key (known: id, status, originChainIds, "
                   "destinationChainIds)";
            return -1;
        }
    }
    if (status_list(json_object_get(filters, "status"), out, why) != 0 ||
        chain_list(json_object_get(filters, "originChainIds"), &out->origin, &out->norigin,
                   why) != 0 ||
        chain_list(json_object_get(filters, "destinationChainIds"), &out->dest, &out->ndest,
                   why) != 0) {
        dash_broad_cleanup(out);
        return -1;
    }
    return 0;
}

static json_t *ints(const int64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

json_t *dash_broad_to_json(const struct dash_broad *f)
{
    json_t *o = json_object();
    if (f->nstatus > 0) {
        json_t *a = json_array();
        for (size_t i = 0; i < f->nstatus; i++)
            json_array_append_new(a, json_string(f->status[i]));
        json_object_set_new(o, "status", a);
    }
    if (f->norigin > 0)
        json_object_set_new(o, "originChainIds", ints(f->origin, f->norigin));
    if (f->ndest > 0)
        json_object_set_new(o, "destinationChainIds", ints(f->dest, f->ndest));
    return o;
}

int dash_broad_parse(const char *text, size_t len, struct dash_broad *out)
{
    const char *why = NULL;
    json_t *j = json_loadb(text, len, 0, NULL);
    int rc = j != NULL ? dash_broad_from_json(j, out, &why) : -1;
    json_decref(j);
    return rc;
}

int dash_broad_match(const struct dash_broad *f, const char *status, int64_t origin,
                     int64_t dest)
{
    if (f->nstatus > 0) {
        size_t i = 0;
        while (i < f->nstatus && strcmp(f->status[i], status) != 0)
            i++;
        if (i == f->nstatus)
            return 0;
    }
    if (f->norigin > 0) {
        size_t i = 0;
        while (i < f->norigin && f->origin[i] != origin)
            i++;
        if (i == f->norigin)
            return 0;
    }
    if (f->ndest > 0) {
        size_t i = 0;
        while (i < f->ndest && f->dest[i] != dest)
            i++;
        if (i == f->ndest)
            return 0;
    }
    return 1;
}

int dash_broad_equal(const struct dash_broad *a, const struct dash_broad *b)
{
    if (a->nstatus != b->nstatus || a->norigin != b->norigin || a->ndest != b->ndest)
        return 0;
    for (size_t i = 0; i < a->nstatus; i++)
        if (strcmp(a->status[i], b->status[i]) != 0)
            return 0;
    for (size_t i = 0; i < a->norigin; i++)
        if (a->origin[i] != b->origin[i])
            return 0;
    for (size_t i = 0; i < a->ndest; i++)
        if (a->dest[i] != b->dest[i])
            return 0;
    return 1;
}

int dash_broad_is_all(const struct dash_broad *f)
{
    return f->nstatus == 0 && f->norigin == 0 && f->ndest == 0;
}
