/* test_event.c - unit tests for protocol/event.c: names, known reason lists, event ids, the
 * four JSON encodings (exact bytes, escaping, "N/A" never null), the storage record round
 * trip (its decoder lives in normalize.c), the tracking metadata ("statusrelay.metadata":
 * present only when set, last in the record as store/apply.lua appends it;
 * proto_metadata_parse's bounds) and allocation failure in every encoder.
 *
 * Independent checks: event ids against Python hashlib vectors; the webhook "data" object and
 * the status v3 body against the upstream fixtures byte for byte; escaping against jansson's
 * decoder.
 * runs on: the test process, one thread. Run from the repository root. */
#include "tests/unit/proto_test.h"

#include "protocol/event.c"
#include "protocol/json.c"
#include "protocol/lifecycle.c"
#include "protocol/normalize.c"
#include "protocol/proto.c"
#include "protocol/record.c"
#include "protocol/requests_v3.c"

static void assert_prefix(const char *s, const char *prefix)
{
    assert_memory_equal(s, prefix, strlen(prefix));
}

static const char RID[] = "0x2d56d3588be531e719518bd81f9bdea27ab103b4c97bc1e54387182c64273cd3";

/* A fully populated event (every optional field set) for the encoders. */
static void full_event(struct status_event *ev)
{
    status_event_init(ev);
    ev->request_id = strdup(RID);
    ev->status = strdup("refund");
    ev->st = PROTO_ST_REFUND;
    ev->updated_at = 1787054250297;
    ev->origin_chain_id = 8453;
    ev->destination_chain_id = 42161;
    ev->in_tx_hashes.v = calloc(2, sizeof(char *));
    ev->in_tx_hashes.v[0] = strdup("0xaa");
    ev->in_tx_hashes.v[1] = strdup("qCyQseaTNFCM");
    ev->in_tx_hashes.n = 2;
    ev->tx_hashes.v = calloc(1, sizeof(char *));
    ev->tx_hashes.v[0] = strdup("0xbb");
    ev->tx_hashes.n = 1;
    ev->fail_reason = strdup("DOUBLE_SPEND");
    ev->refund_fail_reason = strdup("N/A");
    ev->details = strdup("reverted: \"x\"");
    ev->referrer = strdup("example-app");
    ev->deposit = calloc(1, sizeof(*ev->deposit));
    ev->deposit->address = strdup("0xf630");
    ev->deposit->type = strdup("strict");
    ev->deposit->depositor = NULL;
    ev->deposit->deposit_tx_hash = strdup("0xcbf3");
    ev->quote_created_at = 1787052960112;
    ev->flags = PROTO_F_UNKNOWN_FAIL_REASON | PROTO_HAS_REASONS | PROTO_HAS_DEPOSIT;
    ev->source = PROTO_SRC_WEBHOOK;
    ev->observed_at = 1787054250400;
    ev->published_at = 1787054250318;
    proto_event_id(RID, 2, 0, ev->event_id);
    ev->seq = 2;
    ev->prev_status = strdup("failure");
    ev->created_at = 1787054250401;
}

/* ---- names and lists --------------------------------------------------------------------- */

