/* test_dash_msg.c - unit tests for protocol/dash_msg.c: dashboard client messages as table
 * rows - accepted messages with what was read (type, event, target, id, token, cursor, limit,
 * filter lists), rejected ones with their named error, stage, frame type, code and message
 * (also which fault wins when a message has several) - the stream id reader, and allocation
 * failure in the filter reader.
 * runs on: the test process, one thread. Run from the repository root. */
#include "tests/unit/proto_test.h"

#include "protocol/dash_msg.c"
#include "protocol/filter.c"
#include "protocol/proto.c"
#include "protocol/stream_vec.c"

#define N_ROWS(a) (sizeof(a) / sizeof((a)[0]))

#define RID "0x7cb884e84710b6fbce8bd9945f5cbc09b55081b654d6eb3a515de9fb1bdc0d84"
#define SUB "\"type\":\"subscribe\",\"event\":\"request.status.updated\""

static void test_accepted(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        enum dash_msg_type type;
        enum dash_msg_event event;
        enum dash_msg_target target;
        const char *id, *token, *from;
        int limit;
        size_t nstatus, norigin, ndest; /* broad filter lists (0: absent) */
    } rows[] = {
        /* subscribe */
        {"{" SUB "}", DASH_MSG_SUBSCRIBE, DASH_EVENT_STATUS, DASH_TARGET_BROAD, NULL, NULL, NULL,
         100, 0, 0, 0},
        {"{" SUB ",\"filters\":null}", DASH_MSG_SUBSCRIBE, DASH_EVENT_STATUS, DASH_TARGET_BROAD,
         NULL, NULL, NULL, 100, 0, 0, 0},
        {"{" SUB ",\"filters\":{\"id\":\"" RID "\"}}", DASH_MSG_SUBSCRIBE, DASH_EVENT_STATUS,
         DASH_TARGET_ID, RID, NULL, NULL, 100, 0, 0, 0},
        {"{" SUB ",\"filters\":{\"status\":\"success\",\"originChainIds\":[1,8453]}}",
         DASH_MSG_SUBSCRIBE, DASH_EVENT_STATUS, DASH_TARGET_BROAD, NULL, NULL, NULL, 100, 1, 2,
         0},
        {"{" SUB ",\"filters\":{\"destinationChainIds\":10},\"snapshotLimit\":0}",
         DASH_MSG_SUBSCRIBE, DASH_EVENT_STATUS, DASH_TARGET_BROAD, NULL, NULL, NULL, 0, 0, 0, 1},
        {"{" SUB ",\"lastEventId\":\"1712345678901-7\",\"snapshotLimit\":1000}",
         DASH_MSG_SUBSCRIBE, DASH_EVENT_STATUS, DASH_TARGET_BROAD, NULL, NULL,
         "1712345678901-7", 1000, 0, 0, 0},
        {"{" SUB ",\"lastEventId\":\"42\",\"token\":\"t0k\"}", DASH_MSG_SUBSCRIBE,
         DASH_EVENT_STATUS, DASH_TARGET_BROAD, NULL, "t0k", "42", 100, 0, 0, 0},
        {"{" SUB ",\"lastEventId\":null,\"unknown\":[1]}", DASH_MSG_SUBSCRIBE, DASH_EVENT_STATUS,
         DASH_TARGET_BROAD, NULL, NULL, NULL, 100, 0, 0, 0},
        /* the largest stream id Redis has: 2^64 - 1 in both parts */
        {"{" SUB ",\"lastEventId\":\"18446744073709551615-18446744073709551615\"}",
         DASH_MSG_SUBSCRIBE, DASH_EVENT_STATUS, DASH_TARGET_BROAD, NULL, NULL,
         "18446744073709551615-18446744073709551615", 100, 0, 0, 0},
        /* stats: only event and token are read */
        {"{\"type\":\"subscribe\",\"event\":\"statusrelay.stats\",\"filters\":7,"
         "\"snapshotLimit\":-1,\"token\":\"x\"}",
         DASH_MSG_SUBSCRIBE, DASH_EVENT_STATS, 0, NULL, "x", NULL, 100, 0, 0, 0},
        /* unsubscribe */
        {"{\"type\":\"unsubscribe\",\"event\":\"request.status.updated\"}", DASH_MSG_UNSUBSCRIBE,
         DASH_EVENT_STATUS, DASH_TARGET_ALL, NULL, NULL, NULL, 0, 0, 0, 0},
        {"{\"type\":\"unsubscribe\",\"event\":\"request.status.updated\",\"filters\":{}}",
         DASH_MSG_UNSUBSCRIBE, DASH_EVENT_STATUS, DASH_TARGET_ALL, NULL, NULL, NULL, 0, 0, 0, 0},
        {"{\"type\":\"unsubscribe\",\"event\":\"request.status.updated\",\"filters\":\"x\"}",
         DASH_MSG_UNSUBSCRIBE, DASH_EVENT_STATUS, DASH_TARGET_ALL, NULL, NULL, NULL, 0, 0, 0, 0},
        {"{\"type\":\"unsubscribe\",\"event\":\"request.status.updated\",\"filters\":{\"id\":"
         "\"abc\"}}",
         DASH_MSG_UNSUBSCRIBE, DASH_EVENT_STATUS, DASH_TARGET_ID, "abc", NULL, NULL, 0, 0, 0, 0},
        {"{\"type\":\"unsubscribe\",\"event\":\"request.status.updated\",\"filters\":{\"status\":"
         "[\"a\",\"b\"]}}",
         DASH_MSG_UNSUBSCRIBE, DASH_EVENT_STATUS, DASH_TARGET_BROAD, NULL, NULL, NULL, 0, 2, 0, 0},
        {"{\"type\":\"unsubscribe\",\"event\":\"statusrelay.stats\",\"filters\":5}",
         DASH_MSG_UNSUBSCRIBE, DASH_EVENT_STATS, 0, NULL, NULL, NULL, 0, 0, 0, 0},
        /* history: event not read */
        {"{\"type\":\"history\",\"filters\":{\"id\":\"" RID "\"}}", DASH_MSG_HISTORY, 0,
         DASH_TARGET_ID, RID, NULL, NULL, 0, 0, 0, 0},
        {"{\"event\":5,\"filters\":{\"id\":\"a:b.c-d_e\"},\"type\":\"history\"}",
         DASH_MSG_HISTORY, 0, DASH_TARGET_ID, "a:b.c-d_e", NULL, NULL, 0, 0, 0, 0},
        /* facts: as history */
        {"{\"type\":\"facts\",\"filters\":{\"id\":\"" RID "\"},\"event\":\"x\"}", DASH_MSG_FACTS,
         0, DASH_TARGET_ID, RID, NULL, NULL, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct dash_msg m;
        enum dash_msg_error e = dash_msg_parse(rows[i].in, strlen(rows[i].in), &m);
        if (e != DASH_MSG_OK)
            fail_msg("row %zu %s: error %d (%s: %s)", i, rows[i].in, e, m.fault.code,
                     m.fault.message);
        if (m.type != rows[i].type || m.event != rows[i].event || m.target != rows[i].target ||
            m.limit != rows[i].limit)
            fail_msg("row %zu %s: type %d event %d target %d limit %d", i, rows[i].in, m.type,
                     m.event, m.target, m.limit);
        if ((rows[i].id == NULL) != (m.id == NULL) ||
            (rows[i].id != NULL && strcmp(rows[i].id, m.id) != 0))
            fail_msg("row %zu: id %s", i, m.id ? m.id : "-");
        if ((rows[i].token == NULL) != (m.token == NULL) ||
            (rows[i].token != NULL && strcmp(rows[i].token, m.token) != 0))
            fail_msg("row %zu: token %s", i, m.token ? m.token : "-");
        if ((rows[i].from == NULL) != (m.from == NULL) ||
            (rows[i].from != NULL && strcmp(rows[i].from, m.from) != 0))
            fail_msg("row %zu: from %s", i, m.from ? m.from : "-");
        if (m.filter.nstatus != rows[i].nstatus || m.filter.norigin != rows[i].norigin ||
            m.filter.ndest != rows[i].ndest)
            fail_msg("row %zu: lists %zu %zu %zu", i, m.filter.nstatus, m.filter.norigin,
                     m.filter.ndest);
        dash_msg_cleanup(&m);
    }
    assert_int_equal(chaos_live, 0);
}

