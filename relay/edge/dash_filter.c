/* dash_filter.c - see dash_filter.h: the dashboard's reading rules and words around
 * protocol/filter.c. runs on: any thread. */
#include "relay/edge/dash_filter.h"
#include "protocol/proto.h"
#include "relay/common/log.h"

#include <stdlib.h>
#include <string.h>

static const struct proto_filter_opts dash_opts = {
    .flags = PROTO_FILTER_ONE_VALUE | PROTO_FILTER_ID_KEY | PROTO_FILTER_KEYS_FIRST,
    .max_values = DASH_FILTER_MAX_VALUES,
    .max_status = DASH_FILTER_MAX_STATUS,
    .min_chain_id = 1,
    .max_chain_id = INT64_MAX,
};

/* The dashboard's message for a rejection (static). */
static const char *why_of(const struct proto_filter_err *e)
{
    int st = e->key != NULL && strcmp(e->key, "status") == 0;
    switch (e->fault) {
    case PROTO_FILTER_NOT_OBJECT:
        return "filters must be an object";
    case PROTO_FILTER_UNKNOWN_KEY:
        return "unknown filter key (known: id, status, originChainIds, destinationChainIds)";
    case PROTO_FILTER_NOT_LIST:
        return st ? "status is a string or a non-empty list of strings"
                  : "chain id filters are a number or a non-empty list of numbers";
    case PROTO_FILTER_TOO_MANY:
        return st ? "too many statuses in one filter (at most 64)"
                  : "too many chain ids in one filter (at most 64)";
    case PROTO_FILTER_BAD_VALUE:
        break;
    }
    return st ? "a status is a string of 1 to 31 characters" : "chain ids are positive integers";
}

int dash_broad_from_json(const json_t *filters, struct proto_filter *out, const char **why)
{
    struct proto_filter_err e;
    int rc = proto_filter_from_json(filters, &dash_opts, out, &e);
    if (rc == PROTO_ENOMEM) {
        log_err("out of memory", "in=dash_broad_from_json");
        abort(); /* relay/ never handles OOM locally (relay/common/util.h) */
    }
    if (rc != 0) {
        *why = why_of(&e);
        return -1;
    }
    return 0;
}

json_t *dash_broad_to_json(const struct proto_filter *f)
{
    return proto_filter_to_json(f);
}

int dash_broad_parse(const char *text, size_t len, struct proto_filter *out)
{
    const char *why = NULL;
    json_t *j = json_loadb(text, len, 0, NULL);
    memset(out, 0, sizeof(*out));
    int rc = j != NULL ? dash_broad_from_json(j, out, &why) : -1;
    json_decref(j);
    return rc;
}

int dash_broad_match(const struct proto_filter *f, const char *status, int64_t origin,
                     int64_t dest)
{
    return proto_filter_match(f, status, NULL, origin, dest);
}

int dash_broad_equal(const struct proto_filter *a, const struct proto_filter *b)
{
    return proto_filter_equal(a, b);
}

int dash_broad_is_all(const struct proto_filter *f)
{
    return proto_filter_is_all(f);
}

void dash_broad_cleanup(struct proto_filter *f)
{
    proto_filter_cleanup(f);
}
