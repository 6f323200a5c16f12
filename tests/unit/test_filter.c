/* test_filter.c - unit tests for protocol/filter.c: the reader under the dashboard's and the
 * webhooks' rules as table rows (accepted input with its canonical JSON, rejected input with
 * its fault, key and element, also which fault wins when an input has several), the matcher
 * as rows (empty filter, OR within a list, AND across keys, present but empty lists, the
 * "events" key: its default of request.status.updated only, types without a request),
 * equality, and allocation failure in the reader.
 * runs on: the test process, one thread. Run from the repository root. */
#include "tests/unit/proto_test.h"

#include "protocol/filter.c"
#include "protocol/proto.c"

#define N_ROWS(a) (sizeof(a) / sizeof((a)[0]))

/* The two callers' rules (relay/edge/dash_filter.c, relay/delivery/endpoint.c), with small
 * limits so the rows stay short. */
static const struct proto_filter_opts D = {
    .flags = PROTO_FILTER_ONE_VALUE | PROTO_FILTER_ID_KEY | PROTO_FILTER_KEYS_FIRST,
    .max_values = 3,
    .max_status = 7,
    .min_chain_id = 1,
    .max_chain_id = INT64_MAX,
};
static const struct proto_filter_opts W = {
    .flags = PROTO_FILTER_REQUEST_IDS | PROTO_FILTER_EVENTS,
    .max_values = 3,
    .max_status = 7,
    .min_chain_id = 0,
    .max_chain_id = PROTO_MAX_CHAIN_ID,
};

/* text NULL: filters NULL. Accepted rows give canon (canonical JSON, compact, key order as
 * written); rejected rows give rc, fault, key and index. */
struct read_row {
    const char *name;
    const struct proto_filter_opts *o;
    const char *text;
    int rc;
    const char *canon;
    enum proto_filter_fault fault;
    const char *key;
    size_t index;
};

#define OK(canon) 0, canon, 0, NULL, 0
#define BAD(...) BAD_(__VA_ARGS__) /* expands the code/fault pairs below first */
#define BAD_(rc, fault, key, index) rc, NULL, fault, key, index
#define NOT_OBJECT PROTO_ETYPE, PROTO_FILTER_NOT_OBJECT
#define UNKNOWN PROTO_EVALUE, PROTO_FILTER_UNKNOWN_KEY
#define NOT_LIST PROTO_ETYPE, PROTO_FILTER_NOT_LIST
#define TOO_MANY PROTO_ETOOLONG, PROTO_FILTER_TOO_MANY
#define BAD_VALUE PROTO_EVALUE, PROTO_FILTER_BAD_VALUE