static void test_rejected(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        enum dash_msg_error e;
        enum dash_msg_stage stage;
        const char *type, *code, *message; /* message: a prefix */
    } rows[] = {
        {"", DASH_MSG_BAD_JSON, DASH_STAGE_EARLY, NULL, "bad_json", "messages are JSON"},
        {"[1]", DASH_MSG_BAD_JSON, DASH_STAGE_EARLY, NULL, "bad_json", "messages are JSON"},
        {"{\"type\":\"history\",\"type\":\"history\"}", DASH_MSG_BAD_JSON, DASH_STAGE_EARLY,
         NULL, "bad_json", "messages"},
        {"{\"type\":\"subscribe\"", DASH_MSG_BAD_JSON, DASH_STAGE_EARLY, NULL, "bad_json", ""},
        {"{}", DASH_MSG_NO_TYPE, DASH_STAGE_EARLY, NULL, "bad_request", "\"type\" is required"},
        {"{\"type\":1}", DASH_MSG_NO_TYPE, DASH_STAGE_EARLY, NULL, "bad_request", "\"type\""},
        {"{\"type\":\"dance\"}", DASH_MSG_UNKNOWN_TYPE, DASH_STAGE_EARLY, NULL, "unknown_type",
         "types: subscribe, unsubscribe, history"},
        /* subscribe, in the order faults win */
        {"{\"type\":\"subscribe\",\"filters\":7}", DASH_MSG_NO_EVENT, DASH_STAGE_EARLY,
         "subscribe", "bad_request", "event is required"},
        {"{\"type\":\"subscribe\",\"event\":\"x\",\"filters\":7}", DASH_MSG_UNSUPPORTED_EVENT,
         DASH_STAGE_FIELDS, "subscribe", "unsupported_event",
         "events: \"request.status.updated\" and \"statusrelay.stats\""},
        {"{" SUB ",\"filters\":7,\"lastEventId\":\"x\"}", DASH_MSG_FILTERS_TYPE,
         DASH_STAGE_FIELDS, "subscribe", "bad_request", "filters must be an object"},
        {"{" SUB ",\"lastEventId\":\"x\",\"snapshotLimit\":-1}", DASH_MSG_BAD_CURSOR,
         DASH_STAGE_FIELDS, "subscribe", "bad_cursor", "lastEventId must be"},
        {"{" SUB ",\"lastEventId\":5}", DASH_MSG_BAD_CURSOR, DASH_STAGE_FIELDS, "subscribe",
         "bad_cursor", ""},
        {"{" SUB ",\"lastEventId\":\"1-\"}", DASH_MSG_BAD_CURSOR, DASH_STAGE_FIELDS, "subscribe",
         "bad_cursor", ""},
        {"{" SUB ",\"lastEventId\":\"-1\"}", DASH_MSG_BAD_CURSOR, DASH_STAGE_FIELDS, "subscribe",
         "bad_cursor", ""},
        {"{" SUB ",\"lastEventId\":\"123456789012345678901234567890123456789012345678\"}",
         DASH_MSG_BAD_CURSOR, DASH_STAGE_FIELDS, "subscribe", "bad_cursor", ""},
        /* out of range (issue 22): 2^64 used to be read as 2^64 - 1 */
        {"{" SUB ",\"lastEventId\":\"18446744073709551616\"}", DASH_MSG_BAD_CURSOR,
         DASH_STAGE_FIELDS, "subscribe", "bad_cursor", "lastEventId must be a statusrelay.streamId"},
        {"{" SUB ",\"lastEventId\":\"18446744073709551616-0\"}", DASH_MSG_BAD_CURSOR,
         DASH_STAGE_FIELDS, "subscribe", "bad_cursor", "lastEventId must be"},
        {"{" SUB ",\"lastEventId\":\"1712345678901-18446744073709551616\"}", DASH_MSG_BAD_CURSOR,
         DASH_STAGE_FIELDS, "subscribe", "bad_cursor", "lastEventId must be"},
        {"{" SUB ",\"lastEventId\":\"99999999999999999999-0\"}", DASH_MSG_BAD_CURSOR,
         DASH_STAGE_FIELDS, "subscribe", "bad_cursor", "lastEventId must be"},
        {"{" SUB ",\"snapshotLimit\":1001,\"filters\":{\"id\":\"bad id\"}}", DASH_MSG_BAD_LIMIT,
         DASH_STAGE_FIELDS, "subscribe", "bad_request", "snapshotLimit is an integer 0..1000"},
        {"{" SUB ",\"snapshotLimit\":null}", DASH_MSG_BAD_LIMIT, DASH_STAGE_FIELDS, "subscribe",
         "bad_request", "snapshotLimit"},
        {"{" SUB ",\"snapshotLimit\":1.5}", DASH_MSG_BAD_LIMIT, DASH_STAGE_FIELDS, "subscribe",
         "bad_request", "snapshotLimit"},
        {"{" SUB ",\"filters\":{\"id\":\"bad id\"}}", DASH_MSG_BAD_ID, DASH_STAGE_TARGET,
         "subscribe", "invalid_request_id", "filters.id must be a request id"},
        {"{" SUB ",\"filters\":{\"id\":null}}", DASH_MSG_BAD_ID, DASH_STAGE_TARGET, "subscribe",
         "invalid_request_id", ""},
        {"{" SUB ",\"filters\":{\"id\":\"abc\",\"status\":\"success\"}}", DASH_MSG_ID_COMBINED,
         DASH_STAGE_TARGET, "subscribe", "bad_request", "filters.id cannot be combined"},
        {"{" SUB ",\"filters\":{\"colour\":\"red\"}}", DASH_MSG_BAD_FILTER, DASH_STAGE_TARGET,
         "subscribe", "bad_request", "unknown filter key"},
        {"{" SUB ",\"filters\":{\"status\":[]}}", DASH_MSG_BAD_FILTER, DASH_STAGE_TARGET,
         "subscribe", "bad_request", "status is a string or a non-empty list"},
        {"{" SUB ",\"filters\":{\"originChainIds\":0}}", DASH_MSG_BAD_FILTER, DASH_STAGE_TARGET,
         "subscribe", "bad_request", "chain ids are positive integers"},
        {"{" SUB ",\"filters\":{\"status\":\"0123456789012345678901234567890123\"}}",
         DASH_MSG_BAD_FILTER, DASH_STAGE_TARGET, "subscribe", "bad_request",
         "a status is a string of 1 to 31"},
        /* unsubscribe: every fault at once */
        {"{\"type\":\"unsubscribe\"}", DASH_MSG_NO_EVENT, DASH_STAGE_EARLY, "unsubscribe",
         "bad_request", "event is required"},
        {"{\"type\":\"unsubscribe\",\"event\":\"x\"}", DASH_MSG_UNSUPPORTED_EVENT,
         DASH_STAGE_EARLY, "unsubscribe", "unsupported_event",
         "events: \"request.status.updated\""},
        {"{\"type\":\"unsubscribe\",\"event\":\"request.status.updated\",\"filters\":{\"id\":"
         "\"has space\"}}",
         DASH_MSG_BAD_ID, DASH_STAGE_EARLY, "unsubscribe", "invalid_request_id", ""},
        {"{\"type\":\"unsubscribe\",\"event\":\"request.status.updated\",\"filters\":{\"x\":1}}",
         DASH_MSG_BAD_FILTER, DASH_STAGE_EARLY, "unsubscribe", "bad_request", "unknown filter"},
        /* history */
        {"{\"type\":\"history\"}", DASH_MSG_FILTERS_TYPE, DASH_STAGE_EARLY, "history",
         "bad_request", "filters.id is required"},
        {"{\"type\":\"history\",\"filters\":{}}", DASH_MSG_BAD_ID, DASH_STAGE_EARLY, "history",
         "invalid_request_id", ""},
        {"{\"type\":\"history\",\"filters\":{\"id\":\"a\",\"b\":1}}", DASH_MSG_ID_COMBINED,
         DASH_STAGE_EARLY, "history", "bad_request", ""},
        /* facts */
        {"{\"type\":\"facts\"}", DASH_MSG_FILTERS_TYPE, DASH_STAGE_EARLY, "facts",
         "bad_request", "filters.id is required"},
        {"{\"type\":\"facts\",\"filters\":[]}", DASH_MSG_FILTERS_TYPE, DASH_STAGE_EARLY,
         "facts", "bad_request", "filters.id is required"},
        {"{\"type\":\"facts\",\"filters\":{\"id\":\"<b>\"}}", DASH_MSG_BAD_ID, DASH_STAGE_EARLY,
         "facts", "invalid_request_id", "filters.id must be a request id"},
        {"{\"type\":\"facts\",\"filters\":{\"id\":\"a\",\"status\":\"x\"}}",
         DASH_MSG_ID_COMBINED, DASH_STAGE_EARLY, "facts", "bad_request", ""},
        /* find */
        {"{\"type\":\"find\"}", DASH_MSG_BAD_QUERY, DASH_STAGE_EARLY, "find", "bad_request",
         "q is required"},
        {"{\"type\":\"find\",\"q\":\"\"}", DASH_MSG_BAD_QUERY, DASH_STAGE_EARLY, "find",
         "bad_request", "q is required"},
        {"{\"type\":\"find\",\"q\":5}", DASH_MSG_BAD_QUERY, DASH_STAGE_EARLY, "find",
         "bad_request", "q is required"},
        {"{\"type\":\"find\",\"q\":\"two words\"}", DASH_MSG_BAD_QUERY, DASH_STAGE_EARLY,
         "find", "bad_request", "q is required"},
        {"{\"type\":\"find\",\"q\":\"a\\u007fb\"}", DASH_MSG_BAD_QUERY, DASH_STAGE_EARLY,
         "find", "bad_request", "q is required"},
        {"{\"type\":\"find\",\"q\":\"caf\\u00e9\"}", DASH_MSG_BAD_QUERY, DASH_STAGE_EARLY,
         "find", "bad_request", "q is required"},
        {"{\"type\":\"find\",\"q\":\"a\\tb\"}", DASH_MSG_BAD_QUERY, DASH_STAGE_EARLY, "find",
         "bad_request", "q is required"},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct dash_msg m;
        enum dash_msg_error e = dash_msg_parse(rows[i].in, strlen(rows[i].in), &m);
        if (e != rows[i].e || m.fault.stage != rows[i].stage)
            fail_msg("row %zu %s: error %d stage %d, want %d %d", i, rows[i].in, e,
                     m.fault.stage, rows[i].e, rows[i].stage);
        if ((rows[i].type == NULL) != (m.fault.type == NULL) ||
            (rows[i].type != NULL && strcmp(rows[i].type, m.fault.type) != 0) ||
            strcmp(rows[i].code, m.fault.code) != 0 ||
            strncmp(rows[i].message, m.fault.message, strlen(rows[i].message)) != 0)
            fail_msg("row %zu %s: %s %s %s", i, rows[i].in, m.fault.type ? m.fault.type : "-",
                     m.fault.code, m.fault.message);
        assert_null(m.filter.status);
        assert_null(m.filter.origin);
        dash_msg_cleanup(&m);
    }
    assert_int_equal(chaos_live, 0);
}

