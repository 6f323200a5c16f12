/* dash_msg.c - see dash_msg.h: reading and validating one dashboard client message, in the
 * order the core has always answered faults. runs on: any thread (pure). */
#include "protocol/dash_msg.h"
#include "protocol/proto.h"
#include "protocol/stream_vec.h"

#include <stdlib.h>
#include <string.h>

static const struct proto_filter_opts dash_opts = {
    .flags = PROTO_FILTER_ONE_VALUE | PROTO_FILTER_ID_KEY | PROTO_FILTER_KEYS_FIRST |
             PROTO_FILTER_EVENTS,
    .max_values = DASH_MSG_FILTER_MAX_VALUES,
    .max_status = DASH_MSG_FILTER_MAX_STATUS,
    .min_chain_id = 1,
    .max_chain_id = INT64_MAX,
};

/* The dashboard's messages for the keys users .. metadata (static), or NULL for the others. */
static const char *why_new_key(const struct proto_filter_err *e)
{
    static const struct {
        const char *key, *not_list, *bad_value;
    } words[] = {
        {"users", "users is a wallet or a non-empty list of wallets",
         "a wallet is 1 to 256 printable characters without spaces"},
        {"referrers", "referrers is a string or a non-empty list of strings",
         "a referrer is 1 to 256 bytes without control characters"},
        {"failReasons", "failReasons is a reason code or a non-empty list of them",
         "a reason code is 1 to 64 printable characters (\"N/A\" for none)"},
        {"refundFailReasons", "refundFailReasons is a reason code or a non-empty list of them",
         "a reason code is 1 to 64 printable characters (\"N/A\" for none)"},
        {"flags", "flags is a flag name or a non-empty list of them",
         "unknown flag (known: reversal, facts, reorg, unconfirmedDeposit, unknownStatus, "
         "unknownFailReason, unknownRefundFailReason, detailsTruncated)"},
        {"metadata", "metadata is an object of 1 to 16 members",
         "metadata members are strings, numbers or booleans"},
    };
    if (e->key == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strcmp(e->key, words[i].key) != 0)
            continue;
        if (e->fault == PROTO_FILTER_TOO_MANY)
            return strcmp(e->key, "metadata") == 0
                       ? "metadata: at most 16 members and 4096 bytes"
                       : "too many values in one filter (at most 64)";
        return e->fault == PROTO_FILTER_NOT_LIST ? words[i].not_list : words[i].bad_value;
    }
    return NULL;
}