static const struct read_row read_rows[] = {
    /* both: the empty filter */
    {"D: NULL", &D, NULL, OK("{}")},
    {"W: NULL", &W, NULL, OK("{}")},
    {"D: null", &D, "null", OK("{}")},
    {"W: null", &W, "null", OK("{}")},
    {"D: {}", &D, "{}", OK("{}")},
    {"W: {}", &W, "{}", OK("{}")},
    {"D: not an object", &D, "[]", BAD(NOT_OBJECT, NULL, 0)},
    {"W: not an object", &W, "\"success\"", BAD(NOT_OBJECT, NULL, 0)},
    /* dashboards: one value or a non-empty list, "id" skipped, no requestIds */
    {"D: id is the caller's", &D, "{\"id\":\"0xabc\"}", OK("{}")},
    {"D: one status", &D, "{\"status\":\"success\"}", OK("{\"status\":[\"success\"]}")},
    {"D: one chain id", &D, "{\"originChainIds\":8453}", OK("{\"originChainIds\":[8453]}")},
    {"D: canonical key order", &D,
     "{\"destinationChainIds\":[10,1],\"originChainIds\":1,\"status\":[\"a\",\"b\"]}",
     OK("{\"status\":[\"a\",\"b\"],\"originChainIds\":[1],\"destinationChainIds\":[10,1]}")},
    {"D: max values", &D, "{\"status\":[\"a\",\"b\",\"c\"]}",
     OK("{\"status\":[\"a\",\"b\",\"c\"]}")},
    {"D: max status length", &D, "{\"status\":\"1234567\"}", OK("{\"status\":[\"1234567\"]}")},
    {"D: huge chain id", &D, "{\"originChainIds\":9007199254740993}",
     OK("{\"originChainIds\":[9007199254740993]}")},
    {"D: requestIds unknown", &D, "{\"requestIds\":[\"0xab\"]}",
     BAD(UNKNOWN, "requestIds", 0)},
    {"D: misspelt key", &D, "{\"statuses\":[\"success\"]}", BAD(UNKNOWN, "statuses", 0)},
    {"D: keys first", &D, "{\"status\":5,\"bogus\":1}", BAD(UNKNOWN, "bogus", 0)},
    {"D: fixed order", &D, "{\"destinationChainIds\":0,\"status\":5}",
     BAD(NOT_LIST, "status", 0)},
    {"D: empty list", &D, "{\"status\":[]}", BAD(NOT_LIST, "status", 0)},
    {"D: empty chain list", &D, "{\"originChainIds\":[]}", BAD(NOT_LIST, "originChainIds", 0)},
    {"D: null value", &D, "{\"status\":null}", BAD(NOT_LIST, "status", 0)},
    {"D: object value", &D, "{\"status\":{}}", BAD(NOT_LIST, "status", 0)},
    {"D: real chain id", &D, "{\"destinationChainIds\":1.5}",
     BAD(NOT_LIST, "destinationChainIds", 0)},
    {"D: chain id as text", &D, "{\"originChainIds\":\"x\"}", BAD(NOT_LIST, "originChainIds", 0)},
    {"D: too many", &D, "{\"status\":[\"a\",\"b\",\"c\",\"d\"]}", BAD(TOO_MANY, "status", 0)},
    {"D: empty status", &D, "{\"status\":[\"ok\",\"\"]}", BAD(BAD_VALUE, "status", 1)},
    {"D: status too long", &D, "{\"status\":\"12345678\"}", BAD(BAD_VALUE, "status", 0)},
    {"D: status not a string", &D, "{\"status\":[1]}", BAD(BAD_VALUE, "status", 0)},
    {"D: chain id 0", &D, "{\"originChainIds\":0}", BAD(BAD_VALUE, "originChainIds", 0)},
    {"D: negative chain id", &D, "{\"originChainIds\":[1,-1]}",
     BAD(BAD_VALUE, "originChainIds", 1)},
    {"D: chain id text in a list", &D, "{\"destinationChainIds\":[\"8453\"]}",
     BAD(BAD_VALUE, "destinationChainIds", 0)},
    /* webhooks: lists only, null = absent, [] kept, requestIds known, key by key */
    {"W: null value is absent", &W, "{\"status\":null,\"originChainIds\":[1]}",
     OK("{\"originChainIds\":[1]}")},
    {"W: empty list kept", &W, "{\"status\":[]}", OK("{\"status\":[]}")},
    {"W: every key, canonical order", &W,
     "{\"destinationChainIds\":[2],\"originChainIds\":[1],\"requestIds\":[\"0xab\"],"
     "\"status\":[\"success\"]}",
     OK("{\"status\":[\"success\"],\"requestIds\":[\"0xab\"],\"originChainIds\":[1],"
        "\"destinationChainIds\":[2]}")},
    {"W: chain id bounds", &W, "{\"originChainIds\":[0,9007199254740991]}",
     OK("{\"originChainIds\":[0,9007199254740991]}")},
    {"W: duplicates kept", &W, "{\"status\":[\"a\",\"a\"]}", OK("{\"status\":[\"a\",\"a\"]}")},
    {"W: one value", &W, "{\"status\":\"success\"}", BAD(NOT_LIST, "status", 0)},
    {"W: id unknown", &W, "{\"id\":\"0xab\"}", BAD(UNKNOWN, "id", 0)},
    {"W: key by key, value first", &W, "{\"status\":5,\"bogus\":1}", BAD(NOT_LIST, "status", 0)},
    {"W: key by key, key first", &W, "{\"bogus\":1,\"status\":5}", BAD(UNKNOWN, "bogus", 0)},
    {"W: object order", &W, "{\"destinationChainIds\":[-1],\"status\":5}",
     BAD(BAD_VALUE, "destinationChainIds", 0)},
    {"W: too many", &W, "{\"originChainIds\":[1,2,3,4]}", BAD(TOO_MANY, "originChainIds", 0)},
    {"W: chain id over 2^53-1", &W, "{\"originChainIds\":[9007199254740992]}",
     BAD(BAD_VALUE, "originChainIds", 0)},
    {"W: bad request id", &W, "{\"requestIds\":[\"0xab\",\"bad id\"]}",
     BAD(BAD_VALUE, "requestIds", 1)},
    {"W: empty request id", &W, "{\"requestIds\":[\"\"]}", BAD(BAD_VALUE, "requestIds", 0)},
    {"W: status too long", &W, "{\"status\":[\"12345678\"]}", BAD(BAD_VALUE, "status", 0)},
    /* events: known type names only, after destinationChainIds in the canonical order */
    {"W: events", &W,
     "{\"events\":[\"request.watch.ended\",\"endpoint.disabled\"],\"status\":[\"success\"]}",
     OK("{\"status\":[\"success\"],\"events\":[\"request.watch.ended\",\"endpoint.disabled\"]}")},
    {"W: every event type", &W,
     "{\"events\":[\"request.status.updated\",\"request.watch.ended\",\"request.stuck\"]}",
     OK("{\"events\":[\"request.status.updated\",\"request.watch.ended\",\"request.stuck\"]}")},
    {"W: events empty list kept", &W, "{\"events\":[]}", OK("{\"events\":[]}")},
    {"W: events null is absent", &W, "{\"events\":null}", OK("{}")},
    {"W: unknown event type", &W, "{\"events\":[\"request.stuck\",\"request.updated\"]}",
     BAD(BAD_VALUE, "events", 1)},
    {"W: event type case", &W, "{\"events\":[\"Request.stuck\"]}", BAD(BAD_VALUE, "events", 0)},
    {"W: event type not a string", &W, "{\"events\":[1]}", BAD(BAD_VALUE, "events", 0)},
    {"W: events one value", &W, "{\"events\":\"request.stuck\"}", BAD(NOT_LIST, "events", 0)},
    {"W: too many events", &W, "{\"events\":[\"a\",\"b\",\"c\",\"d\"]}",
     BAD(TOO_MANY, "events", 0)},
    {"D: events unknown without the flag", &D, "{\"events\":[\"request.stuck\"]}",
     BAD(UNKNOWN, "events", 0)},
    /* users, referrers, failReasons, refundFailReasons, flags, metadata */
    {"W: new keys, canonical order", &W,
     "{\"metadata\":{\"order\":\"A-1\",\"n\":2,\"ok\":true},\"flags\":[\"reversal\"],"
     "\"refundFailReasons\":[\"N/A\"],\"failReasons\":[\"SLIPPAGE\"],\"referrers\":[\"shop 1\"],"
     "\"users\":[\"0xAbC\"],\"status\":[\"failure\"]}",
     OK("{\"status\":[\"failure\"],\"users\":[\"0xAbC\"],\"referrers\":[\"shop 1\"],"
        "\"failReasons\":[\"SLIPPAGE\"],\"refundFailReasons\":[\"N/A\"],\"flags\":[\"reversal\"],"
        "\"metadata\":{\"order\":\"A-1\",\"n\":2,\"ok\":true}}")},
    {"W: every flag", &W,
     "{\"flags\":[\"reversal\",\"facts\",\"reorg\"]}",
     OK("{\"flags\":[\"reversal\",\"facts\",\"reorg\"]}")},
    {"W: more flags", &W,
     "{\"flags\":[\"unconfirmedDeposit\",\"unknownStatus\",\"detailsTruncated\"]}",
     OK("{\"flags\":[\"unconfirmedDeposit\",\"unknownStatus\",\"detailsTruncated\"]}")},
    {"W: empty users kept", &W, "{\"users\":[]}", OK("{\"users\":[]}")},
    {"W: null metadata is absent", &W, "{\"metadata\":null}", OK("{}")},
    {"W: metadata real number", &W, "{\"metadata\":{\"x\":1.5}}", OK("{\"metadata\":{\"x\":1.5}}")},
    {"D: one user", &D, "{\"users\":\"0xab\"}", OK("{\"users\":[\"0xab\"]}")},
    {"D: one flag", &D, "{\"flags\":\"reversal\"}", OK("{\"flags\":[\"reversal\"]}")},
    {"D: metadata", &D, "{\"metadata\":{\"k\":\"v\"}}", OK("{\"metadata\":{\"k\":\"v\"}}")},
    {"D: keys first, new keys", &D, "{\"flags\":\"x\",\"bogus\":1}", BAD(UNKNOWN, "bogus", 0)},
    {"D: canonical order, new keys", &D, "{\"metadata\":[],\"users\":1}",
     BAD(NOT_LIST, "users", 0)},
    {"D: empty users", &D, "{\"users\":[]}", BAD(NOT_LIST, "users", 0)},
    {"D: null metadata", &D, "{\"metadata\":null}", BAD(NOT_LIST, "metadata", 0)},
    {"W: users not a list", &W, "{\"users\":\"0xab\"}", BAD(NOT_LIST, "users", 0)},
    {"W: too many users", &W, "{\"users\":[\"a\",\"b\",\"c\",\"d\"]}", BAD(TOO_MANY, "users", 0)},
    {"W: wallet with a space", &W, "{\"users\":[\"0xab\",\"0x a\"]}", BAD(BAD_VALUE, "users", 1)},
    {"W: empty wallet", &W, "{\"users\":[\"\"]}", BAD(BAD_VALUE, "users", 0)},
    {"W: wallet not a string", &W, "{\"users\":[7]}", BAD(BAD_VALUE, "users", 0)},
    {"W: referrer with a newline", &W, "{\"referrers\":[\"a\\nb\"]}",
     BAD(BAD_VALUE, "referrers", 0)},
    {"W: referrer with DEL", &W, "{\"referrers\":[\"a\\u007fb\"]}", BAD(BAD_VALUE, "referrers", 0)},
    {"W: empty reason", &W, "{\"failReasons\":[\"\"]}", BAD(BAD_VALUE, "failReasons", 0)},
    {"W: reason with a space", &W, "{\"refundFailReasons\":[\"A B\"]}",
     BAD(BAD_VALUE, "refundFailReasons", 0)},
    {"W: unknown flag", &W, "{\"flags\":[\"reversal\",\"Reversal\"]}", BAD(BAD_VALUE, "flags", 1)},
    {"W: metadata not an object", &W, "{\"metadata\":[1]}", BAD(NOT_LIST, "metadata", 0)},
    {"W: empty metadata", &W, "{\"metadata\":{}}", BAD(NOT_LIST, "metadata", 0)},
    {"W: nested metadata", &W, "{\"metadata\":{\"a\":1,\"b\":{}}}", BAD(BAD_VALUE, "metadata", 1)},
    {"W: null metadata member", &W, "{\"metadata\":{\"a\":null}}", BAD(BAD_VALUE, "metadata", 0)},
    {"W: 17 metadata members", &W,
     "{\"metadata\":{\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1,"
     "\"j\":1,\"k\":1,\"l\":1,\"m\":1,\"n\":1,\"o\":1,\"p\":1,\"q\":1}}",
     BAD(TOO_MANY, "metadata", 0)},
};

