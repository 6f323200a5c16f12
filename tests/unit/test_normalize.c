/* test_normalize.c - unit tests for protocol/normalize.c: every upstream fixture through its
 * normaliser, control frames, hostile inputs (truncated JSON, wrong types, numbers out of
 * range, 1 MB strings, 10,000-deep nesting, NUL bytes, invalid UTF-8, duplicate keys, unknown
 * and missing fields), /requests/v3 pages and items, ISO-8601 timestamps, the JSON reader
 * against jansson (an independent parser), and allocation failure in every normaliser.
 * runs on: the test process, one thread. Run from the repository root. */
#include "tests/unit/proto_test.h"

#include "protocol/event.c"
#include "protocol/json.c"
#include "protocol/normalize.c"
#include "protocol/proto.c"
#include "protocol/record.c"
#include "protocol/requests_v3.c"

#define N_ROWS(a) (sizeof(a) / sizeof((a)[0]))

static const char RID[] = "0xd75b8e8f8db6335b3b8f485e1500361e7815493c42b4c3ebe4f85bde414c55b0";
static const char SOLHASH[] =
    "qCyQseaTNFCM1bEzJGLSqU9Pwvy5WZzmTN6scHtFBQRenkUycfdbb41Z5rBCJmwR6upUwudscyZxgLxUiWkSZNxc";

/* Replace the first occurrence of from in base by to (from NULL: base as is). Caller frees. */
static char *subst(const char *base, const char *from, const char *to)
{
    if (from == NULL)
        return strdup(base);
    const char *at = strstr(base, from);
    if (at == NULL)
        fail_msg("test bug: \"%s\" not in the base document", from);
    size_t n = strlen(base) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    return out;
}

