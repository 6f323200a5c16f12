/* dash_filter.c - see dash_filter.h: the dashboard's filters around protocol/filter.c (the
 * reading rules and words are protocol/dash_msg.c's, shared with the client message parser).
 * runs on: any thread. */
#include "relay/edge/dash_filter.h"
#include "protocol/dash_msg.h"
#include "protocol/event.h"
#include "protocol/proto.h"
#include "relay/common/log.h"

#include <stdlib.h>
#include <string.h>

int dash_broad_from_json(const json_t *filters, struct proto_filter *out, const char **why)
{
    int rc = dash_msg_filter(filters, out, why); /* the rules and words: protocol/dash_msg.c */
    if (rc == DASH_MSG_ENOMEM) {
        log_err("out of memory", "in=dash_broad_from_json");
        abort(); /* relay/ never handles OOM locally (relay/common/util.h) */
    }
    return rc != 0 ? -1 : 0;
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
    struct proto_filter_subject s = {.status = status, .origin = origin, .dest = dest};
    return proto_filter_match(f, &s);
}

int dash_broad_match_type(const struct proto_filter *f, int ev_type, const char *status,
                          int64_t origin, int64_t dest)
{
    struct proto_filter_subject s = {.type = proto_event_type_name(ev_type),
                                     .status = status,
                                     .origin = origin,
                                     .dest = dest};
    return proto_filter_match(f, &s);
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