/* filters of a row's text (NULL stays NULL); decref the result. */
static json_t *load(const char *text)
{
    if (text == NULL)
        return NULL;
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (j == NULL)
        fail_msg("test bug: %s: %s", text, je.text);
    return j;
}

static char *canon_of(const struct proto_filter *f)
{
    json_t *o = proto_filter_to_json(f);
    assert_non_null(o);
    char *s = json_dumps(o, JSON_COMPACT); /* jansson's: release with real_free */
    json_decref(o);
    assert_non_null(s);
    return s;
}

static void test_read_rows(void **state)
{
    for (size_t i = 0; i < N_ROWS(read_rows); i++) {
        const struct read_row *r = &read_rows[i];
        json_t *j = load(r->text);
        struct proto_filter f, g;
        struct proto_filter_err e = {0};
        int rc = proto_filter_from_json(j, r->o, &f, &e);
        if (rc != r->rc)
            fail_msg("%s: rc %d, want %d", r->name, rc, r->rc);
        if (rc != 0) {
            assert_true(proto_filter_is_all(&f)); /* out is clean after an error */
            if (e.fault != r->fault || (e.key == NULL) != (r->key == NULL) ||
                (r->key != NULL && strcmp(e.key, r->key) != 0) || e.index != r->index)
                fail_msg("%s: fault %d key %s index %zu", r->name, e.fault,
                         e.key ? e.key : "(null)", e.index);
        } else {
            char *s = canon_of(&f);
            if (strcmp(s, r->canon) != 0)
                fail_msg("%s: canonical %s, want %s", r->name, s, r->canon);
            json_t *back = load(s); /* the canonical text reads back equal */
            assert_int_equal(proto_filter_from_json(back, r->o, &g, NULL), 0);
            assert_true(proto_filter_equal(&f, &g));
            json_decref(back);
            real_free(s);
            proto_filter_cleanup(&g);
        }
        proto_filter_cleanup(&f);
        json_decref(j);
    }
    assert_int_equal(chaos_live, 0);
}