/* snprintf(out, size, tmpl, arg, arg, ...) for templates from tables (every "%s" is arg). */
static void fill(char *out, size_t size, const char *tmpl, const char *arg)
{
    size_t n = 0, alen = strlen(arg);
    for (const char *p = tmpl; *p != '\0' && n + 1 < size;) {
        if (p[0] == '%' && p[1] == 's') {
            size_t k = alen < size - 1 - n ? alen : size - 1 - n;
            memcpy(out + n, arg, k);
            n += k;
            p += 2;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
}

/* A string of n copies of unit (a JSON-safe text). Caller frees. */
static char *repeat(const char *unit, size_t n)
{
    size_t u = strlen(unit);
    char *s = malloc(u * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(s + i * u, unit, u);
    s[u * n] = '\0';
    return s;
}

enum kind { K_WS, K_STATUS, K_WEBHOOK, K_ITEM, K_RECORD };

static int run(enum kind k, const char *buf, size_t len, struct proto_ws_msg *msg,
               struct status_event *ev, struct proto_err *err)
{
    switch (k) {
    case K_WS: return proto_normalize_ws(buf, len, 42, msg, ev, err);
    case K_STATUS: return proto_normalize_status_v3(buf, len, RID, 42, ev, err);
    case K_WEBHOOK: return proto_normalize_webhook(buf, len, 42, ev, err);
    case K_ITEM: return proto_normalize_requests_item(buf, len, 42, ev, err);
    case K_RECORD: return proto_event_from_record(buf, len, ev, err);
    }
    return -100;
}

/* Run and check the code (and the error field when failing); on failure *ev must be empty. */
static void expect(enum kind k, const char *buf, size_t len, int code, const char *field,
                   struct status_event *ev)
{
    struct proto_err err;
    struct proto_ws_msg msg;
    memset(&err, 0, sizeof(err));
    int rc = run(k, buf, len, &msg, ev, &err);
    if (rc != code)
        fail_msg("%.300s\n  -> %d %s (%s: %s), want %d", buf, rc, proto_strerror(rc), err.field,
                 err.msg, code);
    if (rc != 0) {
        assert_int_equal(err.code, rc);
        if (field != NULL && strcmp(err.field, field) != 0)
            fail_msg("%.300s\n  -> field \"%s\", want \"%s\"", buf, err.field, field);
        assert_null(ev->request_id);
        assert_null(ev->status);
        assert_null(ev->fail_reason);
    }
}

/* ---- fixtures ---------------------------------------------------------------------------- */

struct want {
    const char *file;
    enum kind kind;
    const char *status;
    enum proto_status st;
    int64_t updated_at, origin, dest, published, quote;
    size_t n_in, n_out;
    const char *in0;
    const char *fail, *refund, *details, *referrer, *dep_type;
    unsigned flags;
    enum proto_source src;
};

static const struct want fixtures[] = {
    {"ws_event_flat_pending.json", K_WS, "pending", PROTO_ST_PENDING, 1787049213418, 792703809,
     8453, 1787049213436, 0, 1, 0, SOLHASH, "N/A", "N/A", NULL, NULL, NULL,
     PROTO_HAS_IN_TXS | PROTO_HAS_OUT_TXS, PROTO_SRC_WS},
    {"ws_event_nested_submitted.json", K_WS, "submitted", PROTO_ST_SUBMITTED, 1787049377902,
     42161, 10, 0, 0, 1, 1, "0xe0241dc3d945dd2af9e564f4237924a6041735bf1c3d2f1414d7839655dcf779",
     "N/A", "N/A", NULL, NULL, NULL, PROTO_HAS_IN_TXS | PROTO_HAS_OUT_TXS, PROTO_SRC_WS},
    {"ws_event_deposit_address_success.json", K_WS, "success", PROTO_ST_SUCCESS, 1787050102655,
     8453, 42161, 1787050102671, 0, 1, 1,
     "0x6d93b01b82a07d09dd4bd8a5d22dc679bafe334a301e25238a45d4c370a93c10", "N/A", "N/A", NULL,
     NULL, "open",
     PROTO_HAS_IN_TXS | PROTO_HAS_OUT_TXS | PROTO_HAS_DEPOSIT | PROTO_HAS_DETAILS |
         PROTO_HAS_REASONS,
     PROTO_SRC_WS},
    {"webhook_payload_refund.json", K_WEBHOOK, "refund", PROTO_ST_REFUND, 1787054250297, 8453,
     42161, 1787054250318, 0, 1, 1,
     "0x4a1e76ef7a2f005f90115606b8e3d83fe8a0ee8eab86b15c8eea7028e9599413", "DOUBLE_SPEND", "N/A",
     NULL, "example-app", "strict",
     PROTO_HAS_IN_TXS | PROTO_HAS_OUT_TXS | PROTO_HAS_DEPOSIT | PROTO_HAS_DETAILS |
         PROTO_HAS_REASONS | PROTO_HAS_REFERRER,
     PROTO_SRC_WEBHOOK},
    {"status_v3_failure.json", K_STATUS, "failure", PROTO_ST_FAILURE, 1787052400551, 10, 137, 0,
     1787052351004, 1, 0, "0x6fdc4846226948f84cef802457a64e163d8f87c0216354859e6e4e89ee964ec9",
     "SLIPPAGE", "AMOUNT_TOO_LOW_TO_REFUND",
     "Fill simulation reverted: output below quoted minimum",
     NULL, NULL,
     PROTO_HAS_IN_TXS | PROTO_HAS_OUT_TXS | PROTO_HAS_DETAILS | PROTO_HAS_REASONS |
         PROTO_HAS_QUOTE_CREATED,
     PROTO_SRC_POLL},
    {"status_v3_refund.json", K_STATUS, "refund", PROTO_ST_REFUND, 1787053019876, 8453,
     792703809, 0, 1787052960112, 1, 1,
     "0xbb204a7cf5ec46c3fbde1e2dfbf5582bebc89b5a1a416a4dfb320db0a9067dfd",
     "DEPOSITED_AMOUNT_TOO_LOW_TO_FILL", "N/A", NULL, NULL, NULL,
     PROTO_HAS_IN_TXS | PROTO_HAS_OUT_TXS | PROTO_HAS_REASONS | PROTO_HAS_QUOTE_CREATED,
     PROTO_SRC_POLL},
    {"status_v3_success.json", K_STATUS, "success", PROTO_ST_SUCCESS, 1787051840213, 1, 8453, 0,
     1787051811090, 1, 1, "0x13a1ef8c393c381faf6b2265c6718d01d64e6a7d06d2569e3cd107714eeb9ca4",
     "N/A", "N/A", NULL, NULL, NULL,
     PROTO_HAS_IN_TXS | PROTO_HAS_OUT_TXS | PROTO_HAS_REASONS | PROTO_HAS_QUOTE_CREATED,
     PROTO_SRC_POLL},
};

static void check_want(const struct want *w, const struct status_event *ev)
{
    assert_string_equal(ev->status, w->status);
    assert_int_equal(ev->st, w->st);
    assert_int_equal(ev->updated_at, w->updated_at);
    assert_int_equal(ev->origin_chain_id, w->origin);
    assert_int_equal(ev->destination_chain_id, w->dest);
    assert_int_equal(ev->published_at, w->published);
    assert_int_equal(ev->quote_created_at, w->quote);
    assert_int_equal(ev->in_tx_hashes.n, w->n_in);
    assert_int_equal(ev->tx_hashes.n, w->n_out);
    if (w->in0 != NULL)
        assert_string_equal(ev->in_tx_hashes.v[0], w->in0);
    assert_string_equal(ev->fail_reason, w->fail);
    assert_string_equal(ev->refund_fail_reason, w->refund);
    if (w->details == NULL)
        assert_null(ev->details);
    else
        assert_string_equal(ev->details, w->details);
    if (w->referrer == NULL)
        assert_null(ev->referrer);
    else
        assert_string_equal(ev->referrer, w->referrer);
    if (w->dep_type == NULL) {
        assert_null(ev->deposit);
    } else {
        assert_non_null(ev->deposit);
        assert_string_equal(ev->deposit->type, w->dep_type);
        assert_non_null(ev->deposit->address);
        assert_non_null(ev->deposit->deposit_tx_hash);
    }
    assert_int_equal(ev->flags, w->flags);
    assert_int_equal(ev->source, w->src);
    assert_int_equal(ev->observed_at, 42);
    assert_int_equal(ev->seq, 0);
    assert_string_equal(ev->event_id, "");
}

static void test_fixtures(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_ROWS(fixtures); i++) {
        size_t n;
        char *text = fixture(fixtures[i].file, &n);
        struct status_event ev;
        struct proto_ws_msg msg;
        struct proto_err err;
        assert_non_null(text);
        msg.kind = PROTO_WS_READY;
        int rc = run(fixtures[i].kind, text, n, &msg, &ev, &err);
        if (rc != 0)
            fail_msg("%s: %s %s %s", fixtures[i].file, proto_strerror(rc), err.field, err.msg);
        if (fixtures[i].kind == K_WS)
            assert_int_equal(msg.kind, PROTO_WS_EVENT);
        assert_string_equal(ev.request_id, fixtures[i].kind == K_STATUS ? RID : ev.request_id);
        check_want(&fixtures[i], &ev);
        status_event_cleanup(&ev);
        free(text);
    }
}

/* Every strict prefix of every fixture is rejected as JSON, never half-read. */
static void test_truncated(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_ROWS(fixtures); i++) {
        size_t n;
        char *text = fixture(fixtures[i].file, &n);
        size_t end = (size_t)(strrchr(text, '}') - text) + 1;
        for (size_t len = 0; len < end; len++) {
            struct status_event ev;
            expect(fixtures[i].kind, text, len, PROTO_EJSON, "", &ev);
        }
        free(text);
    }
}

/* ---- control frames ---------------------------------------------------------------------- */

static void test_ws_control(void **state)
{
    static const struct { const char *file, *doc; enum proto_ws_kind kind; const char *id, *st; }
    rows[] = {
        {"ws_connection_ready.json", NULL, PROTO_WS_READY, "nce9iyo5gqt", "ready"},
        {"ws_subscribe_ack.json", NULL, PROTO_WS_SUB_ACK, RID, "success"},
        /* the docs' typo in data.event must not matter */
        {NULL, "{\"type\":\"subscribe\",\"status\":\"success\",\"data\":{\"event\":"
               "\"equest.status.updated\",\"filters\":{\"id\":\"0xabc\"}}}",
         PROTO_WS_SUB_ACK, "0xabc", "success"},
        {NULL, "{\"type\":\"unsubscribe\",\"status\":\"success\",\"data\":{\"event\":"
               "\"request.status.updated\"}}",
         PROTO_WS_UNSUB_ACK, "", "success"},
        {NULL, "{\"type\":\"subscribe\",\"status\":\"error\",\"data\":{\"message\":\"too many\"}}",
         PROTO_WS_CONTROL, "", "error"},
        {NULL,
         "{\"type\":\"error\",\"status\":\"failure\",\"data\":{\"filters\":{\"id\":\"0xab\"}}}",
         PROTO_WS_CONTROL, "0xab", "failure"},
        {NULL, "{\"type\":\"connection\",\"status\":\"ready\"}", PROTO_WS_READY, "", "ready"},
        {NULL, "{\"type\":\"connection\",\"status\":\"closing\"}", PROTO_WS_CONTROL, "", "closing"},
        {NULL, "{\"type\":\"subscribe\",\"status\":\"success\",\"data\":{\"filters\":{\"id\":"
               "\"a b\"}}}",
         PROTO_WS_SUB_ACK, "", "success"},
        {NULL, "{\"type\":\"ping\"}", PROTO_WS_CONTROL, "", ""},
        {NULL, "{\"type\":\"subscribe\",\"status\":\"success\",\"data\":{\"event\":"
               "\"request.status.updated\",\"data\":{\"status\":\"pending\"}}}",
         PROTO_WS_SUB_ACK, "", "success"},
        {NULL, "{\"type\":\"connection\",\"status\":5,\"data\":{\"id\":7}}", PROTO_WS_CONTROL, "",
         ""},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        size_t n;
        char *text = rows[i].file ? fixture(rows[i].file, &n) : strdup(rows[i].doc);
        struct status_event ev;
        struct proto_ws_msg msg;
        struct proto_err err;
        n = strlen(text);
        assert_int_equal(proto_normalize_ws(text, n, 1, &msg, &ev, &err), 0);
        assert_int_equal(msg.kind, rows[i].kind);
        assert_string_equal(msg.ctl_id, rows[i].id);
        assert_string_equal(msg.ctl_status, rows[i].st);
        assert_null(ev.request_id);
        assert_null(ev.status);
        /* msg may be NULL: still recognised, *out stays empty */
        assert_int_equal(proto_normalize_ws(text, n, 1, NULL, &ev, &err), 0);
        assert_null(ev.request_id);
        free(text);
    }
}

static void test_ws_envelopes(void **state)
{
    static const char inner[] = "{\"status\":\"pending\",\"updatedAt\":5,\"requestId\":\"r1\"}";
    static const struct { const char *fmt; int64_t published; } rows[] = {
        {"{\"data\":{\"event\":\"request.status.updated\",\"data\":%s}}", 0},
        {"{\"data\":{\"event\":\"request.status.updated\",\"data\":%s,\"publishedAt\":7}}", 7},
        {"{\"publishedAt\":9,\"data\":{\"event\":\"request.status.updated\",\"data\":%s,"
         "\"publishedAt\":7}}",
         9},
        {"{\"event\":\"request.status.updated\",\"data\":%s}", 0},
        {"{\"event\":\"request.status.updated\",\"data\":%s,\"publishedAt\":null}", 0},
        {"{\"type\":\"event\",\"event\":\"request.status.updated\",\"data\":%s,\"publishedAt\":3}",
         3},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        char buf[512];
        struct status_event ev;
        struct proto_ws_msg msg;
        fill(buf, sizeof(buf), rows[i].fmt, inner);
        expect(K_WS, buf, strlen(buf), 0, NULL, &ev);
        assert_int_equal(ev.published_at, rows[i].published);
        assert_string_equal(ev.request_id, "r1");
        assert_int_equal(ev.origin_chain_id, 0);
        assert_string_equal(ev.fail_reason, "N/A");
        status_event_cleanup(&ev);
        (void)msg;
    }
}

/* ---- hostile and malformed ws events ----------------------------------------------------- */

static const char WS_BASE[] =
    "{\"event\":\"request.status.updated\",\"data\":{\"status\":\"pending\",\"inTxHashes\":"
    "[\"0xaa\"],\"txHashes\":[],\"updatedAt\":1787049213418,\"originChainId\":792703809,"
    "\"destinationChainId\":8453,\"requestId\":\"0xd75b\"},\"publishedAt\":1787049213436}";

static const struct row {
    const char *from, *to;
    int code;
    const char *field;
} ws_rows[] = {
    {NULL, NULL, 0, NULL},
    /* status */
    {"\"status\":\"pending\"", "\"status\":1", PROTO_ETYPE, "data.status"},
    {"\"status\":\"pending\"", "\"status\":null", PROTO_ETYPE, "data.status"},
    {"\"status\":\"pending\",", "", PROTO_EMISSING, "data.status"},
    {"\"status\":\"pending\"", "\"status\":\"\"", PROTO_EVALUE, "data.status"},
    {"\"status\":\"pending\"", "\"status\":\"pend ing\"", PROTO_EVALUE, "data.status"},
    {"\"status\":\"pending\"", "\"status\":\"pend\\ning\"", PROTO_EVALUE, "data.status"},
    {"\"status\":\"pending\"",
     "\"status\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
     PROTO_ETOOLONG, "data.status"},
    {"\"status\":\"pending\"", "\"status\":\"partially_filled\"", 0, NULL},
    {"\"status\":\"pending\"", "\"status\":[\"pending\"]", PROTO_ETYPE, "data.status"},
    /* updatedAt */
    {"\"updatedAt\":1787049213418", "\"updatedAt\":\"1787049213418\"", PROTO_ETYPE,
     "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":1.787049213418e12", PROTO_ETYPE,
     "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":1787049213418.0", PROTO_ETYPE,
     "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":0", PROTO_ERANGE, "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":-0", PROTO_ERANGE, "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":-1", PROTO_ERANGE, "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":9007199254740992", PROTO_ERANGE,
     "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":9223372036854775807", PROTO_ERANGE,
     "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":99999999999999999999999", PROTO_ERANGE,
     "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":-99999999999999999999999", PROTO_ERANGE,
     "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":1e400", PROTO_ETYPE, "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":null", PROTO_ETYPE, "data.updatedAt"},
    {"\"updatedAt\":1787049213418,", "", PROTO_EMISSING, "data.updatedAt"},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":true", PROTO_ETYPE, "data.updatedAt"},
    /* chain ids */
    {"\"originChainId\":792703809", "\"originChainId\":0", PROTO_ERANGE, "data.originChainId"},
    {"\"originChainId\":792703809", "\"originChainId\":-8453", PROTO_ERANGE, "data.originChainId"},
    {"\"originChainId\":792703809", "\"originChainId\":8453.0", PROTO_ETYPE, "data.originChainId"},
    {"\"originChainId\":792703809", "\"originChainId\":\"8453\"", PROTO_ETYPE,
     "data.originChainId"},
    {"\"originChainId\":792703809", "\"originChainId\":9007199254740992", PROTO_ERANGE,
     "data.originChainId"},
    {"\"originChainId\":792703809", "\"originChainId\":9007199254740991", 0, NULL},
    {"\"originChainId\":792703809", "\"originChainId\":null", 0, NULL},
    {"\"originChainId\":792703809,", "", 0, NULL},
    {"\"destinationChainId\":8453", "\"destinationChainId\":{}", PROTO_ETYPE,
     "data.destinationChainId"},
    /* hashes */
    {"[\"0xaa\"]", "\"0xaa\"", PROTO_ETYPE, "data.inTxHashes"},
    {"[\"0xaa\"]", "[1]", PROTO_ETYPE, "data.inTxHashes"},
    {"[\"0xaa\"]", "[null]", PROTO_ETYPE, "data.inTxHashes"},
    {"[\"0xaa\"]", "[\"0x aa\"]", PROTO_EVALUE, "data.inTxHashes"},
    {"[\"0xaa\"]", "[\"\"]", PROTO_EVALUE, "data.inTxHashes"},
    {"[\"0xaa\"]", "[\"0x\\\"a\"]", PROTO_EVALUE, "data.inTxHashes"},
    {"[\"0xaa\"]", "[\"0x\\u00e9\"]", PROTO_EVALUE, "data.inTxHashes"},
    {"[\"0xaa\"]",
     "[\"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"]",
     PROTO_ETOOLONG, "data.inTxHashes"},
    {"[\"0xaa\"]", "null", 0, NULL},
    {"[\"0xaa\"]", "[\"0xaa\",\"0xaa\"]", 0, NULL},
    {"\"txHashes\":[]", "\"txHashes\":{}", PROTO_ETYPE, "data.txHashes"},
    /* request id */
    {"\"requestId\":\"0xd75b\"", "\"requestId\":\"\"", PROTO_EVALUE, "data.requestId"},
    {"\"requestId\":\"0xd75b\"", "\"requestId\":\"0x d75b\"", PROTO_EVALUE, "data.requestId"},
    {"\"requestId\":\"0xd75b\"", "\"requestId\":\"0xd75b\\u00e9\"", PROTO_EVALUE,
     "data.requestId"},
    {"\"requestId\":\"0xd75b\"", "\"requestId\":5", PROTO_ETYPE, "data.requestId"},
    {",\"requestId\":\"0xd75b\"", "", PROTO_EMISSING, "data.requestId"},
    {"\"requestId\":\"0xd75b\"",
     "\"requestId\":\"0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
     PROTO_ETOOLONG, "data.requestId"},
    /* reasons, details, referrer, deposit address, quoteCreatedAt */
    {"\"txHashes\":[]", "\"txHashes\":[],\"failReason\":5", PROTO_ETYPE, "data.failReason"},
    {"\"txHashes\":[]", "\"txHashes\":[],\"failReason\":\"bad reason\"", PROTO_EVALUE,
     "data.failReason"},
    {"\"txHashes\":[]", "\"txHashes\":[],\"refundFailReason\":{}", PROTO_ETYPE,
     "data.refundFailReason"},
    /* details of any JSON type are kept (was PROTO_ETYPE before JSON-typed details) */
    {"\"txHashes\":[]", "\"txHashes\":[],\"details\":5", 0, NULL},
    {"\"txHashes\":[]", "\"txHashes\":[],\"referrer\":[]", PROTO_ETYPE, "data.referrer"},
    {"\"txHashes\":[]", "\"txHashes\":[],\"depositAddress\":\"0x1\"", PROTO_ETYPE,
     "data.depositAddress"},
    {"\"txHashes\":[]", "\"txHashes\":[],\"depositAddress\":[]", PROTO_ETYPE,
     "data.depositAddress"},
    {"\"txHashes\":[]", "\"txHashes\":[],\"depositAddress\":{\"depositTxHash\":\"a b\"}",
     PROTO_EVALUE, "data.depositAddress.depositTxHash"},
    {"\"txHashes\":[]", "\"txHashes\":[],\"depositAddress\":{\"depositAddressType\":5}",
     PROTO_ETYPE, "data.depositAddress.depositAddressType"},
    {"\"txHashes\":[]", "\"txHashes\":[],\"depositAddress\":{\"address\":7}", PROTO_ETYPE,
     "data.depositAddress.address"},
    {"\"txHashes\":[]", "\"txHashes\":[],\"depositAddress\":{}", 0, NULL},
    {"\"txHashes\":[]", "\"txHashes\":[],\"quoteCreatedAt\":0", PROTO_ERANGE,
     "data.quoteCreatedAt"},
    {"\"txHashes\":[]", "\"txHashes\":[],\"quoteCreatedAt\":\"x\"", PROTO_ETYPE,
     "data.quoteCreatedAt"},
    /* envelope */
    {"\"publishedAt\":1787049213436", "\"publishedAt\":\"x\"", PROTO_ETYPE, "publishedAt"},
    {"\"publishedAt\":1787049213436", "\"publishedAt\":0", PROTO_ERANGE, "publishedAt"},
    {",\"publishedAt\":1787049213436", "", 0, NULL},
    {"\"event\":\"request.status.updated\"", "\"event\":\"request.created\"", PROTO_EEVENT,
     "event"},
    {"\"event\":\"request.status.updated\"", "\"event\":5", PROTO_ETYPE, "event"},
    {"\"event\":\"request.status.updated\"", "\"event\":\"request.status.updated\",\"type\":7",
     PROTO_ETYPE, "type"},
    /* unknown fields anywhere are ignored */
    {"\"txHashes\":[]", "\"txHashes\":[],\"extra\":{\"n\":[1,2.5,{\"x\":null}],\"b\":true}", 0,
     NULL},
    {"{\"event\"", "{\"zzz\":[[[]]],\"event\"", 0, NULL},
    /* JSON-level: duplicate keys, NUL escapes, invalid UTF-8, lone surrogates */
    {"\"status\":\"pending\"", "\"status\":\"pending\",\"status\":\"success\"", PROTO_EJSON, ""},
    {"{\"event\"", "{\"a\":{\"k\":1,\"k\":2},\"event\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"status\":\"pend\\u0000ing\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"status\":\"pend\xffing\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"status\":\"pend\xc0\xafing\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"status\":\"pend\xed\xa0\x80ing\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"status\":\"pend\xf4\x90\x80\x80ing\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"status\":\"\\ud800\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"status\":\"\\udc00\\ud800\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"status\":\"\\u12\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"status\":\"\\q\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"status\":\"a\tb\"", PROTO_EJSON, ""},
    {"\"status\":\"pending\"", "\"st\\u00e9\":\"\\ud83d\\ude00\",\"status\":\"pending\"", 0, NULL},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":01787049213418", PROTO_EJSON, ""},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":+1787049213418", PROTO_EJSON, ""},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":1787049213418.", PROTO_EJSON, ""},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":1787049213418e", PROTO_EJSON, ""},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":.5", PROTO_EJSON, ""},
    {"\"updatedAt\":1787049213418", "\"updatedAt\":NaN", PROTO_EJSON, ""},
    {"\"txHashes\":[]", "\"txHashes\":[],", PROTO_EJSON, ""},
    {"\"txHashes\":[]", "\"txHashes\":[1 2]", PROTO_EJSON, ""},
    {"\"txHashes\":[]", "\"txHashes\" []", PROTO_EJSON, ""},
    {"\"txHashes\":[]", "'txHashes':[]", PROTO_EJSON, ""},
    {"\"txHashes\":[]", "\"txHashes\":[tru]", PROTO_EJSON, ""},
};