/* find: the term as given (1..256 printable bytes, no space), nothing else read. */
static void test_find(void **state)
{
    (void)state;
    char big[DASH_MSG_Q_MAX + 64];
    char term[DASH_MSG_Q_MAX + 2];
    memset(term, 'a', sizeof(term));
    term[DASH_MSG_Q_MAX] = '\0'; /* the longest accepted */
    snprintf(big, sizeof(big), "{\"type\":\"find\",\"q\":\"%s\"}", term);
    static const char *ok[] = {
        "{\"type\":\"find\",\"q\":\"0xAbC\",\"filters\":7,\"event\":1}",
        "{\"q\":\"5VfYdxKzF~!\",\"type\":\"find\"}",
    };
    static const char *want[] = {"0xAbC", "5VfYdxKzF~!"};
    for (size_t i = 0; i < N_ROWS(ok) + 1; i++) {
        const char *in = i < N_ROWS(ok) ? ok[i] : big;
        struct dash_msg m;
        assert_int_equal(dash_msg_parse(in, strlen(in), &m), DASH_MSG_OK);
        assert_int_equal(m.type, DASH_MSG_FIND);
        assert_int_equal(m.event, 0);
        assert_int_equal(m.target, 0);
        assert_null(m.id);
        assert_string_equal(m.q, i < N_ROWS(ok) ? want[i] : term);
        dash_msg_cleanup(&m);
    }
    term[DASH_MSG_Q_MAX] = 'a'; /* one byte over */
    term[DASH_MSG_Q_MAX + 1] = '\0';
    snprintf(big, sizeof(big), "{\"type\":\"find\",\"q\":\"%s\"}", term);
    struct dash_msg m;
    assert_int_equal(dash_msg_parse(big, strlen(big), &m), DASH_MSG_BAD_QUERY);
    assert_null(m.q);
    assert_string_equal(m.fault.type, "find");
    dash_msg_cleanup(&m);
}