/* ---- matching ---------------------------------------------------------------------------- */

struct match_row {
    const char *filter; /* read with W; NULL: the empty filter */
    const char *status, *request_id;
    int64_t origin, dest;
    int want;
};

#define AND "{\"status\":[\"success\",\"refund\"],\"originChainIds\":[1,8453]," \
            "\"destinationChainIds\":[42161]}"
#define RIDS "{\"requestIds\":[\"0xa\",\"0xb\"]}"

static const struct match_row match_rows[] = {
    {NULL, "waiting", "0xa", 1, 8453, 1},
    {"{}", NULL, NULL, 0, 0, 1},
    {"{\"status\":null}", "pending", "0xa", 1, 2, 1},
    /* OR within a list */
    {AND, "success", "0xa", 1, 42161, 1},
    {AND, "refund", "0xa", 8453, 42161, 1},
    {RIDS, "pending", "0xb", 1, 2, 1},
    {RIDS, "pending", "0xc", 1, 2, 0},
    {RIDS, "pending", NULL, 1, 2, 0},
    /* AND across keys: each list must hold the event's value */
    {AND, "pending", "0xa", 1, 42161, 0},
    {AND, "success", "0xa", 10, 42161, 0},
    {AND, "success", "0xa", 1, 8453, 0},
    {AND, "succes", "0xa", 1, 42161, 0}, /* exact strings only */
    {AND, "Success", "0xa", 1, 42161, 0},
    {AND, NULL, "0xa", 1, 42161, 0},
    {"{\"status\":[\"success\"],\"requestIds\":[\"0xa\"]}", "success", "0xb", 0, 0, 0},
    {"{\"status\":[\"success\"],\"requestIds\":[\"0xa\"]}", "success", "0xa", 0, 0, 1},
    {"{\"originChainIds\":[0]}", "x", "0xa", 0, 5, 1},
    /* a present but empty list matches nothing */
    {"{\"status\":[]}", "success", "0xa", 1, 2, 0},
    {"{\"destinationChainIds\":[]}", "success", "0xa", 1, 0, 0},
};