static void test_ws_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_ROWS(ws_rows); i++) {
        char *doc = subst(WS_BASE, ws_rows[i].from, ws_rows[i].to);
        struct status_event ev;
        expect(K_WS, doc, strlen(doc), ws_rows[i].code, ws_rows[i].field, &ev);
        status_event_cleanup(&ev);
        free(doc);
    }
}

static void test_whole_documents(void **state)
{
    static const struct { const char *doc; size_t len; int code; const char *field; } rows[] = {
        {"", 0, PROTO_EJSON, ""},
        {" \n\t\r", 4, PROTO_EJSON, ""},
        {"[]", 2, PROTO_ETYPE, ""},
        {"\"x\"", 3, PROTO_ETYPE, ""},
        {"null", 4, PROTO_ETYPE, ""},
        {"123", 3, PROTO_ETYPE, ""},
        {"{", 1, PROTO_EJSON, ""},
        {"{}", 2, PROTO_EMISSING, "event"},
        {"{\"data\":5}", 10, PROTO_EMISSING, "event"},
        {"{\"event\":\"request.status.updated\"}", 34, PROTO_EMISSING, "data"},
        {"{\"event\":\"request.status.updated\",\"data\":[]}", 44, PROTO_ETYPE, "data"},
        {"{\"data\":{\"event\":\"request.status.updated\"}}", 43, PROTO_EMISSING, "data.data"},
        {"{\"data\":{\"event\":\"x\",\"data\":{}}}", 32, PROTO_EEVENT, "data.event"},
        {"{\"type\":5}", 10, PROTO_ETYPE, "type"},
        {"\xef\xbb\xbf{}", 5, PROTO_EJSON, ""},
        {"{} x", 4, PROTO_EJSON, ""},
        {"{}{}", 4, PROTO_EJSON, ""},
        {"{} ", 3, PROTO_EMISSING, "event"},
        {"{\"a\":1,}", 8, PROTO_EJSON, ""},
        {"{,}", 3, PROTO_EJSON, ""},
        {"{\"a\"}", 5, PROTO_EJSON, ""},
        {"{\"a\":}", 6, PROTO_EJSON, ""},
        {"{1:2}", 5, PROTO_EJSON, ""},
        {"{\"a\":-}", 7, PROTO_EJSON, ""},
        {"{\"a\":1}\0", 8, PROTO_EJSON, ""},
        {"{\"a\":\"x\0y\"}", 11, PROTO_EJSON, ""},
        {"\0{}", 3, PROTO_EJSON, ""},
        {"{\"type\":\"connection\",\"status\":\"ready\"}\0", 39, PROTO_EJSON, ""},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct status_event ev;
        expect(K_WS, rows[i].doc, rows[i].len, rows[i].code, rows[i].field, &ev);
        status_event_cleanup(&ev);
    }
}

static void test_flags_and_reasons(void **state)
{
    static const struct { const char *from, *to, *fail, *refund; unsigned flags; } rows[] = {
        {NULL, NULL, "N/A", "N/A", 0},
        {"\"status\":\"pending\"", "\"status\":\"partially_filled\"", "N/A", "N/A",
         PROTO_F_UNKNOWN_STATUS},
        {"\"txHashes\":[]", "\"txHashes\":[],\"failReason\":null,\"refundFailReason\":null",
         "N/A", "N/A", PROTO_HAS_REASONS},
        {"\"txHashes\":[]", "\"txHashes\":[],\"failReason\":\"\"", "N/A", "N/A",
         PROTO_HAS_REASONS},
        {"\"txHashes\":[]", "\"txHashes\":[],\"failReason\":\"SLIPPAGE\"", "SLIPPAGE", "N/A",
         PROTO_HAS_REASONS},
        {"\"txHashes\":[]", "\"txHashes\":[],\"failReason\":\"BRAND_NEW_REASON\"",
         "BRAND_NEW_REASON", "N/A", PROTO_HAS_REASONS | PROTO_F_UNKNOWN_FAIL_REASON},
        {"\"txHashes\":[]", "\"txHashes\":[],\"refundFailReason\":\"SLIPPAGE\"", "N/A", "SLIPPAGE",
         PROTO_HAS_REASONS | PROTO_F_UNKNOWN_REFUND_REASON},
        {"\"txHashes\":[]", "\"txHashes\":[],\"details\":null,\"referrer\":null,"
                            "\"depositAddress\":null,\"quoteCreatedAt\":null",
         "N/A", "N/A",
         PROTO_HAS_DETAILS | PROTO_HAS_REFERRER | PROTO_HAS_DEPOSIT | PROTO_HAS_QUOTE_CREATED},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        char *doc = subst(WS_BASE, rows[i].from, rows[i].to);
        struct status_event ev;
        expect(K_WS, doc, strlen(doc), 0, NULL, &ev);
        assert_string_equal(ev.fail_reason, rows[i].fail);
        assert_string_equal(ev.refund_fail_reason, rows[i].refund);
        assert_int_equal(ev.flags & ~(unsigned)(PROTO_HAS_IN_TXS | PROTO_HAS_OUT_TXS),
                         rows[i].flags);
        if (rows[i].flags & PROTO_F_UNKNOWN_STATUS) {
            assert_string_equal(ev.status, "partially_filled"); /* kept verbatim */
            assert_int_equal(ev.st, PROTO_ST_OTHER);
        }
        status_event_cleanup(&ev);
        free(doc);
    }
    /* duplicates within a list are dropped, order kept */
    char *doc = subst(WS_BASE, "[\"0xaa\"]", "[\"0xbb\",\"0xaa\",\"0xbb\"]");
    struct status_event ev;
    expect(K_WS, doc, strlen(doc), 0, NULL, &ev);
    assert_int_equal(ev.in_tx_hashes.n, 2);
    assert_string_equal(ev.in_tx_hashes.v[0], "0xbb");
    assert_string_equal(ev.in_tx_hashes.v[1], "0xaa");
    status_event_cleanup(&ev);
    free(doc);
}

/* ---- sizes: 1 MB strings, deep nesting, long lists --------------------------------------- */

static void test_big_inputs(void **state)
{
    struct status_event ev;
    (void)state;
    /* 1,000,000-byte details: accepted, cut to PROTO_MAX_STR and flagged */
    char *big = repeat("a", 1000000), *to = malloc(1000100);
    snprintf(to, 1000100, "\"txHashes\":[],\"details\":\"%s\"", big);
    char *doc = subst(WS_BASE, "\"txHashes\":[]", to);
    expect(K_WS, doc, strlen(doc), 0, NULL, &ev);
    assert_int_equal(strlen(ev.details), PROTO_MAX_STR);
    assert_true(ev.flags & PROTO_F_DETAILS_TRUNCATED);
    status_event_cleanup(&ev);
    free(doc);
    /* multi-byte text is cut on a character boundary */
    char *e = repeat("\xc3\xa9", 400000);
    snprintf(to, 1000100, "\"txHashes\":[],\"details\":\"x%s\"", e);
    doc = subst(WS_BASE, "\"txHashes\":[]", to);
    expect(K_WS, doc, strlen(doc), 0, NULL, &ev);
    assert_int_equal(strlen(ev.details), PROTO_MAX_STR - 1);
    assert_int_equal(utf8_seq((const unsigned char *)ev.details + PROTO_MAX_STR - 3, 2), 2);
    status_event_cleanup(&ev);
    free(doc);
    free(e);
    /* 1 MB referrer, status, hash, request id: too long */
    static const struct { const char *from, *fmt, *field; } rows[] = {
        {"\"txHashes\":[]", "\"txHashes\":[],\"referrer\":\"%s\"", "data.referrer"},
        {"\"status\":\"pending\"", "\"status\":\"%s\"", "data.status"},
        {"\"txHashes\":[]", "\"txHashes\":[\"%s\"]", "data.txHashes"},
        {"\"requestId\":\"0xd75b\"", "\"requestId\":\"%s\"", "data.requestId"},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        fill(to, 1000100, rows[i].fmt, big);
        doc = subst(WS_BASE, rows[i].from, to);
        expect(K_WS, doc, strlen(doc), PROTO_ETOOLONG, rows[i].field, &ev);
        free(doc);
    }
    /* over PROTO_MAX_INPUT: refused before parsing */
    char *huge = repeat(" ", PROTO_MAX_INPUT + 1);
    expect(K_WS, huge, PROTO_MAX_INPUT + 1, PROTO_ETOOLONG, "", &ev);
    expect(K_STATUS, huge, PROTO_MAX_INPUT + 1, PROTO_ETOOLONG, "", &ev);
    expect(K_RECORD, huge, PROTO_MAX_INPUT + 1, PROTO_ETOOLONG, "", &ev);
    free(huge);
    free(big);
    free(to);
}