/* A message with an embedded token of any type is kept for the core to judge. */
static void test_token_types(void **state)
{
    (void)state;
    static const char *ins[] = {"{" SUB ",\"token\":null}", "{" SUB ",\"token\":5}",
                                "{" SUB ",\"token\":{}}"};
    for (size_t i = 0; i < N_ROWS(ins); i++) {
        struct dash_msg m;
        assert_int_equal(dash_msg_parse(ins[i], strlen(ins[i]), &m), DASH_MSG_OK);
        assert_int_equal(m.token_present, 1);
        assert_null(m.token);
        dash_msg_cleanup(&m);
    }
    /* the token is read even when a later field is wrong (the core checks it first) */
    const char *late = "{\"type\":\"subscribe\",\"event\":\"nope\",\"token\":\"abc\"}";
    struct dash_msg m;
    assert_int_equal(dash_msg_parse(late, strlen(late), &m), DASH_MSG_UNSUPPORTED_EVENT);
    assert_int_equal(m.token_present, 1);
    assert_string_equal(m.token, "abc");
    dash_msg_cleanup(&m);
    dash_msg_cleanup(NULL);
}

static void test_stream_id(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        uint64_t ms, seq;
    } rows[] = {
        {"0", 0, 0, 0},           {"1712345678901-0", 0, 1712345678901ULL, 0},
        {"5-9", 0, 5, 9},         {"18446744073709551615-1", 0, UINT64_MAX, 1},
        {"", -1, 0, 0},           {"-1", -1, 0, 0},
        {"1-", -1, 0, 0},         {"1-x", -1, 0, 0},
        {"1-2-3", -1, 0, 0},      {" 1", -1, 0, 0},
        {"1 ", -1, 0, 0},         {"$", -1, 0, 0},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        uint64_t ms = 77, seq = 77;
        int rc = proto_stream_id_parse(rows[i].s, &ms, &seq);
        if (rc != rows[i].rc || (rc == 0 && (ms != rows[i].ms || seq != rows[i].seq)))
            fail_msg("%s: rc %d ms %llu seq %llu", rows[i].s, rc, (unsigned long long)ms,
                     (unsigned long long)seq);
    }
    uint64_t ms, seq;
    assert_int_equal(proto_stream_id_parse(NULL, &ms, &seq), -1);
}