static void test_match_rows(void **state)
{
    for (size_t i = 0; i < N_ROWS(match_rows); i++) {
        const struct match_row *r = &match_rows[i];
        json_t *j = load(r->filter);
        struct proto_filter f;
        assert_int_equal(proto_filter_from_json(j, &W, &f, NULL), 0);
        struct proto_filter_subject sj = {.status = r->status, .request_id = r->request_id,
                                          .origin = r->origin, .dest = r->dest};
        int got = proto_filter_match(&f, &sj);
        if (got != r->want)
            fail_msg("row %zu: %s / %s %s %lld %lld: %d, want %d", i,
                     r->filter ? r->filter : "NULL", r->status ? r->status : "NULL",
                     r->request_id ? r->request_id : "NULL", (long long)r->origin,
                     (long long)r->dest, got, r->want);
        proto_filter_cleanup(&f);
        json_decref(j);
    }
}

/* users .. metadata: rows of a filter (read with W) against one subject */
struct subj_row {
    const char *filter;
    int want;
};

static void check_subject(const char *what, const struct subj_row *rows, size_t n,
                          const struct proto_filter_subject *sj)
{
    for (size_t i = 0; i < n; i++) {
        json_t *j = load(rows[i].filter);
        struct proto_filter f;
        assert_int_equal(proto_filter_from_json(j, &W, &f, NULL), 0);
        int got = proto_filter_match(&f, sj);
        if (got != rows[i].want)
            fail_msg("%s row %zu: %s: %d, want %d", what, i, rows[i].filter, got, rows[i].want);
        proto_filter_cleanup(&f);
        json_decref(j);
    }
}

/* The events key: a filter without it passes request.status.updated only (type NULL is that
 * type); endpoint.disabled has no request, so the request keys do not apply to it. */
struct type_row {
    const char *filter; /* read with W; NULL: the empty filter */
    const char *type;
    const char *status, *request_id;
    int want;
};

#define EV_WATCH "{\"events\":[\"request.watch.ended\"]}"
#define EV_BOTH "{\"events\":[\"request.status.updated\",\"endpoint.disabled\"]}"
#define EV_SUCCESS                                                                             \
    "{\"status\":[\"success\"],\"requestIds\":[\"0xa\"],"                                       \
    "\"events\":[\"request.watch.ended\",\"endpoint.disabled\"]}"