static void test_nesting(void **state)
{
    struct status_event ev;
    struct proto_err err;
    (void)state;
    /* 10,000 deep: rejected without recursing that far */
    char *open = repeat("[", 10000), *close = repeat("]", 10000), *to = malloc(20100);
    snprintf(to, 20100, "{\"x\":%s%s,\"event\"", open, close);
    char *doc = subst(WS_BASE, "{\"event\"", to);
    memset(&err, 0, sizeof(err));
    assert_int_equal(proto_normalize_ws(doc, strlen(doc), 1, NULL, &ev, &err), PROTO_EJSON);
    assert_non_null(strstr(err.msg, "nesting too deep"));
    free(doc);
    /* objects too */
    char *objs = repeat("{\"a\":", 10000);
    expect(K_WS, objs, strlen(objs), PROTO_EJSON, "", &ev);
    free(objs);
    /* exactly PROTO_MAX_DEPTH levels (root object + 127 arrays) is fine, one more is not */
    for (int extra = 0; extra <= 1; extra++) {
        int n = PROTO_MAX_DEPTH - 1 + extra;
        snprintf(to, 20100, "{\"x\":%.*s%.*s,\"event\"", n, open, n, close);
        doc = subst(WS_BASE, "{\"event\"", to);
        expect(K_WS, doc, strlen(doc), extra ? PROTO_EJSON : 0, NULL, &ev);
        status_event_cleanup(&ev);
        free(doc);
    }
    free(open);
    free(close);
    free(to);
}

static void test_hash_count(void **state)
{
    (void)state;
    for (int n = 63; n <= 66; n++) {
        char list[4096] = "[", item[32];
        for (int i = 0; i < n; i++) {
            snprintf(item, sizeof(item), "%s\"0x%02x\"", i ? "," : "", i);
            strcat(list, item);
        }
        strcat(list, "]");
        char *doc = subst(WS_BASE, "[\"0xaa\"]", list);
        struct status_event ev;
        expect(K_WS, doc, strlen(doc), n <= PROTO_MAX_HASHES ? 0 : PROTO_ETOOLONG,
               "data.inTxHashes", &ev);
        if (n <= PROTO_MAX_HASHES)
            assert_int_equal(ev.in_tx_hashes.n, n);
        status_event_cleanup(&ev);
        free(doc);
    }
}

/* ---- status v3 and webhook ----------------------------------------------------------------- */

static void test_status_and_webhook(void **state)
{
    struct status_event ev;
    struct proto_err err;
    (void)state;
    static const char body[] = "{\"status\":\"pending\",\"updatedAt\":5}";
    assert_int_equal(proto_normalize_status_v3(body, strlen(body), NULL, 1, &ev, &err),
                     PROTO_EMISSING);
    assert_int_equal(proto_normalize_status_v3(body, strlen(body), "bad id", 1, &ev, &err),
                     PROTO_EVALUE);
    assert_string_equal(err.field, "requestId");
    assert_int_equal(proto_normalize_status_v3(body, strlen(body), "r9", 1, &ev, &err), 0);
    assert_string_equal(ev.request_id, "r9");
    assert_int_equal(ev.source, PROTO_SRC_POLL);
    status_event_cleanup(&ev);
    /* a requestId inside a status body is ignored: the query key is authoritative */
    static const char body2[] = "{\"status\":\"pending\",\"updatedAt\":5,\"requestId\":\"other\"}";
    assert_int_equal(proto_normalize_status_v3(body2, strlen(body2), "r9", 1, &ev, &err), 0);
    assert_string_equal(ev.request_id, "r9");
    status_event_cleanup(&ev);

    static const struct { const char *doc; int code; const char *field; } rows[] = {
        {"{\"event\":\"request.status.updated\",\"timestamp\":9,\"data\":{\"status\":\"success\","
         "\"updatedAt\":5,\"requestId\":\"r1\"}}",
         0, NULL},
        {"{\"event\":\"request.status.updated\",\"data\":{\"status\":\"success\","
         "\"updatedAt\":5,\"requestId\":\"r1\"}}",
         0, NULL},
        {"{\"event\":\"request.created\",\"data\":{}}", PROTO_EEVENT, "event"},
        {"{\"data\":{}}", PROTO_EMISSING, "event"},
        {"{\"event\":\"request.status.updated\"}", PROTO_EMISSING, "data"},
        {"{\"event\":\"request.status.updated\",\"data\":\"x\"}", PROTO_ETYPE, "data"},
        {"{\"event\":\"request.status.updated\",\"timestamp\":\"9\",\"data\":{\"status\":"
         "\"success\",\"updatedAt\":5,\"requestId\":\"r1\"}}",
         PROTO_ETYPE, "timestamp"},
        {"{\"event\":\"request.status.updated\",\"data\":{\"status\":\"success\",\"updatedAt\":5}}",
         PROTO_EMISSING, "data.requestId"},
        {"[]", PROTO_ETYPE, ""},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        expect(K_WEBHOOK, rows[i].doc, strlen(rows[i].doc), rows[i].code, rows[i].field, &ev);
        if (rows[i].code == 0) {
            assert_int_equal(ev.source, PROTO_SRC_WEBHOOK);
            assert_int_equal(ev.published_at, i == 0 ? 9 : 0);
        }
        status_event_cleanup(&ev);
    }
}

/* ---- details of any JSON type ---------------------------------------------------------------- */

static void test_details_json(void **state)
{
    static const struct { const char *in, *out; unsigned flags; } rows[] = {
        {"\"text\"", "text", 0},
        {"\"{\\\"a\\\":1}\"", "{\"a\":1}", 0}, /* a string holding JSON stays a string */
        {"{\"revert\": \"0x08c379a0\",\n\t\"gas\" : [ 21000 , 1.5e3 ] }",
         "{\"revert\":\"0x08c379a0\",\"gas\":[21000,1.5e3]}", PROTO_HAS_DETAILS_JSON},
        {"[ ]", "[]", PROTO_HAS_DETAILS_JSON},
        {"{}", "{}", PROTO_HAS_DETAILS_JSON},
        {"-0.5", "-0.5", PROTO_HAS_DETAILS_JSON},
        {"123456789012345678901234567890", "123456789012345678901234567890",
         PROTO_HAS_DETAILS_JSON},
        {"true", "true", PROTO_HAS_DETAILS_JSON},
        {"false", "false", PROTO_HAS_DETAILS_JSON},
        /* inside strings nothing changes: spaces, escapes (kept as written), quotes */
        {"{\"a b\" : \"c \\\" d\\u00e9\\n\", \"e\":[\" \"]}",
         "{\"a b\":\"c \\\" d\\u00e9\\n\",\"e\":[\" \"]}", PROTO_HAS_DETAILS_JSON},
        {"{\"x\\\\\":[1]}", "{\"x\\\\\":[1]}", PROTO_HAS_DETAILS_JSON},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        char to[512];
        snprintf(to, sizeof(to), "\"txHashes\":[],\"details\":%s", rows[i].in);
        char *doc = subst(WS_BASE, "\"txHashes\":[]", to);
        struct status_event ev;
        expect(K_WS, doc, strlen(doc), 0, NULL, &ev);
        assert_string_equal(ev.details, rows[i].out);
        assert_int_equal(ev.flags & (PROTO_HAS_DETAILS_JSON | PROTO_F_DETAILS_TRUNCATED),
                         rows[i].flags);
        assert_true(ev.flags & PROTO_HAS_DETAILS);
        /* the record keeps the value and its type; upstream shapes write it verbatim */
        size_t len;
        ev.created_at = 7; /* the webhook "timestamp" */
        char *rec = proto_event_record(&ev, &len), *w = proto_event_webhook_body(&ev, &len);
        struct status_event back;
        struct proto_err err;
        expect(K_RECORD, rec, strlen(rec), 0, NULL, &back);
        assert_true(status_event_equal(&ev, &back));
        char *rec2 = proto_event_record(&back, &len);
        assert_string_equal(rec, rec2);
        if (rows[i].flags) {
            char want[512];
            snprintf(want, sizeof(want), "\"details\":%s,", rows[i].out);
            assert_non_null(strstr(rec, want));
            assert_non_null(strstr(w, want));
        }
        status_event_cleanup(&back);
        assert_int_equal(proto_normalize_webhook(w, strlen(w), 1, &back, &err), 0);
        assert_string_equal(back.details, ev.details);
        assert_int_equal(back.flags & PROTO_HAS_DETAILS_JSON, rows[i].flags);
        status_event_cleanup(&back);
        free(rec);
        free(rec2);
        free(w);
        status_event_cleanup(&ev);
        free(doc);
    }
    /* status v3 bodies too */
    static const char v3[] = "{\"status\":\"failure\",\"details\":{\"code\": 3},\"updatedAt\":5}";
    struct status_event ev;
    expect(K_STATUS, v3, strlen(v3), 0, NULL, &ev);
    assert_string_equal(ev.details, "{\"code\":3}");
    assert_true(ev.flags & PROTO_HAS_DETAILS_JSON);
    size_t len;
    char *out = proto_event_status_v3(&ev, &len);
    assert_string_equal(out, "{\"status\":\"failure\",\"details\":{\"code\":3},\"inTxHashes\":[],"
                             "\"txHashes\":[],\"updatedAt\":5,\"originChainId\":null,"
                             "\"destinationChainId\":null,\"failReason\":\"UNKNOWN\","
                             "\"refundFailReason\":\"N/A\"}");
    free(out);
    status_event_cleanup(&ev);

    /* over PROTO_MAX_STR (compact): a plain string of its first bytes, cut on a character */
    char *big = malloc(PROTO_MAX_STR * 3 + 100), *to = malloc(PROTO_MAX_STR * 3 + 200);
    strcpy(big, "[\"x");
    for (int i = 0; i < PROTO_MAX_STR; i++)
        memcpy(big + 3 + 2 * i, "\xc3\xa9", 2);
    strcpy(big + 3 + 2 * PROTO_MAX_STR, "\"]");
    snprintf(to, PROTO_MAX_STR * 3 + 200, "\"txHashes\":[],\"details\":  %s", big);
    char *doc = subst(WS_BASE, "\"txHashes\":[]", to);
    expect(K_WS, doc, strlen(doc), 0, NULL, &ev);
    assert_int_equal(strlen(ev.details), PROTO_MAX_STR - 1); /* [" x, then whole é pairs */
    assert_memory_equal(ev.details, "[\"x\xc3\xa9", 5);
    assert_int_equal(ev.flags & (PROTO_HAS_DETAILS_JSON | PROTO_F_DETAILS_TRUNCATED),
                     PROTO_F_DETAILS_TRUNCATED);
    status_event_cleanup(&ev);
    free(doc);
    /* exactly PROTO_MAX_STR compact bytes (whitespace does not count): kept as JSON */
    memset(big, 0, 8);
    big[0] = '[';
    memset(big + 1, '1', PROTO_MAX_STR - 2);
    big[PROTO_MAX_STR - 1] = ']';
    big[PROTO_MAX_STR] = '\0';
    snprintf(to, PROTO_MAX_STR * 3 + 200, "\"txHashes\":[],\"details\":\n%s ", big);
    doc = subst(WS_BASE, "\"txHashes\":[]", to);
    expect(K_WS, doc, strlen(doc), 0, NULL, &ev);
    assert_string_equal(ev.details, big);
    assert_int_equal(ev.flags & (PROTO_HAS_DETAILS_JSON | PROTO_F_DETAILS_TRUNCATED),
                     PROTO_HAS_DETAILS_JSON);
    status_event_cleanup(&ev);
    free(doc);
    /* nested up to PROTO_MAX_JSON_DEPTH: JSON; deeper: a plain string of the same text */
    for (int extra = 0; extra <= 1; extra++) {
        int d = PROTO_MAX_JSON_DEPTH + extra;
        char *open = repeat("[", (size_t)d), *close = repeat("]", (size_t)d);
        snprintf(to, PROTO_MAX_STR * 3 + 200, "\"txHashes\":[],\"details\":{\"a\":%.*s\"[{\"%.*s}",
                 d - 1, open, d - 1, close);
        doc = subst(WS_BASE, "\"txHashes\":[]", to);
        expect(K_WS, doc, strlen(doc), 0, NULL, &ev);
        assert_int_equal(pjson_text_depth(ev.details, strlen(ev.details)), d);
        assert_int_equal(ev.flags & (PROTO_HAS_DETAILS_JSON | PROTO_F_DETAILS_TRUNCATED),
                         extra ? 0 : PROTO_HAS_DETAILS_JSON);
        status_event_cleanup(&ev);
        free(doc);
        free(open);
        free(close);
    }
    /* a record never holds more than PROTO_MAX_STR */
    snprintf(to, PROTO_MAX_STR * 3 + 200,
             "{\"requestId\":\"r1\",\"status\":\"pending\",\"updatedAt\":1,\"originChainId\":0,"
             "\"destinationChainId\":0,\"inTxHashes\":[],\"txHashes\":[],\"failReason\":null,"
             "\"refundFailReason\":null,\"details\":[%s],\"referrer\":null,"
             "\"depositAddress\":null,\"quoteCreatedAt\":0,\"flags\":0,\"source\":\"ws\","
             "\"observedAt\":0,\"publishedAt\":0,\"eventId\":\"\",\"seq\":0,"
             "\"previousStatus\":null,\"createdAt\":0}", big);
    expect(K_RECORD, to, strlen(to), PROTO_ETOOLONG, "details", &ev);
    free(big);
    free(to);
}