/* The dashboard's message for a filter rejection (static). */
static const char *why_of(const struct proto_filter_err *e)
{
    int st = e->key != NULL && strcmp(e->key, "status") == 0;
    if (e->key != NULL && strcmp(e->key, "events") == 0 && e->fault != PROTO_FILTER_UNKNOWN_KEY)
        return e->fault == PROTO_FILTER_TOO_MANY
                   ? "too many event types in one filter (at most 64)"
                   : "events is an event type or a non-empty list of them (request.status.updated, "
                     "request.watch.ended, request.stuck, endpoint.disabled)";
    const char *w = e->fault != PROTO_FILTER_NOT_OBJECT && e->fault != PROTO_FILTER_UNKNOWN_KEY
                        ? why_new_key(e)
                        : NULL;
    if (w != NULL)
        return w;
    switch (e->fault) {
    case PROTO_FILTER_NOT_OBJECT:
        return "filters must be an object";
    case PROTO_FILTER_UNKNOWN_KEY:
        return "unknown filter key (known: id, status, originChainIds, destinationChainIds, "
               "events, users, referrers, failReasons, refundFailReasons, flags, metadata)";
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

int dash_msg_filter(const json_t *filters, struct proto_filter *out, const char **why)
{
    struct proto_filter_err e;
    int rc = proto_filter_from_json(filters, &dash_opts, out, &e);
    if (rc == PROTO_ENOMEM)
        return DASH_MSG_ENOMEM;
    if (rc != 0) {
        *why = why_of(&e);
        return DASH_MSG_BAD_FILTER;
    }
    return 0;
}

static enum dash_msg_error fault(struct dash_msg *m, enum dash_msg_error e,
                                 enum dash_msg_stage stage, const char *type, const char *code,
                                 const char *message)
{
    m->fault.stage = stage;
    m->fault.type = type;
    m->fault.code = code;
    m->fault.message = message;
    return e;
}

/* filters.id, alone: the id or a fault. */
static enum dash_msg_error want_id(struct dash_msg *m, const json_t *f, enum dash_msg_stage stage,
                                   const char *type)
{
    const json_t *jid = json_object_get(f, "id");
    if (!json_is_string(jid) ||
        !proto_request_id_valid(json_string_value(jid), json_string_length(jid)))
        return fault(m, DASH_MSG_BAD_ID, stage, type, "invalid_request_id",
                     "filters.id must be a request id: 1 to 128 characters of [A-Za-z0-9_:.-]");
    if (json_object_size(f) != 1)
        return fault(m, DASH_MSG_ID_COMBINED, stage, type, "bad_request",
                     "filters.id cannot be combined with other filters");
    m->target = DASH_TARGET_ID;
    m->id = json_string_value(jid);
    return DASH_MSG_OK;
}

/* "event": 0, or NO_EVENT / UNSUPPORTED_EVENT (with its message for this type). */
static enum dash_msg_error read_event(struct dash_msg *m, const char *type, const char *others,
                                      enum dash_msg_stage unsupported_stage)
{
    const json_t *jev = json_object_get(m->root, "event");
    if (!json_is_string(jev))
        return fault(m, DASH_MSG_NO_EVENT, DASH_STAGE_EARLY, type, "bad_request",
                     "event is required (\"" DASH_MSG_EVENT "\")");
    const char *event = json_string_value(jev);
    if (strcmp(event, DASH_MSG_STATS_EVENT) == 0)
        m->event = DASH_EVENT_STATS;
    else if (strcmp(event, DASH_MSG_EVENT) == 0)
        m->event = DASH_EVENT_STATUS;
    else
        return fault(m, DASH_MSG_UNSUPPORTED_EVENT, unsupported_stage, type,
                     "unsupported_event", others);
    return DASH_MSG_OK;
}

static enum dash_msg_error parse_subscribe(struct dash_msg *m, unsigned parts)
{
    static const char type[] = "subscribe";
    const json_t *f = json_object_get(m->root, "filters"),
                 *jtok = json_object_get(m->root, "token"),
                 *jfrom = json_object_get(m->root, "lastEventId"),
                 *jlim = json_object_get(m->root, "snapshotLimit");
    m->limit = DASH_MSG_SNAPSHOT_DEFAULT;
    /* the event and the token first: an unknown event is only reported after the token */
    const json_t *jev = json_object_get(m->root, "event");
    if (!json_is_string(jev))
        return read_event(m, type, NULL, DASH_STAGE_EARLY);
    if (jtok != NULL) {
        m->token_present = 1;
        m->token = json_string_value(jtok);
    }
    enum dash_msg_error e = read_event(m, type,
                                       "events: \"" DASH_MSG_EVENT "\" and \"" DASH_MSG_STATS_EVENT
                                       "\"",
                                       DASH_STAGE_FIELDS);
    if (e != DASH_MSG_OK || m->event == DASH_EVENT_STATS)
        return e;
    if (f != NULL && !json_is_object(f) && !json_is_null(f))
        return fault(m, DASH_MSG_FILTERS_TYPE, DASH_STAGE_FIELDS, type, "bad_request",
                     "filters must be an object");
    if (jfrom != NULL && !json_is_null(jfrom) && parts > 1) {
        /* the vector of one stream id per partition (protocol/stream_vec.h) */
        struct svec_pos v[SVEC_MAX];
        int n = json_is_string(jfrom) && json_string_length(jfrom) < SVEC_TEXT_MAX
                    ? svec_parse(json_string_value(jfrom), v, SVEC_MAX)
                    : -1;
        if (n < 0)
            return fault(m, DASH_MSG_BAD_CURSOR, DASH_STAGE_FIELDS, type, "bad_cursor",
                         "lastEventId must be a statusrelay.streamId such as "
                         "\"1712345678901-0,1712345678890-3\" (one stream id per partition)");
        if ((unsigned)n != parts)
            return fault(m, DASH_MSG_BAD_CURSOR, DASH_STAGE_FIELDS, type, "bad_cursor",
                         "lastEventId is a cursor of another partition count: resume from a "
                         "statusrelay.streamId this deployment sent (one stream id per "
                         "partition, separated by commas)");
        m->from = json_string_value(jfrom);
    } else if (jfrom != NULL && !json_is_null(jfrom)) {
        uint64_t ms, seq;
        if (!json_is_string(jfrom) || json_string_length(jfrom) >= DASH_MSG_SID_MAX ||
            proto_stream_id_parse(json_string_value(jfrom), &ms, &seq) != 0)
            return fault(m, DASH_MSG_BAD_CURSOR, DASH_STAGE_FIELDS, type, "bad_cursor",
                         "lastEventId must be a statusrelay.streamId such as "
                         "\"1712345678901-0\"");
        m->from = json_string_value(jfrom);
    }
    if (jlim != NULL) {
        if (!json_is_integer(jlim) || json_integer_value(jlim) < 0 ||
            json_integer_value(jlim) > DASH_MSG_SNAPSHOT_MAX)
            return fault(m, DASH_MSG_BAD_LIMIT, DASH_STAGE_FIELDS, type, "bad_request",
                         "snapshotLimit is an integer 0..1000");
        m->limit = (int)json_integer_value(jlim);
    }
    if (f != NULL && json_object_get(f, "id") != NULL)
        return want_id(m, f, DASH_STAGE_TARGET, type);
    const char *why = NULL;
    int rc = dash_msg_filter(f, &m->filter, &why);
    if (rc == DASH_MSG_ENOMEM)
        return DASH_MSG_ENOMEM;
    if (rc != 0)
        return fault(m, DASH_MSG_BAD_FILTER, DASH_STAGE_TARGET, type, "bad_request", why);
    m->target = DASH_TARGET_BROAD;
    return DASH_MSG_OK;
}

static enum dash_msg_error parse_unsubscribe(struct dash_msg *m)
{
    static const char type[] = "unsubscribe";
    const json_t *f = json_object_get(m->root, "filters");
    enum dash_msg_error e =
        read_event(m, type, "events: \"" DASH_MSG_EVENT "\"", DASH_STAGE_EARLY);
    if (e != DASH_MSG_OK || m->event == DASH_EVENT_STATS)
        return e;
    if (f != NULL && !json_is_null(f) && json_object_get(f, "id") != NULL)
        return want_id(m, f, DASH_STAGE_EARLY, type);
    if (f == NULL || json_is_null(f) || json_object_size(f) == 0) { /* not an object too */
        m->target = DASH_TARGET_ALL;
        return DASH_MSG_OK;
    }
    const char *why = NULL;
    int rc = dash_msg_filter(f, &m->filter, &why);
    if (rc == DASH_MSG_ENOMEM)
        return DASH_MSG_ENOMEM;
    if (rc != 0)
        return fault(m, DASH_MSG_BAD_FILTER, DASH_STAGE_EARLY, type, "bad_request", why);
    m->target = DASH_TARGET_BROAD;
    return DASH_MSG_OK;
}

static enum dash_msg_error parse_history(struct dash_msg *m)
{
    const json_t *f = json_object_get(m->root, "filters");
    if (!json_is_object(f))
        return fault(m, DASH_MSG_FILTERS_TYPE, DASH_STAGE_EARLY, "history", "bad_request",
                     "filters.id is required");
    return want_id(m, f, DASH_STAGE_EARLY, "history");
}

/* 1 when s[0..n) is a find term: 1..DASH_MSG_Q_MAX bytes of printable ASCII, no space (the
 * values GET /v1/requests?q= takes, store_search_norm). */
static int term_ok(const char *s, size_t n)
{
    if (n == 0 || n > DASH_MSG_Q_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
            return 0;
    return 1;
}

static enum dash_msg_error parse_find(struct dash_msg *m)
{
    const json_t *jq = json_object_get(m->root, "q");
    if (!json_is_string(jq) || !term_ok(json_string_value(jq), json_string_length(jq)))
        return fault(m, DASH_MSG_BAD_QUERY, DASH_STAGE_EARLY, "find", "bad_request",
                     "q is required: a request id, a wallet, a deposit address or a "
                     "transaction hash (1 to 256 printable characters, no spaces)");
    m->q = json_string_value(jq);
    return DASH_MSG_OK;
}

static enum dash_msg_error parse_facts(struct dash_msg *m)
{
    const json_t *f = json_object_get(m->root, "filters");
    if (!json_is_object(f))
        return fault(m, DASH_MSG_FILTERS_TYPE, DASH_STAGE_EARLY, "facts", "bad_request",
                     "filters.id is required");
    return want_id(m, f, DASH_STAGE_EARLY, "facts");
}

enum dash_msg_error dash_msg_parse(const void *data, size_t len, struct dash_msg *m)
{
    return dash_msg_parse_parts(data, len, 1, m);
}

enum dash_msg_error dash_msg_parse_parts(const void *data, size_t len, unsigned parts,
                                         struct dash_msg *m)
{
    memset(m, 0, sizeof(*m));
    json_error_t je;
    m->root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    if (m->root == NULL || !json_is_object(m->root))
        return fault(m, DASH_MSG_BAD_JSON, DASH_STAGE_EARLY, NULL, "bad_json",
                     "messages are JSON objects with a \"type\"");
    const char *type = json_string_value(json_object_get(m->root, "type"));
    if (type == NULL)
        return fault(m, DASH_MSG_NO_TYPE, DASH_STAGE_EARLY, NULL, "bad_request",
                     "\"type\" is required");
    if (strcmp(type, "subscribe") == 0) {
        m->type = DASH_MSG_SUBSCRIBE;
        return parse_subscribe(m, parts);
    }
    if (strcmp(type, "unsubscribe") == 0) {
        m->type = DASH_MSG_UNSUBSCRIBE;
        return parse_unsubscribe(m);
    }
    if (strcmp(type, "history") == 0) {
        m->type = DASH_MSG_HISTORY;
        return parse_history(m);
    }
    if (strcmp(type, "find") == 0) {
        m->type = DASH_MSG_FIND;
        return parse_find(m);
    }
    if (strcmp(type, "facts") == 0) {
        m->type = DASH_MSG_FACTS;
        return parse_facts(m);
    }
    return fault(m, DASH_MSG_UNKNOWN_TYPE, DASH_STAGE_EARLY, NULL, "unknown_type",
                 "types: subscribe, unsubscribe, history, find, facts");
}

void dash_msg_cleanup(struct dash_msg *m)
{
    if (m == NULL)
        return;
    proto_filter_cleanup(&m->filter);
    json_decref(m->root);
    memset(m, 0, sizeof(*m));
}