static const struct type_row type_rows[] = {
    {NULL, NULL, "success", "0xa", 1},
    {NULL, "request.status.updated", "success", "0xa", 1},
    {NULL, "request.watch.ended", "success", "0xa", 0},
    {NULL, "request.stuck", "pending", "0xa", 0},
    {NULL, "endpoint.disabled", NULL, NULL, 0},
    {"{\"status\":[\"success\"]}", "request.watch.ended", "success", "0xa", 0},
    {EV_WATCH, "request.watch.ended", "success", "0xa", 1},
    {EV_WATCH, NULL, "success", "0xa", 0},
    {EV_WATCH, "request.status.updated", "success", "0xa", 0},
    {EV_WATCH, "request.stuck", "pending", "0xa", 0},
    {EV_BOTH, NULL, "pending", "0xa", 1},
    {EV_BOTH, "endpoint.disabled", NULL, NULL, 1},
    {EV_BOTH, "request.watch.ended", "success", "0xa", 0},
    {"{\"events\":[]}", NULL, "success", "0xa", 0},
    {"{\"events\":[]}", "endpoint.disabled", NULL, NULL, 0},
    /* the other keys still apply to request types, not to endpoint.disabled */
    {EV_SUCCESS, "request.watch.ended", "success", "0xa", 1},
    {EV_SUCCESS, "request.watch.ended", "waiting", "0xa", 0},
    {EV_SUCCESS, "request.watch.ended", "success", "0xb", 0},
    {EV_SUCCESS, "endpoint.disabled", NULL, NULL, 1},
    {EV_SUCCESS, NULL, "success", "0xa", 0},
};

static void test_match_types(void **state)
{
    for (size_t i = 0; i < N_ROWS(type_rows); i++) {
        const struct type_row *r = &type_rows[i];
        json_t *j = load(r->filter);
        struct proto_filter f;
        assert_int_equal(proto_filter_from_json(j, &W, &f, NULL), 0);
        struct proto_filter_subject sub = {
            .type = r->type, .status = r->status, .request_id = r->request_id};
        int got = proto_filter_match(&f, &sub);
        if (got != r->want)
            fail_msg("row %zu: %s / %s %s: %d, want %d", i, r->filter ? r->filter : "NULL",
                     r->type ? r->type : "NULL", r->status ? r->status : "NULL", got, r->want);
        proto_filter_cleanup(&f);
        json_decref(j);
    }
}