/* Every allocation of the filter reader failing in turn: DASH_MSG_ENOMEM, nothing leaked.
 * (jansson's own allocations are not counted: it has its own allocator.) */
/* With 3 partitions a lastEventId is the vector of 3 stream ids; a single id or another
 * count is a bad_cursor naming the partition count; 1 partition refuses a vector. */
static void test_partitions(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        unsigned parts;
        enum dash_msg_error want;
        const char *msg; /* the fault message's start, or the cursor read */
    } rows[] = {
        {"{" SUB ",\"lastEventId\":\"1-0,2-5,0-0\"}", 3, DASH_MSG_OK, "1-0,2-5,0-0"},
        {"{" SUB ",\"lastEventId\":\"1,2,3\",\"snapshotLimit\":7}", 3, DASH_MSG_OK, "1,2,3"},
        {"{" SUB ",\"lastEventId\":\"1712345678901-0\"}", 3, DASH_MSG_BAD_CURSOR,
         "lastEventId is a cursor of another partition count"},
        {"{" SUB ",\"lastEventId\":\"1-0,2-0\"}", 3, DASH_MSG_BAD_CURSOR,
         "lastEventId is a cursor of another partition count"},
        {"{" SUB ",\"lastEventId\":\"1-0,2-0,3-0,4-0\"}", 3, DASH_MSG_BAD_CURSOR,
         "lastEventId is a cursor of another partition count"},
        {"{" SUB ",\"lastEventId\":\"1-0,,3-0\"}", 3, DASH_MSG_BAD_CURSOR,
         "lastEventId must be a statusrelay.streamId"},
        {"{" SUB ",\"lastEventId\":\"1-0,18446744073709551616-0,3-0\"}", 3, DASH_MSG_BAD_CURSOR,
         "lastEventId must be a statusrelay.streamId"},
        {"{" SUB ",\"lastEventId\":\"1-0,2-18446744073709551616,3-0\"}", 3, DASH_MSG_BAD_CURSOR,
         "lastEventId must be a statusrelay.streamId"},
        {"{" SUB ",\"lastEventId\":\"1-0,18446744073709551615-1,3-0\"}", 3, DASH_MSG_OK,
         "1-0,18446744073709551615-1,3-0"},
        {"{" SUB ",\"lastEventId\":7}", 3, DASH_MSG_BAD_CURSOR,
         "lastEventId must be a statusrelay.streamId"},
        {"{" SUB ",\"lastEventId\":\"1-0,2-0,3-0\"}", 1, DASH_MSG_BAD_CURSOR,
         "lastEventId must be a statusrelay.streamId such as \"1712345678901-0\""},
        {"{" SUB ",\"lastEventId\":null}", 3, DASH_MSG_OK, NULL},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct dash_msg m;
        enum dash_msg_error e = dash_msg_parse_parts(rows[i].in, strlen(rows[i].in),
                                                     rows[i].parts, &m);
        if (e != rows[i].want)
            fail_msg("row %zu: error %d, want %d", i, e, rows[i].want);
        if (e == DASH_MSG_OK && rows[i].msg != NULL)
            assert_string_equal(m.from, rows[i].msg);
        else if (e == DASH_MSG_OK)
            assert_null(m.from);
        else {
            assert_int_equal(m.fault.stage, DASH_STAGE_FIELDS);
            assert_string_equal(m.fault.code, "bad_cursor");
            if (strncmp(m.fault.message, rows[i].msg, strlen(rows[i].msg)) != 0)
                fail_msg("row %zu: message %s", i, m.fault.message);
        }
        dash_msg_cleanup(&m);
    }
}

static void test_enomem(void **state)
{
    (void)state;
    const char *in = "{" SUB ",\"filters\":{\"status\":[\"a\",\"b\"],\"originChainIds\":[1,2],"
                     "\"destinationChainIds\":3}}";
    int tripped = 0;
    for (long n = 1; n < 64; n++) {
        struct dash_msg m;
        long live = chaos_live;
        chaos_arm(n);
        enum dash_msg_error e = dash_msg_parse(in, strlen(in), &m);
        int hit = chaos_tripped;
        chaos_disarm();
        assert_int_equal(e == DASH_MSG_ENOMEM, hit);
        assert_true(e == DASH_MSG_OK || e == DASH_MSG_ENOMEM);
        dash_msg_cleanup(&m);
        assert_int_equal(chaos_live, live);
        if (!hit)
            break;
        tripped++;
    }
    assert_true(tripped > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),   cmocka_unit_test(test_rejected),
        cmocka_unit_test(test_token_types), cmocka_unit_test(test_stream_id),
        cmocka_unit_test(test_enomem),      cmocka_unit_test(test_partitions),
        cmocka_unit_test(test_find),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