/* ---- /requests/v3 ---------------------------------------------------------------------------- */

struct page_seen {
    int n;
    int rc[8];
    struct status_event ev[8];
    char field[8][64];
};

static void on_item(void *arg, int rc, struct status_event *ev, const struct proto_err *err)
{
    struct page_seen *ps = arg;
    assert_true(ps->n < 8);
    ps->rc[ps->n] = rc;
    snprintf(ps->field[ps->n], 64, "%s", rc != 0 ? err->field : "");
    ps->ev[ps->n] = *ev; /* take it over (the walker cleans what is left: nothing) */
    status_event_init(ev);
    ps->n++;
}

static void page_seen_free(struct page_seen *ps)
{
    for (int i = 0; i < ps->n; i++)
        status_event_cleanup(&ps->ev[i]);
    ps->n = 0;
}

static void test_requests_page_fixture(void **state)
{
    struct page_seen ps = {0};
    struct proto_err err;
    char *cont = (char *)1;
    size_t n;
    (void)state;
    char *text = fixture("requests_v3_page.json", &n);
    assert_int_equal(proto_normalize_requests_page(text, n, 77, on_item, &ps, &cont, &err), 0);
    assert_string_equal(cont, "eyJ1cGRhdGVkQXQiOiIyMDI2LTA4LTE4VDE0OjA2OjQwLjU1MVoiLCJp"
                              "ZCI6IjB4ZjEifQ==");
    free(cont);
    assert_int_equal(ps.n, 4);
    static const struct {
        const char *id, *status, *fail, *refund, *referrer, *dep_type;
        int64_t updated, created, origin, dest;
        size_t n_in, n_out;
    } want[] = {
        {"0xff9243a8f506b40928b5b7a767c76fb008f86bebb2737f6a6f0fb23c6f5da2ce", "success", "N/A",
         "N/A", NULL, NULL, 1787049674337, 1787049650912, 137, 8453, 1, 1},
        {"0xe3692f09e2e8c662248b483b7ffc050fec94dbca3a0aac36098b2cc2bd818319", "refund",
         "DEPOSITED_AMOUNT_TOO_LOW_TO_FILL", "N/A", "example-app", "strict", 1787051425518,
         1787051371004, 8453, 42161, 1, 1},
        {"0x2bd36cb9d21f6be6abf0d7c1c1e21862ab8a18a8902073fec8df4f50947aaeb2", "pending", "N/A",
         "N/A", NULL, NULL, 1787058813418, 1787058800118, 792703809, 8453, 1, 0},
        {"0x2cbe54014c2b54b95523cf6941fa1c257c6f561c5cb347611a3ce9d97dcbee50", "failure",
         "SLIPPAGE", "AMOUNT_TOO_LOW_TO_REFUND", NULL, NULL, 1787062000551, 1787061951004, 8453,
         8453, 1, 0},
    };
    for (int i = 0; i < 4; i++) {
        const struct status_event *ev = &ps.ev[i];
        assert_int_equal(ps.rc[i], 0);
        assert_string_equal(ev->request_id, want[i].id);
        assert_string_equal(ev->status, want[i].status);
        assert_string_equal(ev->fail_reason, want[i].fail);
        assert_string_equal(ev->refund_fail_reason, want[i].refund);
        assert_int_equal(ev->updated_at, want[i].updated);
        assert_int_equal(ev->quote_created_at, want[i].created);
        assert_int_equal(ev->origin_chain_id, want[i].origin);
        assert_int_equal(ev->destination_chain_id, want[i].dest);
        assert_int_equal(ev->in_tx_hashes.n, want[i].n_in);
        assert_int_equal(ev->tx_hashes.n, want[i].n_out);
        assert_int_equal(ev->source, PROTO_SRC_REQUESTS);
        assert_int_equal(ev->observed_at, 77);
        assert_int_equal(ev->published_at, 0);
        assert_true(ev->flags & PROTO_HAS_REASONS); /* null in v3: present */
        assert_true(ev->flags & PROTO_HAS_DEPOSIT);
        assert_int_equal(ev->flags & 0xff, 0);
        if (want[i].referrer != NULL)
            assert_string_equal(ev->referrer, want[i].referrer);
        else
            assert_null(ev->referrer);
        if (want[i].dep_type != NULL) {
            assert_string_equal(ev->deposit->type, want[i].dep_type);
            assert_non_null(ev->deposit->depositor);
            assert_non_null(ev->deposit->deposit_tx_hash);
        } else {
            assert_null(ev->deposit);
        }
    }
    assert_int_equal(strlen(ps.ev[2].in_tx_hashes.v[0]), 88); /* base58 signature */
    page_seen_free(&ps);
    free(text);
}

static void test_requests_page_rows(void **state)
{
    static const char ok_item[] = "{\"id\":\"r1\",\"status\":\"pending\",\"updatedAt\":"
                                  "\"2026-08-18T10:41:14.337Z\"}";
    static const struct { const char *fmt; int code; const char *field; int items; } rows[] = {
        {"{\"requests\":[]}", 0, NULL, 0},
        {"{\"requests\":[],\"continuation\":null}", 0, NULL, 0},
        {"{\"requests\":[],\"continuation\":\"\"}", 0, NULL, 0},
        {"{\"requests\":[%s,%s],\"continuation\":\"abc\",\"total\":2}", 0, NULL, 2},
        {"{\"requests\":[],\"continuation\":5}", PROTO_ETYPE, "continuation", 0},
        {"{}", PROTO_EMISSING, "requests", 0},
        {"{\"requests\":{}}", PROTO_ETYPE, "requests", 0},
        {"[]", PROTO_ETYPE, "", 0},
        {"{\"requests\":[%s,", PROTO_EJSON, "", 0},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        char buf[512];
        struct page_seen ps = {0};
        struct proto_err err;
        char *cont = (char *)1;
        fill(buf, sizeof(buf), rows[i].fmt, ok_item);
        int rc = proto_normalize_requests_page(buf, strlen(buf), 1, on_item, &ps, &cont, &err);
        assert_int_equal(rc, rows[i].code);
        if (rc != 0)
            assert_string_equal(err.field, rows[i].field);
        assert_int_equal(ps.n, rows[i].items);
        if (rc == 0 && strstr(buf, "\"abc\"") != NULL)
            assert_string_equal(cont, "abc");
        else
            assert_null(cont);
        free(cont);
        page_seen_free(&ps);
    }
    /* a bad item is reported with its index and does not stop the walk */
    char buf[512];
    struct page_seen ps = {0};
    struct proto_err err;
    char *cont;
    snprintf(buf, sizeof(buf), "{\"requests\":[{\"id\":\"r0\"},%s,7]}", ok_item);
    assert_int_equal(proto_normalize_requests_page(buf, strlen(buf), 1, on_item, &ps, &cont, &err),
                     0);
    assert_int_equal(ps.n, 3);
    assert_int_equal(ps.rc[0], PROTO_EMISSING);
    assert_string_equal(ps.field[0], "requests[0].status");
    assert_null(ps.ev[0].request_id);
    assert_int_equal(ps.rc[1], 0);
    assert_string_equal(ps.ev[1].request_id, "r1");
    assert_int_equal(ps.rc[2], PROTO_ETYPE);
    assert_string_equal(ps.field[2], "requests[2].");
    page_seen_free(&ps);
    /* the cursor is optional for the caller */
    snprintf(buf, sizeof(buf), "{\"requests\":[%s],\"continuation\":\"c\"}", ok_item);
    assert_int_equal(proto_normalize_requests_page(buf, strlen(buf), 1, on_item, &ps, NULL, &err),
                     0);
    assert_int_equal(ps.n, 1);
    page_seen_free(&ps);
}

static const char ITEM_BASE[] =
    "{\"id\":\"0xabc\",\"status\":\"success\",\"createdAt\":\"2026-08-18T10:40:50.912Z\","
    "\"updatedAt\":\"2026-08-18T10:41:14.337Z\",\"depositAddress\":null,\"data\":{\"failReason\":"
    "null,\"refundFailReason\":null,\"inTxs\":[{\"txHash\":\"0x01\",\"chainId\":10,\"timestamp\":"
    "1787040071}],\"outTxs\":[{\"txHash\":\"0x02\",\"chainId\":8453}]}}";