static void test_match_new_keys(void **state)
{
    static const char *const wallets[] = {"0xAbCdEf", "bc1QxYz", "0x00ff"};
    static const char *const flags[] = {"unknownFailReason", "reversal"};
    json_t *meta = load("{\"order\":\"A-1\",\"n\":3,\"vip\":true,\"nested\":{\"a\":1},"
                        "\"big\":9007199254740993}");
    struct proto_filter_subject sj = {
        .status = "refund", .request_id = "0xa", .origin = 1, .dest = 8453,
        .fail_reason = "SLIPPAGE", .refund_fail_reason = NULL, .flags = flags, .nflags = 2,
        .wallets = wallets, .nwallets = 3, .referrer = "shop-1", .metadata = meta,
    };
    static const struct subj_row rows[] = {
        /* users: any wallet; 0x addresses in any case, others exact */
        {"{\"users\":[\"0xabcdef\"]}", 1},
        {"{\"users\":[\"0XABCDEF\"]}", 1},
        {"{\"users\":[\"nope\",\"0x00FF\"]}", 1},
        {"{\"users\":[\"bc1qxyz\"]}", 0},
        {"{\"users\":[\"bc1QxYz\"]}", 1},
        {"{\"users\":[\"0xabcde\"]}", 0},
        {"{\"users\":[\"abcdef\"]}", 0},
        {"{\"users\":[]}", 0},
        /* referrers: exact */
        {"{\"referrers\":[\"shop-1\"]}", 1},
        {"{\"referrers\":[\"Shop-1\",\"shop\"]}", 0},
        /* reasons: exact; NULL / "N/A" is "N/A" */
        {"{\"failReasons\":[\"SLIPPAGE\"]}", 1},
        {"{\"failReasons\":[\"N/A\",\"UNKNOWN\"]}", 0},
        {"{\"refundFailReasons\":[\"N/A\"]}", 1},
        {"{\"refundFailReasons\":[\"UNKNOWN\"]}", 0},
        /* flags: any of */
        {"{\"flags\":[\"reorg\",\"reversal\"]}", 1},
        {"{\"flags\":[\"facts\"]}", 0},
        /* metadata: every member equal, numbers by value */
        {"{\"metadata\":{\"order\":\"A-1\"}}", 1},
        {"{\"metadata\":{\"order\":\"A-1\",\"n\":3.0,\"vip\":true}}", 1},
        {"{\"metadata\":{\"big\":9007199254740993}}", 1},
        {"{\"metadata\":{\"big\":9007199254740992}}", 0}, /* same double, other integer */
        {"{\"metadata\":{\"order\":\"a-1\"}}", 0},
        {"{\"metadata\":{\"n\":\"3\"}}", 0},
        {"{\"metadata\":{\"vip\":1}}", 0},
        {"{\"metadata\":{\"order\":\"A-1\",\"missing\":1}}", 0},
        {"{\"metadata\":{\"nested\":1}}", 0},
        /* AND across keys, with the old ones */
        {"{\"status\":[\"refund\"],\"users\":[\"0xABCDEF\"],\"referrers\":[\"shop-1\"],"
         "\"failReasons\":[\"SLIPPAGE\"],\"flags\":[\"reversal\"],\"metadata\":{\"n\":3}}", 1},
        {"{\"status\":[\"refund\"],\"users\":[\"0xABCDEF\"],\"referrers\":[\"shop-2\"]}", 0},
        {"{\"originChainIds\":[2],\"flags\":[\"reversal\"]}", 0},
    };
    check_subject("full", rows, N_ROWS(rows), &sj);

    /* an event without wallets, referrer, reasons, flags or metadata */
    struct proto_filter_subject bare = {.status = "pending", .request_id = "0xb"};
    static const struct subj_row bare_rows[] = {
        {"{\"users\":[\"0xabcdef\"]}", 0},
        {"{\"referrers\":[\"shop-1\"]}", 0},
        {"{\"failReasons\":[\"N/A\"],\"refundFailReasons\":[\"N/A\"]}", 1},
        {"{\"failReasons\":[\"SLIPPAGE\"]}", 0},
        {"{\"flags\":[\"reversal\"]}", 0},
        {"{\"metadata\":{\"order\":\"A-1\"}}", 0},
        {"{\"status\":[\"pending\"]}", 1},
    };
    check_subject("bare", bare_rows, N_ROWS(bare_rows), &bare);
    json_decref(meta);
}

/* "metadata": at most PROTO_FILTER_MAX_META bytes as compact JSON ({"v":"..."} is 8 + n) */
static void test_metadata_size(void **state)
{
    for (size_t n = PROTO_FILTER_MAX_META - 8; n <= PROTO_FILTER_MAX_META - 7; n++) {
        char *v = calloc(1, n + 1);
        memset(v, 'x', n);
        json_t *j = json_pack("{s:{s:s}}", "metadata", "v", v);
        struct proto_filter f;
        struct proto_filter_err e = {0};
        int rc = proto_filter_from_json(j, &W, &f, &e);
        if (n == PROTO_FILTER_MAX_META - 8) {
            assert_int_equal(rc, 0);
        } else {
            assert_int_equal(rc, PROTO_ETOOLONG);
            assert_int_equal(e.fault, PROTO_FILTER_TOO_MANY);
            assert_string_equal(e.key, "metadata");
        }
        proto_filter_cleanup(&f);
        json_decref(j);
        free(v);
    }
    /* a bad member is named */
    json_t *j = load("{\"metadata\":{\"ok\":1,\"bad\":[1]}}");
    struct proto_filter f;
    struct proto_filter_err e = {0};
    assert_int_equal(proto_filter_from_json(j, &W, &f, &e), PROTO_EVALUE);
    assert_string_equal(e.member, "bad");
    json_decref(j);
}

/* ---- equality and is_all ----------------------------------------------------------------- */