static void test_status_names(void **state)
{
    static const struct { const char *s; enum proto_status st; int terminal; } rows[] = {
        {"waiting", PROTO_ST_WAITING, 0},     {"depositing", PROTO_ST_DEPOSITING, 0},
        {"pending", PROTO_ST_PENDING, 0},     {"submitted", PROTO_ST_SUBMITTED, 0},
        {"success", PROTO_ST_SUCCESS, 1},     {"failure", PROTO_ST_FAILURE, 0},
        {"refund", PROTO_ST_REFUND, 1},       {"delayed", PROTO_ST_DELAYED, 0},
        {"fallback", PROTO_ST_FALLBACK, 0},   {"received", PROTO_ST_RECEIVED, 0},
        {"other", PROTO_ST_OTHER, 0},         {"Success", PROTO_ST_OTHER, 0},
        {"", PROTO_ST_OTHER, 0},              {"partially_filled", PROTO_ST_OTHER, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        assert_int_equal(proto_status_parse(rows[i].s), rows[i].st);
        assert_int_equal(proto_status_terminal(rows[i].st), rows[i].terminal);
        assert_int_equal(proto_status_settled(rows[i].st),
                         rows[i].terminal || rows[i].st == PROTO_ST_FALLBACK);
        if (rows[i].st != PROTO_ST_OTHER)
            assert_string_equal(proto_status_name(rows[i].st), rows[i].s);
    }
    assert_int_equal(proto_status_parse(NULL), PROTO_ST_OTHER);
    assert_string_equal(proto_status_name(PROTO_ST_OTHER), "other");
    assert_string_equal(proto_status_name((enum proto_status)99), "other");
}

static void test_source_names(void **state)
{
    (void)state;
    for (int i = 0; i < PROTO_SRC_COUNT; i++)
        assert_int_equal(proto_source_parse(proto_source_name((enum proto_source)i)), i);
    assert_string_equal(proto_source_name(PROTO_SRC_REQUESTS), "requests");
    assert_int_equal(proto_source_parse("api"), -1);
    assert_int_equal(proto_source_parse(NULL), -1);
    assert_string_equal(proto_source_name(PROTO_SRC_COUNT), "unknown");
    assert_string_equal(proto_verdict_name(PROTO_STALE), "stale");
}

static void test_reason_lists(void **state)
{
    (void)state;
    /* bsearch needs strict strcmp order */
    for (size_t i = 1; i < sizeof(fail_reasons) / sizeof(fail_reasons[0]); i++)
        assert_true(strcmp(fail_reasons[i - 1], fail_reasons[i]) < 0);
    for (size_t i = 1; i < sizeof(refund_reasons) / sizeof(refund_reasons[0]); i++)
        assert_true(strcmp(refund_reasons[i - 1], refund_reasons[i]) < 0);
    static const struct { const char *s; int fail, refund; } rows[] = {
        {"N/A", 1, 1},
        {"UNKNOWN", 1, 1},
        {"SLIPPAGE", 1, 0},
        {"DOUBLE_SPEND", 1, 0},
        {"DEPOSITED_AMOUNT_TOO_LOW_TO_FILL", 1, 0},
        {"AMOUNT_TOO_LOW_TO_REFUND", 1, 1},
        {"TRANSACTION_NOT_INCLUDED", 1, 0},
        {"MANUAL_REFUND_REQUIRED", 1, 1},
        {"REFUND_RECIPIENT_IS_VASP", 0, 1},
        {"ZERO_SELL_AMOUNT", 1, 0},
        {"ACCOUNT_ABSTRACTION_GAS_LIMIT", 1, 0},
        {"slippage", 0, 0},
        {"NEW_REASON_2027", 0, 0},
        {"", 0, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        assert_int_equal(proto_fail_reason_known(rows[i].s), rows[i].fail);
        assert_int_equal(proto_refund_reason_known(rows[i].s), rows[i].refund);
    }
    assert_false(proto_fail_reason_known(NULL));
    /* documented later (2026): known, so never flagged unknownFailReason */
    static const char *const added[] = {
        "DEPOSIT_CONFIRMATION_TIMEOUT", "DEPOSIT_REORGED", "DESTINATION_TOKEN_TRANSFER_REJECTED",
        "GASLESS_PERMIT_BALANCE_TOO_LOW", "MANUAL_ADMIN_REFUND", "ORPHANED_DEPOSIT_REFUND",
        "PROTOCOL_DEADLINE_EXPIRED", "QUOTED_GAS_LIMIT_EXCEEDED", "TRANSACTION_SUBMISSION_FAILED",
    };
    for (size_t i = 0; i < sizeof(added) / sizeof(added[0]); i++) {
        char body[512];
        struct status_event ev;
        struct proto_err err;
        assert_true(proto_fail_reason_known(added[i]));
        snprintf(body, sizeof(body), "{\"status\":\"failure\",\"updatedAt\":1,\"failReason\":"
                 "\"%s\"}", added[i]);
        assert_int_equal(proto_normalize_status_v3(body, strlen(body), "r", 1, &ev, &err), 0);
        assert_int_equal(ev.flags & PROTO_F_UNKNOWN_FAIL_REASON, 0);
        status_event_cleanup(&ev);
    }
    assert_string_equal(proto_flag_name(PROTO_F_UNKNOWN_STATUS), "unknownStatus");
    assert_string_equal(proto_flag_name(PROTO_F_REVERSAL), "reversal");
    assert_string_equal(proto_flag_name(PROTO_F_UNCONFIRMED_DEPOSIT), "unconfirmedDeposit");
    assert_string_equal(proto_flag_name(PROTO_F_FACTS), "facts");
    assert_null(proto_flag_name(0x80));
    assert_null(proto_flag_name(PROTO_HAS_DETAILS));
    assert_null(proto_flag_name(PROTO_HAS_DETAILS_JSON));
    assert_null(proto_flag_name(PROTO_HAS_REORG));
}

/* failReason of one state, without history (DESIGN.md "Watch and reversals") */
static void test_fail_reason_out(void **state)
{
    static const struct { const char *status, *reason, *out; } rows[] = {
        {"waiting", "SLIPPAGE", "N/A"},      {"depositing", NULL, "N/A"},
        {"pending", "SLIPPAGE", "N/A"},      {"submitted", "UNKNOWN", "N/A"},
        {"success", "DOUBLE_SPEND", "N/A"},  {"delayed", "X", "N/A"},
        {"received", "X", "N/A"},            {"failure", "SLIPPAGE", "SLIPPAGE"},
        {"failure", "N/A", "UNKNOWN"},       {"failure", NULL, "UNKNOWN"},
        {"fallback", NULL, "UNKNOWN"},       {"fallback", "NEW_ONE", "NEW_ONE"},
        {"refund", "N/A", "UNKNOWN"},        {"refund", "UNKNOWN", "UNKNOWN"},
        {"mystery", "NEW_ONE", "NEW_ONE"},   {"mystery", "N/A", "N/A"},
        {"mystery", NULL, "N/A"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct status_event ev;
        size_t len;
        char want[128];
        status_event_init(&ev);
        ev.request_id = strdup("r1");
        ev.status = strdup(rows[i].status);
        ev.st = proto_status_parse(ev.status);
        ev.updated_at = 1;
        ev.fail_reason = rows[i].reason != NULL ? strdup(rows[i].reason) : NULL;
        assert_string_equal(proto_fail_reason_out(&ev), rows[i].out);
        /* all three upstream shapes apply it (records of older versions hold anything) */
        snprintf(want, sizeof(want), "\"failReason\":\"%s\",", rows[i].out);
        char *w = proto_event_webhook_body(&ev, &len), *f = proto_event_ws_frame(&ev, 0, 1, &len),
             *v = proto_event_status_v3(&ev, &len), *r = proto_event_record(&ev, &len);
        assert_non_null(strstr(w, want));
        assert_non_null(strstr(f, want));
        assert_non_null(strstr(v, want));
        /* the record stores what the struct holds */
        if (rows[i].reason == NULL)
            assert_non_null(strstr(r, "\"failReason\":null,"));
        else
            assert_non_null(strstr(r, rows[i].reason));
        free(w);
        free(f);
        free(v);
        free(r);
        status_event_cleanup(&ev);
    }
}

static void test_event_id(void **state)
{
    char id[PROTO_EVENT_ID_MAX];
    (void)state;
    /* vectors: Python hashlib.sha256(b"<id>:<seq>").hexdigest()[:32] (generation 0: records
     * of versions before generations keep these ids) */
    proto_event_id(RID, 1, 0, id);
    assert_string_equal(id, "evt_a1998e4cf8b42dcd4d66c062a124e3ea");
    proto_event_id(RID, 2, 0, id);
    assert_string_equal(id, "evt_cafc9f1bd288a1a0bc56b761f5fdfad6");
    proto_event_id("r", UINT64_MAX, 0, id);
    assert_string_equal(id, "evt_b1c920c3baacdb81b4e2f1d3dc79ee3b");
    assert_int_equal(strlen(id), 36);
    /* with a generation: hashlib.sha256(b"<id>:<seq>@<gen>") - other ids for the same seq */
    proto_event_id(RID, 1, 1732320000000, id);
    assert_string_equal(id, "evt_de54898163704508b61999fbe76e55cb");
    proto_event_id(RID, 2, 1732320000000, id);
    assert_string_equal(id, "evt_1c6fd249416b3f5e63d1dc5c0b9795d8");
}

/* ---- encodings --------------------------------------------------------------------------- */

static void test_webhook_body_exact(void **state)
{
    struct status_event ev;
    size_t len;
    (void)state;
    full_event(&ev);
    char *body = proto_event_webhook_body(&ev, &len);
    const char *want =
        "{\"event\":\"request.status.updated\",\"timestamp\":1787054250401,\"data\":{"
        "\"status\":\"refund\",\"inTxHashes\":[\"0xaa\",\"qCyQseaTNFCM\"],\"txHashes\":[\"0xbb\"],"
        "\"updatedAt\":1787054250297,\"originChainId\":8453,\"destinationChainId\":42161,"
        "\"depositAddress\":{\"address\":\"0xf630\",\"depositAddressType\":\"strict\","
        "\"depositor\":null,\"depositTxHash\":\"0xcbf3\"},\"requestId\":\"" 
        "0x2d56d3588be531e719518bd81f9bdea27ab103b4c97bc1e54387182c64273cd3\","
        "\"referrer\":\"example-app\",\"details\":\"reverted: \\\"x\\\"\","
        "\"failReason\":\"DOUBLE_SPEND\",\"refundFailReason\":\"N/A\"},"
        "\"statusrelay\":{\"eventId\":\"evt_cafc9f1bd288a1a0bc56b761f5fdfad6\",\"seq\":2,"
        "\"previousStatus\":\"failure\",\"source\":\"webhook\",\"observedAt\":1787054250400,"
        "\"publishedAt\":1787054250318,\"flags\":[\"unknownFailReason\"]}}";
    assert_string_equal(body, want);
    assert_int_equal(len, strlen(want));
    free(body);
    status_event_cleanup(&ev);
}

static void test_ws_frame_exact(void **state)
{
    struct status_event ev;
    size_t len;
    (void)state;
    full_event(&ev);
    ev.flags |= PROTO_F_UNKNOWN_STATUS | PROTO_F_DETAILS_TRUNCATED;
    ev.published_at = 0;
    char *f = proto_event_ws_frame(&ev, 1, 1787054250500, &len);
    const char *tail = "},\"publishedAt\":1787054250500,\"statusrelay\":{\"eventId\":"
                       "\"evt_cafc9f1bd288a1a0bc56b761f5fdfad6\",\"seq\":2,\"previousStatus\":"
                       "\"failure\",\"source\":\"webhook\",\"observedAt\":1787054250400,"
                       "\"flags\":[\"unknownStatus\",\"unknownFailReason\",\"detailsTruncated\"],"
                       "\"snapshot\":true}}";
    assert_non_null(f);
    assert_prefix(f, "{\"event\":\"request.status.updated\",\"data\":{\"status\":\"refund\",");
    assert_true(len > strlen(tail));
    assert_string_equal(f + len - strlen(tail), tail);
    free(f);
    /* snapshot 0: no "snapshot" key; first event: previousStatus null; no flags: no key */
    free(ev.prev_status);
    ev.prev_status = NULL;
    ev.flags = 0;
    f = proto_event_ws_frame(&ev, 0, 5, &len);
    assert_non_null(strstr(f, "\"previousStatus\":null,\"source\":\"webhook\",\"observedAt\":"
                              "1787054250400}}"));
    free(f);
    status_event_cleanup(&ev);
}

static void roundtrip(const struct status_event *ev)
{
    size_t len, len2;
    struct status_event back;
    struct proto_err err;
    char *rec = proto_event_record(ev, &len);
    assert_non_null(rec);
    int rc = proto_event_from_record(rec, len, &back, &err);
    if (rc != 0)
        fail_msg("record rejected: %s %s %s", proto_strerror(rc), err.field, err.msg);
    assert_true(status_event_equal(ev, &back));
    char *rec2 = proto_event_record(&back, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(rec, rec2, len);
    free(rec);
    free(rec2);
    status_event_cleanup(&back);
}

/* details of JSON type and reorg details in every encoding */
static void test_json_details_and_reorg(void **state)
{
    static const char reorg[] =
        "{\"inTxs\":[{\"txHash\":\"0xaa\",\"chainId\":8453,\"status\":\"failure\"}],"
        "\"metadata\":{\"detectedAt\":\"2026-08-18T10:41:14Z\",\"action\":\"refund\","
        "\"blockNumber\":123,\"extra\":{\"k\":[true,null]}}}";
    struct status_event ev;
    size_t len;
    (void)state;
    full_event(&ev);
    free(ev.details);
    ev.details = strdup("{\"revert\":\"0x08c379a0\",\"gas\":[21000,1.5e3],\"ok\":false}");
    ev.flags |= PROTO_HAS_DETAILS_JSON | PROTO_HAS_REORG | PROTO_F_REVERSAL;
    ev.reorg = strdup(reorg);
    const char *d = "\"details\":{\"revert\":\"0x08c379a0\",\"gas\":[21000,1.5e3],\"ok\":false},";

    char *w = proto_event_webhook_body(&ev, &len);
    assert_non_null(strstr(w, d));
    char tail[1024];
    snprintf(tail, sizeof(tail), "\"publishedAt\":1787054250318,\"flags\":[\"unknownFailReason\","
             "\"reversal\"],\"reorg\":%s}}", reorg);
    assert_string_equal(w + len - strlen(tail), tail);
    json_t *j = json_loadb(w, len, JSON_REJECT_DUPLICATES, NULL);
    assert_non_null(j);
    assert_true(json_is_object(json_object_get(json_object_get(j, "data"), "details")));
    assert_true(json_is_object(json_object_get(json_object_get(j, "statusrelay"), "reorg")));
    json_decref(j);
    /* the body normalises back to the same JSON-typed details */
    struct status_event back;
    struct proto_err err;
    assert_int_equal(proto_normalize_webhook(w, len, 1, &back, &err), 0);
    assert_string_equal(back.details, ev.details);
    assert_true(back.flags & PROTO_HAS_DETAILS_JSON);
    assert_null(back.reorg); /* "statusrelay" is ours, not an upstream field */
    status_event_cleanup(&back);
    free(w);

    char *f = proto_event_ws_frame(&ev, 1, 5, &len);
    assert_non_null(strstr(f, d));
    snprintf(tail, sizeof(tail), "\"reversal\"],\"reorg\":%s,\"snapshot\":true}}", reorg);
    assert_string_equal(f + len - strlen(tail), tail);
    free(f);

    char *v = proto_event_status_v3(&ev, &len);
    assert_prefix(v, "{\"status\":\"refund\",\"details\":{\"revert\":\"0x08c379a0\",");
    assert_null(strstr(v, "reorg")); /* never in the upstream's own shape */
    free(v);

    char *r = proto_event_record(&ev, &len);
    assert_non_null(strstr(r, d));
    snprintf(tail, sizeof(tail), "\"createdAt\":1787054250401,\"reorg\":%s}", reorg);
    assert_string_equal(r + len - strlen(tail), tail);
    free(r);
    roundtrip(&ev);

    /* other JSON types, and a plain string that looks like JSON */
    static const struct { const char *text; unsigned json; const char *enc; } rows[] = {
        {"[1,2]", PROTO_HAS_DETAILS_JSON, "\"details\":[1,2],"},
        {"42", PROTO_HAS_DETAILS_JSON, "\"details\":42,"},
        {"true", PROTO_HAS_DETAILS_JSON, "\"details\":true,"},
        {"\"quoted\"", PROTO_HAS_DETAILS_JSON, "\"details\":\"quoted\","},
        {"{\"a\":1}", 0, "\"details\":\"{\\\"a\\\":1}\","},
    };
    free(ev.reorg);
    ev.reorg = NULL;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        free(ev.details);
        ev.details = strdup(rows[i].text);
        ev.flags = (ev.flags & ~(unsigned)PROTO_HAS_DETAILS_JSON) | rows[i].json;
        w = proto_event_webhook_body(&ev, &len);
        assert_non_null(strstr(w, rows[i].enc));
        assert_null(strstr(w, "\"reorg\""));
        free(w);
        r = proto_event_record(&ev, &len);
        assert_non_null(strstr(r, rows[i].enc));
        assert_null(strstr(r, "\"reorg\""));
        free(r);
        if (strcmp(rows[i].text, "\"quoted\"") != 0)
            roundtrip(&ev); /* a JSON string is a plain string when read back */
    }
    status_event_cleanup(&ev);
}

/* Compact text of a fixture, keys in file order, via jansson (an independent serializer). */
static char *compact_fixture(const char *name)
{
    char *text = fixture(name, NULL);
    assert_non_null(text);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    char *c = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    free(text);
    return c; /* jansson's allocator: real_free */
}

static void test_status_v3_matches_upstream(void **state)
{
    static const char *const names[] = {"status_v3_failure.json", "status_v3_refund.json",
                                        "status_v3_success.json"};
    (void)state;
    for (size_t i = 0; i < 3; i++) {
        size_t n, len;
        char *text = fixture(names[i], &n), *want = compact_fixture(names[i]);
        struct status_event ev;
        struct proto_err err;
        assert_int_equal(proto_normalize_status_v3(text, n, RID, 1, &ev, &err), 0);
        char *got = proto_event_status_v3(&ev, &len);
        assert_string_equal(got, want);
        assert_int_equal(len, strlen(want));
        free(got);
        real_free(want);
        free(text);
        status_event_cleanup(&ev);
    }
}

/* The webhook "data" we send equals, byte for byte, what the upstream sent us. */
static void test_webhook_data_matches_upstream(void **state)
{
    (void)state;
    char *text = fixture("webhook_delivery_signed.json", NULL);
    json_t *j = json_loads(text, 0, NULL);
    const char *body = json_string_value(json_object_get(j, "body"));
    assert_non_null(body);
    struct status_event ev, next;
    struct proto_err err;
    enum proto_verdict v;
    assert_int_equal(proto_normalize_webhook(body, strlen(body), 1787055532200, &ev, &err), 0);
    assert_int_equal(proto_lifecycle_decide(NULL, &ev, 1787055532201, &v, &next), 0);
    assert_int_equal(v, PROTO_ACCEPT);
    size_t len;
    char *ours = proto_event_webhook_body(&next, &len);
    const char *data = strstr(body, "\"data\":"), *ours_data = strstr(ours, "\"data\":");
    size_t dlen = strlen(data) - 1; /* up to the body's closing brace */
    assert_memory_equal(ours_data, data, dlen);
    assert_prefix(ours_data + dlen, ",\"statusrelay\":{\"eventId\":\"evt_");
    assert_prefix(ours, "{\"event\":\"request.status.updated\",\"timestamp\":1787055532201,");
    free(ours);
    status_event_cleanup(&ev);
    status_event_cleanup(&next);
    json_decref(j);
    free(text);
}

static void test_nulls_never_in_upstream_shapes(void **state)
{
    struct status_event ev;
    size_t len;
    (void)state;
    status_event_init(&ev);
    ev.request_id = strdup("r1");
    ev.status = strdup("pending");
    ev.updated_at = 1;
    char *w = proto_event_webhook_body(&ev, &len), *s = proto_event_status_v3(&ev, &len),
         *r = proto_event_record(&ev, &len);
    assert_non_null(strstr(w, "\"originChainId\":null,\"destinationChainId\":null,"
                              "\"depositAddress\":null,\"requestId\":\"r1\",\"referrer\":null,"
                              "\"details\":null,\"failReason\":\"N/A\","
                              "\"refundFailReason\":\"N/A\"}"));
    assert_string_equal(s, "{\"status\":\"pending\",\"inTxHashes\":[],\"txHashes\":[],"
                           "\"updatedAt\":1,\"originChainId\":null,\"destinationChainId\":null,"
                           "\"failReason\":\"N/A\",\"refundFailReason\":\"N/A\"}");
    /* the record keeps nulls (exact storage) and numbers */
    assert_string_equal(r, "{\"requestId\":\"r1\",\"status\":\"pending\",\"updatedAt\":1,"
                           "\"originChainId\":0,\"destinationChainId\":0,\"inTxHashes\":[],"
                           "\"txHashes\":[],\"failReason\":null,\"refundFailReason\":null,"
                           "\"details\":null,\"referrer\":null,\"depositAddress\":null,"
                           "\"quoteCreatedAt\":0,\"flags\":0,\"source\":\"ws\",\"observedAt\":0,"
                           "\"publishedAt\":0,\"eventId\":\"\",\"seq\":0,\"previousStatus\":null,"
                           "\"createdAt\":0}");
    free(w);
    free(s);
    free(r);
    status_event_cleanup(&ev);
}

static void test_escaping(void **state)
{
    static const struct { const char *in; const char *out; int valid_utf8; } rows[] = {
        {"plain", "\"plain\"", 1},
        {"q\"b\\s/", "\"q\\\"b\\\\s/\"", 1},
        {"\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"", 1},
        {"\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\"", 1},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe2\x80\xa8",
         "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe2\x80\xa8\"", 1},
        {"bad\xff", "\"bad\\ufffd\"", 0},
        {"cut\xe2\x82", "\"cut\\ufffd\\ufffd\"", 0},
        {"over\xc0\xaf", "\"over\\ufffd\\ufffd\"", 0},
        {"surr\xed\xa0\x80", "\"surr\\ufffd\\ufffd\\ufffd\"", 0},
        {"big\xf4\x90\x80\x80", "\"big\\ufffd\\ufffd\\ufffd\\ufffd\"", 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct status_event ev;
        size_t len;
        status_event_init(&ev);
        ev.request_id = strdup("r");
        ev.status = strdup("pending");
        ev.updated_at = 1;
        ev.details = strdup(rows[i].in);
        char *s = proto_event_status_v3(&ev, &len);
        const char *d = strstr(s, "\"details\":") + 10, *end = strstr(d, ",\"inTxHashes\"");
        assert_int_equal((size_t)(end - d), strlen(rows[i].out));
        assert_memory_equal(d, rows[i].out, strlen(rows[i].out));
        /* jansson decodes our text back to the original string */
        json_error_t jerr;
        json_t *j = json_loadb(s, len, JSON_REJECT_DUPLICATES, &jerr);
        assert_non_null(j);
        if (rows[i].valid_utf8)
            assert_string_equal(json_string_value(json_object_get(j, "details")), rows[i].in);
        json_decref(j);
        free(s);
        status_event_cleanup(&ev);
    }
}

/* ---- storage record ---------------------------------------------------------------------- */

static void test_record_roundtrip(void **state)
{
    static const char *const ws[] = {"ws_event_flat_pending.json", "ws_event_nested_submitted.json",
                                     "ws_event_deposit_address_success.json"};
    struct status_event ev, next;
    enum proto_verdict v;
    struct proto_err err;
    (void)state;
    full_event(&ev);
    roundtrip(&ev);
    /* every bit but the type bit, which must describe details (a plain string here) */
    ev.flags = 0xffffffffu & ~(unsigned)PROTO_HAS_DETAILS_JSON;
    ev.origin_chain_id = PROTO_MAX_CHAIN_ID;
    ev.deposit->address = (free(ev.deposit->address), NULL);
    roundtrip(&ev);
    ev.gen = 1732320000000; /* a generation survives the record */
    roundtrip(&ev);
    status_event_cleanup(&ev);
    for (size_t i = 0; i < 3; i++) {
        size_t n;
        char *text = fixture(ws[i], &n);
        struct proto_ws_msg msg;
        assert_int_equal(proto_normalize_ws(text, n, 1787049213500, &msg, &ev, &err), 0);
        roundtrip(&ev); /* a raw observation: no event id, seq 0 */
        assert_int_equal(proto_lifecycle_decide(NULL, &ev, 1787049213501, &v, &next), 0);
        roundtrip(&next);
        status_event_cleanup(&ev);
        status_event_cleanup(&next);
        free(text);
    }
}

/* A record of another type as the scripts write it: the state record with the "event" object
 * appended (watch_lib.lua watch_event), or the object alone (endpoint.disabled). */
static void decode_typed(const char *state_rec, size_t slen, const char *obj,
                         struct status_event *out)
{
    char buf[8192];
    struct proto_err err;
    int n = state_rec != NULL
                ? snprintf(buf, sizeof(buf), "%.*s,\"event\":%s}", (int)(slen - 1), state_rec, obj)
                : snprintf(buf, sizeof(buf), "{\"event\":%s}", obj);
    assert_true(n > 0 && (size_t)n < sizeof(buf));
    int rc = proto_event_from_record(buf, (size_t)n, out, &err);
    if (rc != 0)
        fail_msg("typed record rejected: %s %s %s", proto_strerror(rc), err.field, err.msg);
}

static void test_event_types(void **state)
{
    struct status_event ev, t;
    size_t len, slen;
    char id[PROTO_EVENT_ID_MAX];
    (void)state;
    assert_string_equal(proto_event_type_name(PROTO_EV_STATUS), "request.status.updated");
    for (int i = 0; i < PROTO_EV_COUNT; i++)
        assert_int_equal(proto_event_type_parse(proto_event_type_name(i)), i);
    assert_int_equal(proto_event_type_parse("request.updated"), -1);
    assert_int_equal(proto_event_type_parse(NULL), -1);

    full_event(&ev);
    ev.flags |= PROTO_F_REVERSAL;
    char *state_rec = proto_event_record(&ev, &slen);
    /* request.watch.ended: the state, the next seq, the reason last in data */
    decode_typed(state_rec, slen,
                 "{\"type\":\"request.watch.ended\",\"seq\":3,\"createdAt\":1787140650401,"
                 "\"reason\":\"final\"}",
                 &t);
    assert_int_equal(t.type, PROTO_EV_WATCH_ENDED);
    assert_int_equal(t.seq, 3);
    assert_int_equal(t.created_at, 1787140650401);
    assert_string_equal(t.type_reason, "final");
    assert_string_equal(t.status, "refund");
    assert_int_equal(t.flags & PROTO_F_REVERSAL, 0); /* the status event's, not this one's */
    proto_event_id(RID, 3, 0, id);
    assert_string_equal(t.event_id, id);
    roundtrip(&t);
    char *body = proto_event_webhook_body(&t, &len);
    assert_prefix(body, "{\"event\":\"request.watch.ended\",\"timestamp\":1787140650401,"
                        "\"data\":{\"status\":\"refund\",");
    assert_non_null(strstr(body, "\"refundFailReason\":\"N/A\",\"reason\":\"final\"},"
                                 "\"statusrelay\":{\"eventId\":\""));
    assert_non_null(strstr(body, id));
    free(body);
    /* a snapshot of that state is a status frame */
    body = proto_event_ws_frame(&t, 1, 5, &len);
    assert_prefix(body, "{\"event\":\"request.status.updated\",\"data\":");
    assert_null(strstr(body, "\"reason\""));
    free(body);
    body = proto_event_ws_frame(&t, 0, 5, &len);
    assert_prefix(body, "{\"event\":\"request.watch.ended\",\"data\":");
    free(body);
    status_event_cleanup(&t);

    /* request.stuck: stuckSince last in data */
    decode_typed(state_rec, slen,
                 "{\"type\":\"request.stuck\",\"seq\":3,\"createdAt\":1787056050401,"
                 "\"stuckSince\":1787054250401}",
                 &t);
    assert_int_equal(t.type, PROTO_EV_STUCK);
    assert_int_equal(t.type_at, 1787054250401);
    roundtrip(&t);
    body = proto_event_webhook_body(&t, &len);
    assert_prefix(body, "{\"event\":\"request.stuck\",\"timestamp\":1787056050401,");
    assert_non_null(strstr(body, "\"refundFailReason\":\"N/A\",\"stuckSince\":1787054250401},"));
    free(body);
    status_event_cleanup(&t);

    /* endpoint.disabled: no request, its own data */
    decode_typed(NULL, 0,
                 "{\"type\":\"endpoint.disabled\",\"seq\":1,\"createdAt\":1787054250500,"
                 "\"webhookId\":\"wh_abc\",\"url\":\"https://example.com/h\",\"reason\":\"gone\","
                 "\"at\":1787054250500}",
                 &t);
    assert_int_equal(t.type, PROTO_EV_ENDPOINT_DISABLED);
    proto_event_id("wh_abc", 1, 1787054250500, id);
    roundtrip(&t);
    body = proto_event_webhook_body(&t, &len);
    char want[512];
    snprintf(want, sizeof(want),
             "{\"event\":\"endpoint.disabled\",\"timestamp\":1787054250500,\"data\":{"
             "\"webhookId\":\"wh_abc\",\"url\":\"https://example.com/h\",\"reason\":\"gone\","
             "\"at\":1787054250500},\"statusrelay\":{\"eventId\":\"%s\",\"seq\":1}}",
             id);
    assert_string_equal(body, want);
    assert_int_equal(len, strlen(want));
    free(body);
    status_event_cleanup(&t);

    /* refused: an unknown or status type, a missing reason, endpoint.disabled with a request */
    static const char *const bad[] = {
        "{\"type\":\"request.updated\",\"seq\":3,\"createdAt\":1,\"reason\":\"final\"}",
        "{\"type\":\"request.status.updated\",\"seq\":3,\"createdAt\":1}",
        "{\"type\":\"request.watch.ended\",\"seq\":3,\"createdAt\":1}",
        "{\"type\":\"request.stuck\",\"seq\":3,\"createdAt\":1}",
        "{\"type\":\"endpoint.disabled\",\"seq\":1,\"createdAt\":1,\"webhookId\":\"w\","
        "\"url\":\"u\",\"reason\":\"gone\",\"at\":1}",
        "[]",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[8192];
        struct proto_err err;
        int n = snprintf(buf, sizeof(buf), "%.*s,\"event\":%s}", (int)(slen - 1), state_rec,
                         bad[i]);
        assert_int_not_equal(proto_event_from_record(buf, (size_t)n, &t, &err), 0);
    }
    struct proto_err err;
    static const char lone[] = "{\"event\":{\"type\":\"request.stuck\",\"seq\":3,"
                               "\"createdAt\":1,\"stuckSince\":1}}";
    assert_int_not_equal(proto_event_from_record(lone, sizeof(lone) - 1, &t, &err), 0);
    free(state_rec);
    status_event_cleanup(&ev);
}

static void test_record_invalid(void **state)
{
    static const char good[] =
        "{\"requestId\":\"r1\",\"status\":\"pending\",\"updatedAt\":1,\"originChainId\":0,"
        "\"destinationChainId\":0,\"inTxHashes\":[],\"txHashes\":[],\"failReason\":null,"
        "\"refundFailReason\":null,\"details\":null,\"referrer\":null,\"depositAddress\":null,"
        "\"quoteCreatedAt\":0,\"flags\":0,\"source\":\"ws\",\"observedAt\":0,\"publishedAt\":0,"
        "\"eventId\":\"\",\"seq\":0,\"previousStatus\":null,\"createdAt\":0}";
    static const struct { const char *from, *to; int code; const char *field; } rows[] = {
        {NULL, NULL, 0, ""},
        {"\"source\":\"ws\"", "\"source\":\"api\"", PROTO_EVALUE, "source"},
        {"\"seq\":0", "\"seq\":-1", PROTO_ERANGE, "seq"},
        {"\"seq\":0", "\"seq\":1.0", PROTO_ETYPE, "seq"},
        {"\"flags\":0", "\"flags\":4294967296", PROTO_ERANGE, "flags"},
        {"\"eventId\":\"\"", "\"eventId\":\"evt_0123456789012345678901234567890123456\"",
         PROTO_ETOOLONG, "eventId"},
        {"\"eventId\":\"\"", "\"eventId\":\"evt-1\"", PROTO_EVALUE, "eventId"},
        {"\"details\":null,", "", PROTO_EMISSING, "details"},
        {"\"referrer\":null,", "", PROTO_EMISSING, "referrer"},
        {"\"failReason\":null,", "", PROTO_EMISSING, "failReason"},
        {"\"depositAddress\":null,", "", PROTO_EMISSING, "depositAddress"},
        {",\"previousStatus\":null", "", PROTO_EMISSING, "previousStatus"},
        {"\"inTxHashes\":[]", "\"inTxHashes\":null", PROTO_ETYPE, "inTxHashes"},
        {"\"originChainId\":0", "\"originChainId\":-1", PROTO_ERANGE, "originChainId"},
        {"\"updatedAt\":1", "\"updatedAt\":0", PROTO_ERANGE, "updatedAt"},
        {"\"failReason\":null", "\"failReason\":\"\"", PROTO_EVALUE, "failReason"},
        {"\"previousStatus\":null", "\"previousStatus\":\"a b\"", PROTO_EVALUE,
         "previousStatus"},
        {"\"requestId\":\"r1\"", "\"requestId\":\"r 1\"", PROTO_EVALUE, "requestId"},
        {"{", "[", PROTO_EJSON, ""},
        /* details of any JSON type; reorg optional (older records), an object or null */
        {"\"details\":null", "\"details\":{\"a\":[1]}", 0, ""},
        {"\"details\":null", "\"details\":false", 0, ""},
        {"\"createdAt\":0", "\"createdAt\":0,\"reorg\":null", 0, ""},
        {"\"createdAt\":0", "\"createdAt\":0,\"reorg\":{\"inTxs\":[],\"metadata\":null}", 0, ""},
        {"\"createdAt\":0", "\"createdAt\":0,\"reorg\":5", PROTO_ETYPE, "reorg"},
        {"\"createdAt\":0", "\"createdAt\":0,\"reorg\":\"{}\"", PROTO_ETYPE, "reorg"},
        /* tracking metadata: optional (older records, untracked requests), object or null */
        {"\"createdAt\":0", "\"createdAt\":0,\"metadata\":null", 0, ""},
        {"\"createdAt\":0", "\"createdAt\":0,\"metadata\":{\"order\":\"A-1\"}", 0, ""},
        {"\"createdAt\":0", "\"createdAt\":0,\"reorg\":null,\"metadata\":{}", 0, ""},
        {"\"createdAt\":0", "\"createdAt\":0,\"metadata\":[1]", PROTO_ETYPE, "metadata"},
        {"\"createdAt\":0", "\"createdAt\":0,\"metadata\":\"{}\"", PROTO_ETYPE, "metadata"},
        {"\"createdAt\":0",
         "\"createdAt\":0,\"metadata\":{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1"
         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", PROTO_ETOOLONG, "metadata"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char buf[1024];
        if (rows[i].from == NULL) {
            snprintf(buf, sizeof(buf), "%s", good);
        } else {
            const char *at = strstr(good, rows[i].from);
            assert_non_null(at);
            snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - good), good, rows[i].to,
                     at + strlen(rows[i].from));
        }
        struct status_event ev;
        struct proto_err err;
        int rc = proto_event_from_record(buf, strlen(buf), &ev, &err);
        if (rc != rows[i].code)
            fail_msg("row %zu: %s -> %d (%s %s), want %d", i, buf, rc, err.field, err.msg,
                     rows[i].code);
        if (rc != 0)
            assert_string_equal(err.field, rows[i].field);
        if (rc != 0)
            assert_null(ev.request_id); /* cleaned on failure */
        status_event_cleanup(&ev);
    }
}

static void test_copy_equal(void **state)
{
    struct status_event a, b;
    (void)state;
    full_event(&a);
    assert_int_equal(status_event_copy(&b, &a), 0);
    assert_true(status_event_equal(&a, &b));
    b.deposit->depositor = strdup("x");
    assert_false(status_event_equal(&a, &b));
    free(b.deposit->depositor);
    b.deposit->depositor = NULL;
    b.event_id[5] ^= 1;
    assert_false(status_event_equal(&a, &b));
    b.event_id[5] ^= 1;
    b.reorg = strdup("{}");
    assert_false(status_event_equal(&a, &b));
    free(b.reorg);
    b.reorg = NULL;
    b.flags ^= PROTO_HAS_DETAILS_JSON;
    assert_false(status_event_equal(&a, &b));
    b.flags ^= PROTO_HAS_DETAILS_JSON;
    assert_true(status_event_equal(&a, &b));
    a.reorg = strdup("{\"inTxs\":[]}");
    status_event_cleanup(&b);
    assert_int_equal(status_event_copy(&b, &a), 0);
    assert_string_equal(b.reorg, a.reorg);
    assert_true(status_event_equal(&a, &b));
    free(b.tx_hashes.v[0]);
    b.tx_hashes.v[0] = strdup("0xbc");
    assert_false(status_event_equal(&a, &b));
    status_event_cleanup(&b);
    status_event_cleanup(&a);
    status_event_cleanup(NULL);
}

/* ---- tracking metadata ------------------------------------------------------------------- */

static const char META[] = "{\"order\":\"A-1\",\"quote\":{\"id\":\"q_9\",\"amounts\":[1,2.5]},"
                           "\"note\":\"caf\u00e9 \\\"x\\\"\"}";

/* "statusrelay.metadata" in the webhook body and the dashboard frame when set (after reorg,
 * before snapshot), absent when not; never in the upstream's own shape; last in the record,
 * exactly as store/apply.lua appends it to a record encoded without it. */
static void test_metadata_encodings(void **state)
{
    struct status_event ev;
    size_t len, len2;
    char tail[512];
    (void)state;
    full_event(&ev);

    /* none: no "metadata" key anywhere (the reorg object has its own "metadata": not set) */
    char *w = proto_event_webhook_body(&ev, &len), *f = proto_event_ws_frame(&ev, 1, 5, &len),
         *plain = proto_event_record(&ev, &len2);
    assert_null(strstr(w, "metadata"));
    assert_null(strstr(f, "metadata"));
    assert_null(strstr(plain, "metadata"));
    free(w);
    free(f);

    ev.metadata = strdup(META);
    w = proto_event_webhook_body(&ev, &len);
    snprintf(tail, sizeof(tail), "\"flags\":[\"unknownFailReason\"],\"metadata\":%s}}", META);
    assert_string_equal(w + len - strlen(tail), tail);
    json_t *j = json_loadb(w, len, JSON_REJECT_DUPLICATES, NULL);
    assert_non_null(j);
    json_t *m = json_object_get(json_object_get(j, "statusrelay"), "metadata");
    assert_string_equal(json_string_value(json_object_get(m, "order")), "A-1");
    assert_string_equal(json_string_value(json_object_get(m, "note")), "caf\xc3\xa9 \"x\"");
    json_decref(j);
    /* the body is ours: the upstream normaliser does not take "statusrelay" for its own */
    struct status_event back;
    struct proto_err err;
    assert_int_equal(proto_normalize_webhook(w, len, 1, &back, &err), 0);
    assert_null(back.metadata);
    status_event_cleanup(&back);
    free(w);

    f = proto_event_ws_frame(&ev, 1, 5, &len);
    snprintf(tail, sizeof(tail), "\"metadata\":%s,\"snapshot\":true}}", META);
    assert_string_equal(f + len - strlen(tail), tail);
    free(f);
    f = proto_event_ws_frame(&ev, 0, 5, &len);
    snprintf(tail, sizeof(tail), "\"metadata\":%s}}", META);
    assert_string_equal(f + len - strlen(tail), tail);
    free(f);
    ev.reorg = strdup("{\"inTxs\":[],\"metadata\":null}");
    f = proto_event_ws_frame(&ev, 0, 5, &len);
    snprintf(tail, sizeof(tail), "\"reorg\":%s,\"metadata\":%s}}", ev.reorg, META);
    assert_string_equal(f + len - strlen(tail), tail);
    free(f);
    free(ev.reorg);
    ev.reorg = NULL;

    char *v = proto_event_status_v3(&ev, &len);
    assert_null(strstr(v, "metadata"));
    free(v);

    /* apply.lua: record without metadata, its final "}" replaced by ,"metadata":M} */
    char *r = proto_event_record(&ev, &len);
    char *spliced = malloc(len2 + strlen(META) + 16);
    snprintf(spliced, len2 + strlen(META) + 16, "%.*s,\"metadata\":%s}", (int)(len2 - 1), plain,
             META);
    assert_string_equal(r, spliced);
    roundtrip(&ev);
    free(spliced);
    free(plain);
    free(r);

    /* bodies rendered from the decoded record are the same bytes on every attempt */
    r = proto_event_record(&ev, &len);
    assert_int_equal(proto_event_from_record(r, len, &back, &err), 0);
    assert_string_equal(back.metadata, META);
    char *w1 = proto_event_webhook_body(&ev, &len), *w2 = proto_event_webhook_body(&back, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(w1, w2, len);
    free(w1);
    free(w2);
    free(r);
    status_event_cleanup(&back);

    /* copy and equal see it */
    struct status_event c;
    assert_int_equal(status_event_copy(&c, &ev), 0);
    assert_string_equal(c.metadata, META);
    assert_true(status_event_equal(&c, &ev));
    c.metadata[2] ^= 1;
    assert_false(status_event_equal(&c, &ev));
    free(c.metadata);
    c.metadata = NULL;
    assert_false(status_event_equal(&c, &ev));
    status_event_cleanup(&c);
    status_event_cleanup(&ev);
}

/* "statusrelay.request": the facts the event carries (ev->facts), after metadata and before
 * snapshot, absent when unknown; never in the record (the stream entry does not grow), nor in
 * the upstream's own shape; copy and equal see it. */
static void test_facts_encodings(void **state)
{
    static const char FX[] = "{\"createdAt\":1,\"user\":\"0xab\",\"outTxs\":[]}";
    struct status_event ev;
    size_t len, len0;
    char tail[512];
    (void)state;
    full_event(&ev);
    char *r0 = proto_event_record(&ev, &len0);
    char *w = proto_event_webhook_body(&ev, &len);
    assert_null(strstr(w, "\"request\""));
    free(w);
    ev.facts = strdup(FX);
    ev.metadata = strdup(META);
    w = proto_event_webhook_body(&ev, &len);
    snprintf(tail, sizeof(tail), "\"metadata\":%s,\"request\":%s}}", META, FX);
    assert_string_equal(w + len - strlen(tail), tail);
    json_t *j = json_loadb(w, len, JSON_REJECT_DUPLICATES, NULL);
    assert_non_null(j);
    json_t *rq = json_object_get(json_object_get(j, "statusrelay"), "request");
    assert_string_equal(json_string_value(json_object_get(rq, "user")), "0xab");
    json_decref(j);
    free(w);
    char *f = proto_event_ws_frame(&ev, 1, 5, &len);
    snprintf(tail, sizeof(tail), "\"request\":%s,\"snapshot\":true}}", FX);
    assert_string_equal(f + len - strlen(tail), tail);
    free(f);
    char *v = proto_event_status_v3(&ev, &len);
    assert_null(strstr(v, "request\""));
    free(v);
    free(ev.metadata);
    ev.metadata = NULL;
    char *r = proto_event_record(&ev, &len);
    assert_int_equal(len, len0);
    assert_memory_equal(r, r0, len);
    free(r);
    free(r0);
    struct status_event c;
    assert_int_equal(status_event_copy(&c, &ev), 0);
    assert_string_equal(c.facts, FX);
    assert_true(status_event_equal(&c, &ev));
    free(c.facts);
    c.facts = NULL;
    assert_false(status_event_equal(&c, &ev));
    status_event_cleanup(&c);
    status_event_cleanup(&ev);
}

/* The one rule for what POST /v1/requests stores and what a record may carry. */
static void test_metadata_parse(void **state)
{
    char deep32[128], deep33[128], big[PROTO_MAX_METADATA + 16];
    (void)state;
    /* {"a": 31 brackets 1 ...}: depth 32; one more: 33 */
    snprintf(deep32, sizeof(deep32), "{\"a\":%.*s1%.*s}", 31,
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 31, "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
    snprintf(deep33, sizeof(deep33), "{\"a\":%.*s1%.*s}", 32,
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 32, "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
    /* {"k":"xxx...x"}: 8 bytes of syntax around the value */
    memset(big, 0, sizeof(big));
    memcpy(big, "{\"k\":\"", 6);
    memset(big + 6, 'x', PROTO_MAX_METADATA - 8);
    memcpy(big + PROTO_MAX_METADATA - 2, "\"}", 2);
    static const struct { const char *in, *out; int code; } rows[] = {
        {"{}", "{}", 0},
        {"{\"order\":\"A-1\"}", "{\"order\":\"A-1\"}", 0},
        {" { \"a\" : [ 1 , { \"b\" : null } ] }\n", "{\"a\":[1,{\"b\":null}]}", 0},
        {"{\"s\":\"a b\\n\\u00e9\"}", "{\"s\":\"a b\\n\\u00e9\"}", 0},
        {"[]", NULL, PROTO_ETYPE},
        {"5", NULL, PROTO_ETYPE},
        {"null", NULL, PROTO_ETYPE},
        {"\"{}\"", NULL, PROTO_ETYPE},
        {"{", NULL, PROTO_EJSON},
        {"{\"a\":1,\"a\":2}", NULL, PROTO_EJSON},
        {"{\"a\":\"\\u0000\"}", NULL, PROTO_EJSON},
        {"{}x", NULL, PROTO_EJSON},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char *out = (char *)1;
        struct proto_err err;
        int rc = proto_metadata_parse(rows[i].in, strlen(rows[i].in), &out, &err);
        if (rc != rows[i].code)
            fail_msg("row %zu: %s -> %d (%s), want %d", i, rows[i].in, rc, err.msg, rows[i].code);
        if (rc == 0) {
            assert_string_equal(out, rows[i].out);
            free(out);
        } else {
            assert_ptr_equal(out, (char *)1); /* untouched */
            if (rc != PROTO_EJSON)
                assert_string_equal(err.field, "metadata");
        }
        assert_int_equal(proto_metadata_parse(rows[i].in, strlen(rows[i].in), NULL, NULL),
                         rows[i].code);
    }
    struct proto_err err;
    assert_int_equal(proto_metadata_parse(deep32, strlen(deep32), NULL, &err), 0);
    assert_int_equal(proto_metadata_parse(deep33, strlen(deep33), NULL, &err), PROTO_ETOOLONG);
    assert_string_equal(err.field, "metadata");
    assert_int_equal(strlen(big), PROTO_MAX_METADATA);
    assert_int_equal(proto_metadata_parse(big, strlen(big), NULL, &err), 0);
    big[PROTO_MAX_METADATA - 2] = 'x';
    memcpy(big + PROTO_MAX_METADATA - 1, "\"}", 2);
    assert_int_equal(strlen(big), PROTO_MAX_METADATA + 1);
    assert_int_equal(proto_metadata_parse(big, strlen(big), NULL, &err), PROTO_ETOOLONG);
    /* whitespace does not count: the bound is on the compact text */
    char spaced[PROTO_MAX_METADATA + 64];
    snprintf(spaced, sizeof(spaced), "   { \"k\" : \"%.*s\" }  ", PROTO_MAX_METADATA - 8, big + 6);
    assert_int_equal(proto_metadata_parse(spaced, strlen(spaced), NULL, &err), 0);
}

/* ---- allocation failure ------------------------------------------------------------------ */

enum op { OP_WEBHOOK, OP_WS, OP_STATUS, OP_RECORD, OP_COPY, OP_FROM_RECORD, OP_METADATA,
          OP_COUNT };

static void test_chaos_encoders(void **state)
{
    struct status_event ev;
    (void)state;
    full_event(&ev);
    /* a long details string makes the buffer grow several times */
    free(ev.details);
    ev.details = malloc(4001);
    memset(ev.details, '\n', 4000);
    ev.details[4000] = '\0';
    ev.reorg = strdup("{\"inTxs\":[{\"txHash\":\"0xaa\",\"chainId\":1,\"status\":\"failure\"}],"
                      "\"metadata\":{\"action\":\"fill\"}}");
    ev.metadata = strdup(META);
    size_t rlen;
    char *rec = proto_event_record(&ev, &rlen);
    for (int op = 0; op < OP_COUNT; op++) {
        for (long n = 1;; n++) {
            long live = chaos_live;
            struct status_event out;
            struct proto_err err;
            size_t len = 7;
            char *text = NULL;
            int rc = 0;
            chaos_arm(n);
            switch (op) {
            case OP_WEBHOOK: text = proto_event_webhook_body(&ev, &len); break;
            case OP_WS: text = proto_event_ws_frame(&ev, 1, 9, &len); break;
            case OP_STATUS: text = proto_event_status_v3(&ev, &len); break;
            case OP_RECORD: text = proto_event_record(&ev, &len); break;
            case OP_COPY: rc = status_event_copy(&out, &ev); break;
            case OP_FROM_RECORD: rc = proto_event_from_record(rec, rlen, &out, &err); break;
            case OP_METADATA:
                status_event_init(&out);
                rc = proto_metadata_parse(META, strlen(META), &out.metadata, &err);
                break;
            }
            chaos_disarm();
            int ok = op < OP_COPY ? text != NULL : rc == 0;
            if (ok != !chaos_tripped)
                fail_msg("op %d n %ld: ok %d tripped %d rc %d", op, n, ok, chaos_tripped, rc);
            if (op == OP_METADATA) {
                if (ok)
                    assert_string_equal(out.metadata, META);
                else
                    assert_int_equal(rc, PROTO_ENOMEM);
                status_event_cleanup(&out);
            } else if (op >= OP_COPY) {
                if (ok)
                    assert_true(status_event_equal(&out, &ev));
                else
                    assert_int_equal(rc, PROTO_ENOMEM);
                status_event_cleanup(&out);
            } else if (!ok) {
                assert_int_equal(len, 0);
            }
            free(text);
            assert_int_equal(chaos_live, live);
            if (ok)
                break;
        }
    }
    free(rec);
    status_event_cleanup(&ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_source_names),
        cmocka_unit_test(test_reason_lists),
        cmocka_unit_test(test_fail_reason_out),
        cmocka_unit_test(test_event_id),
        cmocka_unit_test(test_webhook_body_exact),
        cmocka_unit_test(test_ws_frame_exact),
        cmocka_unit_test(test_status_v3_matches_upstream),
        cmocka_unit_test(test_webhook_data_matches_upstream),
        cmocka_unit_test(test_nulls_never_in_upstream_shapes),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_json_details_and_reorg),
        cmocka_unit_test(test_record_roundtrip),
        cmocka_unit_test(test_record_invalid),
        cmocka_unit_test(test_event_types),
        cmocka_unit_test(test_copy_equal),
        cmocka_unit_test(test_metadata_encodings),
        cmocka_unit_test(test_metadata_parse),
        cmocka_unit_test(test_facts_encodings),
        cmocka_unit_test(test_chaos_encoders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