static void test_requests_item_rows(void **state)
{
    static const struct {
        const char *from, *to;
        int code;
        const char *field;
        int64_t origin, dest;
    } rows[] = {
        {NULL, NULL, 0, NULL, 10, 8453},
        {"\"updatedAt\":\"2026-08-18T10:41:14.337Z\"", "\"updatedAt\":1787049674337", PROTO_ETYPE,
         "updatedAt", 0, 0},
        {"\"updatedAt\":\"2026-08-18T10:41:14.337Z\"", "\"updatedAt\":\"2026-13-01T00:00:00Z\"",
         PROTO_EVALUE, "updatedAt", 0, 0},
        {"\"updatedAt\":\"2026-08-18T10:41:14.337Z\"", "\"updatedAt\":\"1969-12-31T23:59:59.999Z\"",
         PROTO_ERANGE, "updatedAt", 0, 0},
        {"\"updatedAt\":\"2026-08-18T10:41:14.337Z\",", "", PROTO_EMISSING, "updatedAt", 0, 0},
        {"\"createdAt\":\"2026-08-18T10:40:50.912Z\"", "\"createdAt\":\"yesterday\"", PROTO_EVALUE,
         "createdAt", 0, 0},
        {"\"createdAt\":\"2026-08-18T10:40:50.912Z\"", "\"createdAt\":null", 0, NULL, 10, 8453},
        {"\"id\":\"0xabc\",", "", PROTO_EMISSING, "id", 0, 0},
        {"\"id\":\"0xabc\"", "\"id\":\"0x abc\"", PROTO_EVALUE, "id", 0, 0},
        {"\"status\":\"success\"", "\"status\":7", PROTO_ETYPE, "status", 0, 0},
        {"\"data\":{\"failReason\"", "\"data\":5,\"x\":{\"failReason\"", PROTO_ETYPE, "data", 0,
         0},
        {"\"failReason\":null", "\"failReason\":\"x y\"", PROTO_EVALUE, "data.failReason", 0, 0},
        {"\"refundFailReason\":null", "\"refundFailReason\":[]", PROTO_ETYPE,
         "data.refundFailReason", 0, 0},
        {"{\"txHash\":\"0x01\",", "{\"txHash\":5,", PROTO_ETYPE, "data.inTxs", 0, 0},
        {"{\"txHash\":\"0x01\",", "{\"txHash\":\"0 1\",", PROTO_EVALUE, "data.inTxs", 0, 0},
        {"{\"txHash\":\"0x01\",", "{\"txHash\":null,", 0, NULL, 10, 8453},
        {"[{\"txHash\":\"0x01\",\"chainId\":10,", "[7,{\"chainId\":10,", PROTO_ETYPE,
         "data.inTxs", 0, 0},
        {"\"outTxs\":[", "\"outTxs\":{\"a\":[", PROTO_EJSON, "", 0, 0},
        {"\"outTxs\":[{\"txHash\":\"0x02\",\"chainId\":8453}]", "\"outTxs\":\"x\"", PROTO_ETYPE,
         "data.outTxs", 10, 0},
        {"\"depositAddress\":null",
         "\"depositAddress\":{\"address\":\"0x1\",\"type\":\"open\",\"depositor\":null,"
         "\"depositTxHash\":null,\"recoveryAddress\":\"0x2\"}",
         0, NULL, 10, 8453},
        {"\"depositAddress\":null", "\"depositAddress\":{\"type\":\"\"}", PROTO_EVALUE,
         "depositAddress.type", 0, 0},
        /* chain ids: the quoted route wins over the transactions */
        {"\"failReason\":null",
         "\"route\":{\"quoted\":{\"origin\":{\"inputCurrency\":{\"currency\":{\"chainId\":1}}},"
         "\"destination\":{\"outputCurrency\":{\"currency\":{\"chainId\":\"x\"}},"
         "\"inputCurrency\":{\"currency\":{\"chainId\":42161}}}}},\"failReason\":null",
         0, NULL, 1, 42161},
        /* same-chain swap: no destination side */
        {"\"failReason\":null",
         "\"route\":{\"quoted\":{\"origin\":{\"outputCurrency\":{\"currency\":{\"chainId\":"
         "56}}}}},\"failReason\":null",
         0, NULL, 56, 56},
        /* junk in the route is skipped, not fatal */
        {"\"failReason\":null", "\"route\":{\"quoted\":[1]},\"failReason\":null", 0, NULL, 10,
         8453},
        {"\"failReason\":null", "\"route\":{\"quoted\":{\"origin\":{\"inputCurrency\":{"
                                "\"currency\":{\"chainId\":0}}}}},\"failReason\":null",
         0, NULL, 10, 8453},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        char *doc = subst(ITEM_BASE, rows[i].from, rows[i].to);
        struct status_event ev;
        expect(K_ITEM, doc, strlen(doc), rows[i].code, rows[i].field, &ev);
        if (rows[i].code == 0) {
            assert_int_equal(ev.origin_chain_id, rows[i].origin);
            assert_int_equal(ev.destination_chain_id, rows[i].dest);
            assert_int_equal(ev.source, PROTO_SRC_REQUESTS);
        }
        status_event_cleanup(&ev);
        free(doc);
    }
    /* no data at all: reasons N/A but not "present" (absent fields keep the last state) */
    static const char bare[] = "{\"id\":\"r\",\"status\":\"waiting\",\"updatedAt\":"
                               "\"2026-08-18T10:41:14Z\"}";
    struct status_event ev;
    expect(K_ITEM, bare, strlen(bare), 0, NULL, &ev);
    assert_string_equal(ev.fail_reason, "N/A");
    assert_int_equal(ev.flags, 0);
    assert_int_equal(ev.updated_at, 1787049674000);
    status_event_cleanup(&ev);
}

/* Reorg details: when they are kept, and their exact text. */
static void test_requests_reorg(void **state)
{
    static const char base[] =
        "{\"id\":\"0xabc\",\"status\":\"pending\",\"updatedAt\":\"2026-08-18T10:41:14.337Z\","
        "\"data\":{\"failReason\":null,\"inTxs\":[{\"txHash\":\"0x01\",\"chainId\":10,"
        "\"status\":\"success\",\"block\":5},{\"txHash\":\"0x02\",\"chainId\":10,"
        "\"status\":\"success\"}]}}";
    static const char meta[] =
        "{ \"detectedAt\": \"2026-08-18T10:41:00Z\", \"source\": \"indexer\", \"reason\": "
        "\"deposit block orphaned\", \"details\": {\"depth\": 2}, \"failReason\": "
        "\"DEPOSIT_REORGED\", \"action\": \"refund\", \"blockNumber\": 5, \"blockHash\": "
        "\"0xbb\", \"receiptStatus\": null, \"futureField\": [1, \"a b\"] }";
    static const char meta_c[] =
        "{\"detectedAt\":\"2026-08-18T10:41:00Z\",\"source\":\"indexer\",\"reason\":"
        "\"deposit block orphaned\",\"details\":{\"depth\":2},\"failReason\":"
        "\"DEPOSIT_REORGED\",\"action\":\"refund\",\"blockNumber\":5,\"blockHash\":"
        "\"0xbb\",\"receiptStatus\":null,\"futureField\":[1,\"a b\"]}";
    static const char txs_ok[] =
        "{\"inTxs\":[{\"txHash\":\"0x01\",\"chainId\":10,\"status\":\"success\"},"
        "{\"txHash\":\"0x02\",\"chainId\":10,\"status\":\"success\"}],\"metadata\":";
    static const char txs_bad[] =
        "{\"inTxs\":[{\"txHash\":\"0x01\",\"chainId\":10,\"status\":\"failure\"},"
        "{\"txHash\":\"0x02\",\"chainId\":10,\"status\":\"success\"}],\"metadata\":";
    static const struct { const char *from, *to, *head, *tail; } rows[] = {
        {NULL, NULL, NULL, NULL}, /* every inTx succeeded, no metadata: none */
        {"\"status\":\"success\",\"block\":5", "\"status\":\"failure\",\"block\":5", txs_bad,
         "null}"},
        /* metadata at the top level, or under data; unknown fields kept, spacing dropped */
        {"\"data\":{", "\"metadata\":{\"reorg\":%s},\"data\":{", txs_ok, "%s}"},
        {"\"data\":{", "\"data\":{\"metadata\":{\"reorg\":%s},", txs_ok, "%s}"},
        {"\"data\":{", "\"metadata\":{\"reorg\":7},\"data\":{\"metadata\":{\"reorg\":%s},",
         txs_ok, "%s}"},
        {"\"status\":\"success\",\"block\":5",
         "\"status\":\"failure\",\"block\":5},{\"txHash\":\"0x03\"", NULL, NULL},
        /* a reorg that is not an object, or metadata without one: none */
        {"\"data\":{", "\"metadata\":{\"reorg\":null},\"data\":{", NULL, NULL},
        {"\"data\":{", "\"metadata\":[{\"reorg\":{}}],\"data\":{", NULL, NULL},
        {"\"data\":{", "\"data\":{\"metadata\":{\"other\":{}},", NULL, NULL},
        /* an inTx status of another type counts, null does not */
        {"\"status\":\"success\",\"block\":5", "\"status\":null,\"block\":5", NULL, NULL},
        {"\"status\":\"success\",\"block\":5", "\"status\":3", "{\"inTxs\":[{\"txHash\":"
         "\"0x01\",\"chainId\":10,\"status\":3},{\"txHash\":\"0x02\",\"chainId\":10,\"status\":"
         "\"success\"}],\"metadata\":", "null}"},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        char to[1024], want[2048], tail[1024];
        if (rows[i].to != NULL)
            fill(to, sizeof(to), rows[i].to, meta);
        char *doc = subst(base, rows[i].from, rows[i].to != NULL ? to : NULL);
        struct status_event ev;
        expect(K_ITEM, doc, strlen(doc), 0, NULL, &ev);
        if (rows[i].head == NULL && strstr(doc, "0x03") == NULL) {
            assert_null(ev.reorg);
            assert_int_equal(ev.flags & PROTO_HAS_REORG, 0);
        } else if (rows[i].head == NULL) { /* an inTx without chainId and status */
            assert_string_equal(ev.reorg,
                                "{\"inTxs\":[{\"txHash\":\"0x01\",\"chainId\":10,\"status\":"
                                "\"failure\"},{\"txHash\":\"0x03\",\"chainId\":null,\"status\":"
                                "null},{\"txHash\":\"0x02\",\"chainId\":10,\"status\":"
                                "\"success\"}],\"metadata\":null}");
        } else {
            fill(tail, sizeof(tail), rows[i].tail, meta_c);
            snprintf(want, sizeof(want), "%s%s", rows[i].head, tail);
            if (ev.reorg == NULL || strcmp(ev.reorg, want) != 0)
                fail_msg("row %zu: %s\n  want %s", i, ev.reorg, want);
            assert_true(ev.flags & PROTO_HAS_REORG);
            /* valid JSON, and the record keeps it */
            json_t *j = json_loads(ev.reorg, JSON_REJECT_DUPLICATES, NULL);
            assert_non_null(j);
            json_decref(j);
            size_t len;
            char *rec = proto_event_record(&ev, &len);
            struct status_event back;
            expect(K_RECORD, rec, len, 0, NULL, &back);
            assert_true(status_event_equal(&ev, &back));
            status_event_cleanup(&back);
            free(rec);
        }
        status_event_cleanup(&ev);
        free(doc);
    }
    /* no inTxs at all, metadata only */
    char *doc = subst(base, "\"data\":{\"failReason\":null,\"inTxs\"",
                      "\"metadata\":{\"reorg\":{}},\"data\":{\"failReason\":null,\"x\"");
    struct status_event ev;
    expect(K_ITEM, doc, strlen(doc), 0, NULL, &ev);
    assert_string_equal(ev.reorg, "{\"inTxs\":[],\"metadata\":{}}");
    status_event_cleanup(&ev);
    free(doc);
    /* over PROTO_MAX_REORG: dropped, the item itself is fine */
    char *pad = repeat("x", PROTO_MAX_REORG), *to = malloc(PROTO_MAX_REORG + 100);
    snprintf(to, PROTO_MAX_REORG + 100, "\"metadata\":{\"reorg\":{\"p\":\"%s\"}},\"data\":{",
             pad);
    doc = subst(base, "\"data\":{", to);
    expect(K_ITEM, doc, strlen(doc), 0, NULL, &ev);
    assert_null(ev.reorg);
    assert_int_equal(ev.flags & PROTO_HAS_REORG, 0);
    assert_int_equal(ev.in_tx_hashes.n, 2);
    status_event_cleanup(&ev);
    free(doc);
    /* just under the bound: kept (the text is PROTO_MAX_REORG bytes exactly) */
    size_t fixed = strlen(txs_ok) + strlen("{\"p\":\"\"}}");
    snprintf(to, PROTO_MAX_REORG + 100, "\"metadata\":{\"reorg\":{\"p\":\"%.*s\"}},\"data\":{",
             (int)(PROTO_MAX_REORG - fixed), pad);
    doc = subst(base, "\"data\":{", to);
    expect(K_ITEM, doc, strlen(doc), 0, NULL, &ev);
    assert_non_null(ev.reorg);
    assert_int_equal(strlen(ev.reorg), PROTO_MAX_REORG);
    /* the webhook body carries it inside "statusrelay", after "flags" */
    ev.created_at = 1;
    ev.flags |= PROTO_F_UNKNOWN_STATUS;
    size_t len;
    char *w = proto_event_webhook_body(&ev, &len);
    assert_non_null(strstr(w, "\"flags\":[\"unknownStatus\"],\"reorg\":{\"inTxs\":["));
    free(w);
    status_event_cleanup(&ev);
    free(doc);
    free(pad);
    free(to);
    /* nested deeper than PROTO_MAX_JSON_DEPTH in all: dropped; a record with such is refused */
    for (int extra = 0; extra <= 1; extra++) {
        int d = PROTO_MAX_JSON_DEPTH - 2 + extra; /* the text adds two levels */
        char *open = repeat("[", (size_t)d), *close = repeat("]", (size_t)d);
        to = malloc(512);
        snprintf(to, 512, "\"metadata\":{\"reorg\":{\"deep\":%s%s}},\"data\":{", open, close);
        doc = subst(base, "\"data\":{", to);
        expect(K_ITEM, doc, strlen(doc), 0, NULL, &ev);
        if (extra) {
            assert_null(ev.reorg);
        } else {
            assert_non_null(ev.reorg);
            assert_int_equal(pjson_text_depth(ev.reorg, strlen(ev.reorg)), PROTO_MAX_JSON_DEPTH);
            char *rec = proto_event_record(&ev, &len);
            struct status_event back;
            expect(K_RECORD, rec, len, 0, NULL, &back);
            status_event_cleanup(&back);
            /* one level more inside a record */
            char *deeper = subst(rec, "\"deep\":[", "\"deep\":[[");
            char *d2 = subst(deeper, "]}}", "]]}}");
            expect(K_RECORD, d2, strlen(d2), PROTO_ETOOLONG, "reorg", &back);
            free(d2);
            free(deeper);
            free(rec);
        }
        status_event_cleanup(&ev);
        free(doc);
        free(to);
        free(open);
        free(close);
    }
    /* a page passes them on per item */
    static const char page[] =
        "{\"requests\":[{\"id\":\"a\",\"status\":\"refund\",\"updatedAt\":\"2026-08-18T10:41:14Z\","
        "\"data\":{\"metadata\":{\"reorg\":{\"action\":\"refund\"}},\"inTxs\":[{\"txHash\":"
        "\"0x1\",\"status\":\"failure\"}]}},{\"id\":\"b\",\"status\":\"success\","
        "\"updatedAt\":\"2026-08-18T10:41:14Z\"}]}";
    struct page_seen ps = {0};
    struct proto_err err;
    assert_int_equal(proto_normalize_requests_page(page, strlen(page), 1, on_item, &ps, NULL, &err),
                     0);
    assert_int_equal(ps.n, 2);
    assert_string_equal(ps.ev[0].reorg, "{\"inTxs\":[{\"txHash\":\"0x1\",\"chainId\":null,"
                                        "\"status\":\"failure\"}],\"metadata\":{\"action\":"
                                        "\"refund\"}}");
    assert_null(ps.ev[1].reorg);
    page_seen_free(&ps);
}