static void test_equal(void **state)
{
    static const struct {
        const char *a, *b;
        int equal;
    } rows[] = {
        {"{}", "{\"status\":null}", 1},
        {"{\"status\":[\"a\"]}", "{\"status\":[\"a\"]}", 1},
        {"{\"status\":[]}", "{}", 0}, /* present empty list vs absent */
        {"{\"status\":[\"a\",\"b\"]}", "{\"status\":[\"b\",\"a\"]}", 0}, /* order counts */
        {"{\"originChainIds\":[1]}", "{\"destinationChainIds\":[1]}", 0},
        {"{\"originChainIds\":[1]}", "{\"originChainIds\":[1,1]}", 0},
        {"{\"requestIds\":[\"0xa\"]}", "{\"requestIds\":[\"0xb\"]}", 0},
        {"{\"users\":[\"0xa\"]}", "{\"users\":[\"0xa\"]}", 1},
        {"{\"users\":[\"0xa\"]}", "{\"users\":[\"0xA\"]}", 0}, /* as written */
        {"{\"users\":[\"0xa\"]}", "{\"referrers\":[\"0xa\"]}", 0},
        {"{\"flags\":[]}", "{}", 0},
        {"{\"failReasons\":[\"X\"]}", "{\"refundFailReasons\":[\"X\"]}", 0},
        {"{\"metadata\":{\"a\":1,\"b\":\"x\"}}", "{\"metadata\":{\"b\":\"x\",\"a\":1}}", 1},
        {"{\"metadata\":{\"a\":1}}", "{\"metadata\":{\"a\":2}}", 0},
        {"{\"metadata\":{\"a\":1}}", "{}", 0},
        {"{\"events\":[\"request.stuck\"]}", "{\"events\":[\"request.stuck\"]}", 1},
        {"{\"events\":[]}", "{}", 0},
        {"{\"events\":[\"request.stuck\"]}", "{\"events\":[\"endpoint.disabled\"]}", 0},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        json_t *ja = load(rows[i].a), *jb = load(rows[i].b);
        struct proto_filter a, b;
        assert_int_equal(proto_filter_from_json(ja, &W, &a, NULL), 0);
        assert_int_equal(proto_filter_from_json(jb, &W, &b, NULL), 0);
        if (proto_filter_equal(&a, &b) != rows[i].equal ||
            proto_filter_equal(&b, &a) != rows[i].equal)
            fail_msg("row %zu: %s vs %s", i, rows[i].a, rows[i].b);
        proto_filter_cleanup(&a);
        proto_filter_cleanup(&b);
        json_decref(ja);
        json_decref(jb);
    }
    struct proto_filter f;
    json_t *j = load("{\"status\":[]}");
    assert_int_equal(proto_filter_from_json(j, &W, &f, NULL), 0);
    assert_false(proto_filter_is_all(&f)); /* it matches nothing */
    proto_filter_cleanup(&f);
    proto_filter_cleanup(&f); /* cleanup leaves it empty: a second one is harmless */
    assert_true(proto_filter_is_all(&f));
    proto_filter_cleanup(NULL);
    json_decref(j);
}

/* ---- allocation failure ------------------------------------------------------------------ */

/* Fail the 1st, 2nd, ... allocation of reading each accepted row until it succeeds: each run
 * returns PROTO_ENOMEM with an empty filter, or the same filter, and leaks nothing. */
static void test_chaos(void **state)
{
    for (size_t i = 0; i < N_ROWS(read_rows); i++) {
        const struct read_row *r = &read_rows[i];
        if (r->rc != 0)
            continue;
        json_t *j = load(r->text);
        struct proto_filter ref;
        assert_int_equal(proto_filter_from_json(j, r->o, &ref, NULL), 0);
        for (long n = 1;; n++) {
            struct proto_filter f;
            long live = chaos_live;
            chaos_arm(n);
            int rc = proto_filter_from_json(j, r->o, &f, NULL);
            chaos_disarm();
            assert_int_equal(rc != 0, chaos_tripped);
            if (rc != 0) {
                assert_int_equal(rc, PROTO_ENOMEM);
                assert_true(proto_filter_is_all(&f));
            } else {
                assert_true(proto_filter_equal(&f, &ref));
                proto_filter_cleanup(&f);
            }
            assert_int_equal(chaos_live, live);
            if (rc == 0)
                break;
        }
        proto_filter_cleanup(&ref);
        json_decref(j);
    }
    assert_int_equal(chaos_live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_rows),
        cmocka_unit_test(test_match_rows),
        cmocka_unit_test(test_match_new_keys),
        cmocka_unit_test(test_metadata_size),
        cmocka_unit_test(test_match_types),
        cmocka_unit_test(test_equal),
        cmocka_unit_test(test_chaos),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