/* Bitcoin deposits seen only in the mempool: PROTO_F_UNCONFIRMED_DEPOSIT. */
static void test_requests_unconfirmed(void **state)
{
    static const char base[] =
        "{\"id\":\"0xabc\",\"status\":\"pending\",\"updatedAt\":\"2026-08-18T10:41:14.337Z\","
        "\"data\":{\"route\":{\"quoted\":{\"origin\":{\"inputCurrency\":{\"currency\":{"
        "\"chainId\":8253038}}}}},\"inTxs\":[{\"txHash\":\"btc1\",\"chainId\":8253038}]}}";
    static const struct { const char *from, *to; int flagged; } rows[] = {
        {NULL, NULL, 1}, /* no block */
        {"\"chainId\":8253038}]", "\"chainId\":8253038,\"block\":null}]", 1},
        {"\"chainId\":8253038}]", "\"chainId\":8253038,\"block\":0}]", 1},
        {"\"chainId\":8253038}]", "\"chainId\":8253038,\"block\":912345}]", 0},
        {"\"chainId\":8253038}]", "\"chainId\":8253038,\"block\":{\"height\":912345}}]", 0},
        {"\"status\":\"pending\"", "\"status\":\"submitted\"", 0},
        {"\"status\":\"pending\"", "\"status\":\"waiting\"", 0},
        /* the origin-chain inTx is the one that counts */
        {"\"chainId\":8253038}]",
         "\"chainId\":8253038},{\"txHash\":\"x\",\"chainId\":1,\"block\":5}]", 1},
        {"\"chainId\":8253038}]",
         "\"chainId\":8253038},{\"txHash\":\"b2\",\"chainId\":8253038,\"block\":5}]", 0},
        {"\"chainId\":8253038}]", "\"chainId\":1}]", 0}, /* no inTx on the origin chain */
        {"\"chainId\":8253038}}}}}", "\"chainId\":1}}}}}", 0}, /* not a Bitcoin origin */
        {"[{\"txHash\":\"btc1\",\"chainId\":8253038}]", "[]", 0}, /* nothing seen yet */
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        char *doc = subst(base, rows[i].from, rows[i].to);
        struct status_event ev;
        expect(K_ITEM, doc, strlen(doc), 0, NULL, &ev);
        if (!!(ev.flags & PROTO_F_UNCONFIRMED_DEPOSIT) != rows[i].flagged)
            fail_msg("row %zu: %s: flags 0x%x", i, doc, ev.flags);
        status_event_cleanup(&ev);
        free(doc);
    }
}

/* Allocation failure on the new paths: JSON details, reorg details. */
static void test_chaos_additions(void **state)
{
    static const struct { enum kind kind; const char *doc; } rows[] = {
        {K_WS, "{\"event\":\"request.status.updated\",\"data\":{\"status\":\"pending\","
               "\"updatedAt\":5,\"requestId\":\"r1\",\"details\":{\"a\": [1, 2]}}}"},
        {K_ITEM, "{\"id\":\"r1\",\"status\":\"refund\",\"updatedAt\":\"2026-08-18T10:41:14Z\","
                 "\"metadata\":{\"reorg\":{\"action\":\"refund\"}},\"data\":{\"inTxs\":[{"
                 "\"txHash\":\"0x1\",\"status\":\"failure\"}]}}"},
        {K_RECORD, "{\"requestId\":\"r1\",\"status\":\"pending\",\"updatedAt\":1,"
                   "\"originChainId\":0,\"destinationChainId\":0,\"inTxHashes\":[],"
                   "\"txHashes\":[],\"failReason\":null,\"refundFailReason\":null,"
                   "\"details\":[true],\"referrer\":null,\"depositAddress\":null,"
                   "\"quoteCreatedAt\":0,\"flags\":0,\"source\":\"ws\",\"observedAt\":0,"
                   "\"publishedAt\":0,\"eventId\":\"\",\"seq\":0,\"previousStatus\":null,"
                   "\"createdAt\":0,\"reorg\":{\"inTxs\":[],\"metadata\":null}}"},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct status_event ref;
        struct proto_err err;
        struct proto_ws_msg msg;
        size_t len = strlen(rows[i].doc);
        assert_int_equal(run(rows[i].kind, rows[i].doc, len, &msg, &ref, &err), 0);
        assert_true(ref.details != NULL || ref.reorg != NULL);
        long n;
        for (n = 1;; n++) {
            struct status_event ev;
            long live = chaos_live;
            chaos_arm(n);
            int rc = run(rows[i].kind, rows[i].doc, len, &msg, &ev, &err);
            chaos_disarm();
            assert_int_equal(rc != 0, chaos_tripped);
            if (rc != 0) {
                assert_int_equal(rc, PROTO_ENOMEM);
                assert_null(ev.request_id);
            } else {
                assert_true(status_event_equal(&ev, &ref));
            }
            status_event_cleanup(&ev);
            assert_int_equal(chaos_live, live);
            if (rc == 0)
                break;
        }
        assert_true(n > 2);
        status_event_cleanup(&ref);
    }
}

/* ---- ISO-8601 ---------------------------------------------------------------------------- */

static void test_iso8601(void **state)
{
    /* expected values: Python datetime.fromisoformat(...).timestamp() * 1000 */
    static const struct { const char *s; int rc; int64_t ms; } rows[] = {
        {"2026-08-21T10:11:12.345Z", 0, 1787307072345},
        {"2026-08-21T12:11:12.345+02:00", 0, 1787307072345},
        {"2026-08-21T04:41:12.345-05:30", 0, 1787307072345},
        {"2026-08-21T04:41:12.345-0530", 0, 1787307072345},
        {"2026-08-21t10:11:12.345z", 0, 1787307072345},
        {"2026-08-21 10:11:12.345Z", 0, 1787307072345},
        {"2026-08-21T10:11:12.3456789Z", 0, 1787307072345},
        {"2026-08-21T10:11:12.3Z", 0, 1787307072300},
        {"2026-05-25T22:21:51.291Z", 0, 1779747711291},
        {"2024-02-29T00:00:00Z", 0, 1709164800000},
        {"2000-03-01T00:00:00Z", 0, 951868800000},
        {"1970-01-01T00:00:00.001Z", 0, 1},
        {"1969-12-31T23:59:59.999Z", 0, -1},
        {"9999-12-31T23:59:59.999Z", 0, 253402300799999},
        {"2026-08-21T10:11:12", PROTO_EVALUE, 0},
        {"2026-08-21T10:11:12.345", PROTO_EVALUE, 0},
        {"2026-02-29T00:00:00Z", PROTO_EVALUE, 0},
        {"1900-02-29T00:00:00Z", PROTO_EVALUE, 0},
        {"2026-13-01T00:00:00Z", PROTO_EVALUE, 0},
        {"2026-00-01T00:00:00Z", PROTO_EVALUE, 0},
        {"2026-04-31T00:00:00Z", PROTO_EVALUE, 0},
        {"2026-08-21T24:00:00Z", PROTO_EVALUE, 0},
        {"2026-08-21T10:60:00Z", PROTO_EVALUE, 0},
        {"2026-08-21T10:00:60Z", PROTO_EVALUE, 0},
        {"2026-8-21T10:11:12Z", PROTO_EVALUE, 0},
        {"2026-08-21T10:11:12Z ", PROTO_EVALUE, 0},
        {"2026-08-21T10:11:12.Z", PROTO_EVALUE, 0},
        {"2026-08-21T10:11:12.1234567890Z", PROTO_EVALUE, 0},
        {"2026-08-21T10:11:12+2:00", PROTO_EVALUE, 0},
        {"2026-08-21T10:11:12+24:00", PROTO_EVALUE, 0},
        {"2026-08-21T10:11:12+02", PROTO_EVALUE, 0},
        {"2026-08-21X10:11:12Z", PROTO_EVALUE, 0},
        {"", PROTO_EVALUE, 0},
        {NULL, PROTO_EVALUE, 0},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        int64_t ms = -12345;
        int rc = proto_iso8601_ms(rows[i].s, &ms);
        if (rc != rows[i].rc || (rc == 0 && ms != rows[i].ms))
            fail_msg("%s -> %d %lld", rows[i].s ? rows[i].s : "(null)", rc, (long long)ms);
    }
}

/* ---- the JSON reader against jansson ------------------------------------------------------ */

/* Same tree: types, integer values, strings, keys and their order. */
static int same_tree(const struct pjson *v, json_t *j)
{
    switch (v->type) {
    case PJSON_NULL: return json_is_null(j);
    case PJSON_TRUE: return json_is_true(j);
    case PJSON_FALSE: return json_is_false(j);
    case PJSON_REAL: return json_is_real(j);
    case PJSON_INT: return json_is_integer(j) && json_integer_value(j) == v->u.i;
    case PJSON_STR:
        return json_is_string(j) && json_string_length(j) == v->u.str.n &&
               memcmp(json_string_value(j), v->u.str.s, v->u.str.n) == 0;
    case PJSON_ARR: {
        if (!json_is_array(j) || json_array_size(j) != v->u.kids.n)
            return 0;
        size_t i = 0;
        for (const struct pjson *c = v->u.kids.first; c != NULL; c = c->next, i++)
            if (!same_tree(c, json_array_get(j, i)))
                return 0;
        return 1;
    }
    case PJSON_OBJ: {
        if (!json_is_object(j) || json_object_size(j) != v->u.kids.n)
            return 0;
        void *it = json_object_iter(j);
        for (const struct pjson *c = v->u.kids.first; c != NULL; c = c->next) {
            if (it == NULL || strcmp(json_object_iter_key(it), c->key) != 0 ||
                !same_tree(c, json_object_iter_value(it)))
                return 0;
            it = json_object_iter_next(j, it);
        }
        return 1;
    }
    }
    return 0;
}

static void test_reader_vs_jansson(void **state)
{
    static const struct { const char *doc; int differs; } rows[] = {
        {"{}", 0}, {"[]", 0}, {"0", 0}, {"-0", 0}, {"1.5e-3", 0}, {"\"\"", 0}, {"true", 0},
        {"null", 0}, {" [1, 2 ,3 ] ", 0}, {"{\"a\":{\"b\":[{\"c\":\"d\"}]}}", 0},
        {"\"\\u00e9\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\\\\\\\"\"", 0}, {"\"caf\xc3\xa9\"", 0},
        {"9223372036854775807", 0}, {"-9223372036854775808", 0},
        {"[\"\x7f\"]", 0}, {"{\"a\":1,\"b\":2,\"c\":3}", 0},
        /* both reject */
        {"", 0}, {"{", 0}, {"[1,]", 0}, {"{\"a\":1,\"a\":2}", 0}, {"\"\\u0000\"", 0},
        {"\"\xff\"", 0}, {"\"\xc0\x80\"", 0}, {"\"\\ud800\"", 0}, {"01", 0}, {"1.", 0},
        {".1", 0}, {"+1", 0}, {"[1]]", 0}, {"\"a\nb\"", 0}, {"nul", 0}, {"{\"\\u0000\":1}", 0},
        {"\xef\xbb\xbf[]", 0}, {"[] []", 0},
        /* known, documented differences: jansson refuses numbers that overflow C types (the
         * reader keeps them and the field reader says PROTO_ERANGE / PROTO_ETYPE) */
        {"9223372036854775808", 1}, {"1e400", 1}, {"-1e400", 1},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct pjson_doc doc;
        struct proto_err err;
        json_error_t jerr;
        const char *s = rows[i].doc;
        int ours = pjson_parse(s, strlen(s), &doc, &err) == 0;
        json_t *j = json_loadb(s, strlen(s), JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (rows[i].differs)
            assert_true(ours && j == NULL);
        else if (ours != (j != NULL))
            fail_msg("%s: ours %d, jansson %d (%s)", s, ours, j != NULL, jerr.text);
        if (ours && j != NULL && !same_tree(doc.root, j))
            fail_msg("%s: trees differ", s);
        json_decref(j);
        pjson_free(&doc);
    }
    /* every fixture reads to the same tree as jansson's */
    static const char *const files[] = {"requests_v3_page.json", "webhook_delivery_signed.json",
                                        "ws_event_deposit_address_success.json"};
    for (size_t i = 0; i < N_ROWS(files); i++) {
        size_t n;
        char *text = fixture(files[i], &n);
        struct pjson_doc doc;
        struct proto_err err;
        assert_int_equal(pjson_parse(text, n, &doc, &err), 0);
        json_t *j = json_loadb(text, n, JSON_REJECT_DUPLICATES, NULL);
        assert_true(same_tree(doc.root, j));
        json_decref(j);
        pjson_free(&doc);
        free(text);
    }
}

/* ---- allocation failure ------------------------------------------------------------------ */

static void count_item(void *arg, int rc, struct status_event *ev, const struct proto_err *err)
{
    (void)ev;
    (void)err;
    if (rc == 0)
        ++*(int *)arg;
}

/* Fail the 1st, 2nd, ... allocation until the call succeeds: each run either succeeds with
 * the same result as an unfailing run or returns PROTO_ENOMEM, and leaks nothing. */
static void test_chaos(void **state)
{
    static const struct { const char *file; enum kind kind; int page; } rows[] = {
        {"ws_event_flat_pending.json", K_WS, 0},
        {"ws_event_nested_submitted.json", K_WS, 0},
        {"ws_event_deposit_address_success.json", K_WS, 0},
        {"ws_connection_ready.json", K_WS, 0},
        {"ws_subscribe_ack.json", K_WS, 0},
        {"webhook_payload_refund.json", K_WEBHOOK, 0},
        {"status_v3_failure.json", K_STATUS, 0},
        {"status_v3_refund.json", K_STATUS, 0},
        {"requests_v3_page.json", K_ITEM, 1},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        size_t len;
        char *text = fixture(rows[i].file, &len);
        struct status_event ref;
        struct proto_err err;
        struct proto_ws_msg msg;
        int ref_items = 0;
        char *cont = NULL;
        if (rows[i].page)
            assert_int_equal(proto_normalize_requests_page(text, len, 1, count_item, &ref_items,
                                                           &cont, &err), 0);
        else
            assert_int_equal(run(rows[i].kind, text, len, &msg, &ref, &err), 0);
        free(cont);
        long n;
        for (n = 1;; n++) {
            struct status_event ev;
            int items = 0, rc;
            long live = chaos_live;
            chaos_arm(n);
            if (rows[i].page)
                rc = proto_normalize_requests_page(text, len, 1, count_item, &items, &cont, &err);
            else
                rc = run(rows[i].kind, text, len, &msg, &ev, &err);
            chaos_disarm();
            if (rc != 0) {
                assert_true(chaos_tripped);
                assert_int_equal(rc, PROTO_ENOMEM);
                assert_int_equal(err.code, PROTO_ENOMEM);
                if (rows[i].page)
                    assert_null(cont);
                else
                    assert_null(ev.request_id);
            } else {
                assert_false(chaos_tripped);
                if (rows[i].page) {
                    assert_int_equal(items, ref_items);
                    free(cont);
                } else {
                    assert_true(status_event_equal(&ev, &ref));
                    status_event_cleanup(&ev);
                }
            }
            assert_int_equal(chaos_live, live);
            if (rc == 0)
                break;
        }
        assert_true(n > 1);
        if (!rows[i].page)
            status_event_cleanup(&ref);
        free(text);
    }
}

/* The one UTF-8 rule (also what the webhook attempt log relies on): overlong forms and
 * surrogates are refused, as jansson refuses them. */
static void test_utf8_valid(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t n;
        int ok;
    } rows[] = {
        {"", 0, 1},
        {"plain", 5, 1},
        {"\xc3\xa9", 2, 1},                 /* U+00E9 */
        {"\xe2\x82\xac", 3, 1},             /* U+20AC */
        {"\xf0\x9f\x98\x80", 4, 1},         /* U+1F600 */
        {"\xc0\xaf", 2, 0},                 /* overlong "/" */
        {"\xe0\x80\xaf", 3, 0},             /* overlong, 3 bytes */
        {"\xf0\x80\x80\xaf", 4, 0},         /* overlong, 4 bytes */
        {"\xed\xa0\x80", 3, 0},             /* surrogate U+D800 */
        {"\xf4\x90\x80\x80", 4, 0},         /* above U+10FFFF */
        {"\xc3", 1, 0},                     /* cut sequence */
        {"\x80", 1, 0},                     /* lone continuation */
        {"a\0b", 3, 1},                     /* NUL is valid UTF-8 */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (proto_utf8_valid(rows[i].s, rows[i].n) != rows[i].ok)
            fail_msg("row %zu: expected %d", i, rows[i].ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_ws_control),
        cmocka_unit_test(test_ws_envelopes),
        cmocka_unit_test(test_ws_rows),
        cmocka_unit_test(test_whole_documents),
        cmocka_unit_test(test_flags_and_reasons),
        cmocka_unit_test(test_big_inputs),
        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_hash_count),
        cmocka_unit_test(test_details_json),
        cmocka_unit_test(test_status_and_webhook),
        cmocka_unit_test(test_requests_page_fixture),
        cmocka_unit_test(test_requests_page_rows),
        cmocka_unit_test(test_requests_item_rows),
        cmocka_unit_test(test_requests_reorg),
        cmocka_unit_test(test_requests_unconfirmed),
        cmocka_unit_test(test_iso8601),
        cmocka_unit_test(test_reader_vs_jansson),
        cmocka_unit_test(test_chaos),
        cmocka_unit_test(test_chaos_additions),
        cmocka_unit_test(test_utf8_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
