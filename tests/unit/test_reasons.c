/* test_reasons.c - the upstream's whole failReason and refundFailReason lists through every
 * normaliser (websocket event, upstream webhook, /intents/status/v3 body, /requests/v3 item
 * with the reason under "data" and at the top level) and the lifecycle: no documented value
 * may come out flagged unknown, and the value must come out as it went in. The lists are the
 * upstream's OpenAPI enums as the npm SDK @relayprotocol/relay-sdk 7.0.3 ships them
 * (_types/src/types/api.d.ts: 69 failReason values with "N/A", 4 refundFailReason values), plus
 * the values the changelog and the fixtures add (upstream-protocol.md). When the SDK is
 * installed (make npm-deps), its enums are read too and every value in them is checked, so a
 * newer SDK with new values fails here until the tables in protocol/event.c know them.
 * Also: the top-level reasons of a /requests/v3 item (DESIGN "More upstream rules").
 * runs on: the test process, one thread. Run from the repository root. */
#include "tests/unit/proto_test.h"

#include "protocol/event.c"
#include "protocol/json.c"
#include "protocol/lifecycle.c"
#include "protocol/normalize.c"
#include "protocol/proto.c"
#include "protocol/record.c"
#include "protocol/requests_v3.c"

#define N_ROWS(a) (sizeof(a) / sizeof((a)[0]))

static const char RID[] = "0x5a0b54d5dc17e0b1a6c37e1b0b9a49d1ab6b6b3e1e0f4b5b33bb4c9ee2b1c0de";

/* GetIntentsStatusV3 / GetRequestsV3 failReason (the SDK's types, in their order) */
static const char *const sdk_fail[] = {
    "UNKNOWN", "SLIPPAGE", "AMOUNT_TOO_LOW_TO_REFUND", "DEPOSIT_ADDRESS_MISMATCH",
    "DEPOSIT_CHAIN_MISMATCH", "INCORRECT_DEPOSIT_CURRENCY", "DOUBLE_SPEND",
    "SOLVER_CAPACITY_EXCEEDED", "SOLVER_BALANCE_TOO_LOW", "DEPOSITED_AMOUNT_TOO_LOW_TO_FILL",
    "NEGATIVE_NEW_AMOUNT_AFTER_FEES", "NO_QUOTES", "MISSING_REVERT_DATA", "REVERSE_SWAP_FAILED",
    "GENERATE_SWAP_FAILED", "TOO_LITTLE_RECEIVED", "EXECUTION_REVERTED",
    "NEW_CALLDATA_INCLUDES_HIGHER_RENT_FEE", "TRANSACTION_REVERTED", "TRANSACTION_TOO_LARGE",
    "ORIGIN_CURRENCY_MISMATCH", "NO_INTERNAL_SWAP_ROUTES_FOUND", "SWAP_USES_TOO_MUCH_GAS",
    "INSUFFICIENT_FUNDS_FOR_RENT", "SPONSOR_BALANCE_TOO_LOW", "ORDER_EXPIRED",
    "ORDER_IS_CANCELLED", "TRANSFER_FROM_FAILED", "TRANSFER_FAILED", "SIGNATURE_EXPIRED",
    "INVALID_SIGNATURE", "INSUFFICIENT_NATIVE_TOKENS_SUPPLIED",
    "TRANSFER_AMOUNT_EXCEEDS_ALLOWANCE", "TRANSFER_AMOUNT_EXCEEDS_BALANCE", "INVALID_SENDER",
    "ACCOUNT_ABSTRACTION_INVALID_NONCE", "ACCOUNT_ABSTRACTION_SIGNATURE_ERROR",
    "SEAPORT_INEXACT_FRACTION", "TOKEN_NOT_TRANSFERABLE", "ZERO_SELL_AMOUNT", "MINT_NOT_ACTIVE",
    "ERC_1155_TOO_MANY_REQUESTED", "INCORRECT_PAYMENT", "INVALID_GAS_PRICE", "FLUID_DEX_ERROR",
    "ORDER_ALREADY_FILLED", "SEAPORT_INVALID_FULFILLER", "INVALID_SIGNER",
    "MINT_QUANTITY_EXCEEDS_MAX_PER_WALLET", "MINT_QUANTITY_EXCEEDS_MAX_SUPPLY",
    "JUPITER_INVALID_TOKEN_ACCOUNT", "INVALID_NONCE", "ACCOUNT_ABSTRACTION_GAS_LIMIT",
    "CONTRACT_PAUSED", "SWAP_IMPACT_TOO_HIGH", "INSUFFICIENT_POOL_LIQUIDITY", "TTL_EXPIRED",
    "DEPOSIT_CONFIRMATION_TIMEOUT", "ORPHANED_DEPOSIT_REFUND", "GASLESS_PERMIT_BALANCE_TOO_LOW",
    "MANUAL_ADMIN_REFUND", "QUOTED_GAS_LIMIT_EXCEEDED", "DESTINATION_TOKEN_TRANSFER_REJECTED",
    "DEPOSIT_REORGED", "BLOCKED_WALLET", "PROTOCOL_DEADLINE_EXPIRED", "TRANSACTION_NOT_INCLUDED",
    "TRANSACTION_SUBMISSION_FAILED", "N/A",
};
/* the changelog's values beyond the SDK's enum (upstream-protocol.md section 0) */
static const char *const more_fail[] = {"MANUAL_REFUND_REQUIRED"};
/* refundFailReason: the SDK's enum, then the changelog's and the fixtures' values */
static const char *const refund_reasons_up[] = {
    "AMOUNT_TOO_LOW_TO_REFUND", "NEGATIVE_NEW_AMOUNT_AFTER_FEES", "SWAP_CURRENCY_NOT_ON_ORIGIN",
    "REFUND_RECIPIENT_IS_VASP", "MANUAL_REFUND_REQUIRED", "N/A",
};

#define SDK_TYPES "tests/node_modules/@relayprotocol/relay-sdk/_types/src/types/api.d.ts"

/* ---- one value through every source --------------------------------------------------------- */

enum which { FAIL_REASON, REFUND_REASON };

static const char *value_of(const struct status_event *ev, enum which w)
{
    return w == FAIL_REASON ? ev->fail_reason : ev->refund_fail_reason;
}

static unsigned unknown_flag(enum which w)
{
    return w == FAIL_REASON ? PROTO_F_UNKNOWN_FAIL_REASON : PROTO_F_UNKNOWN_REFUND_REASON;
}

/* ev came from a normaliser: the value as sent, no unknown flag; then through the lifecycle
 * as the first observation: the state keeps it (a failReason on a failure status) unflagged. */
static void check_event(const char *src, const char *v, enum which w, int rc,
                        struct status_event *ev, const struct proto_err *err)
{
    if (rc != 0)
        fail_msg("%s %s: %s %s %s", src, v, proto_strerror(rc), err->field, err->msg);
    if (value_of(ev, w) == NULL || strcmp(value_of(ev, w), v) != 0)
        fail_msg("%s %s: came out as %s", src, v, value_of(ev, w) ? value_of(ev, w) : "NULL");
    if (ev->flags & unknown_flag(w))
        fail_msg("%s %s: flagged unknown (flags 0x%x)", src, v, ev->flags);
    struct status_event next;
    enum proto_verdict verdict;
    assert_int_equal(proto_lifecycle_decide(NULL, ev, 5000, &verdict, &next), 0);
    assert_int_equal(verdict, PROTO_ACCEPT);
    if (next.flags & unknown_flag(w))
        fail_msg("%s %s: the state is flagged unknown (flags 0x%x)", src, v, next.flags);
    /* "N/A" on a failure status becomes "UNKNOWN" (the status-response rule): known too */
    const char *want = w == FAIL_REASON && strcmp(v, "N/A") == 0 ? "UNKNOWN" : v;
    if (strcmp(value_of(&next, w), want) != 0)
        fail_msg("%s %s: the state says %s", src, v, value_of(&next, w));
    status_event_cleanup(&next);
    status_event_cleanup(ev);
}

/* status failure (failReason) or refund (refundFailReason) carrying v, from every source */
static void through_all(const char *v, enum which w)
{
    const char *status = w == FAIL_REASON ? "failure" : "refund";
    const char *key = w == FAIL_REASON ? "failReason" : "refundFailReason";
    const char *other = w == FAIL_REASON ? "refundFailReason" : "failReason";
    const char *other_v = w == FAIL_REASON ? "N/A" : "SLIPPAGE";
    char payload[1024], buf[2048];
    struct status_event ev;
    struct proto_err err;
    int rc;
    snprintf(payload, sizeof(payload),
             "\"status\":\"%s\",\"inTxHashes\":[\"0x01\"],\"txHashes\":[],"
             "\"updatedAt\":1787052400551,\"originChainId\":10,\"destinationChainId\":137,"
             "\"%s\":\"%s\",\"%s\":\"%s\"",
             status, key, v, other, other_v);

    snprintf(buf, sizeof(buf),
             "{\"event\":\"request.status.updated\",\"data\":{%s,\"requestId\":\"%s\"},"
             "\"publishedAt\":1787052400600}",
             payload, RID);
    rc = proto_normalize_ws(buf, strlen(buf), 1000, NULL, &ev, &err);
    check_event("websocket", v, w, rc, &ev, &err);

    snprintf(buf, sizeof(buf),
             "{\"event\":\"request.status.updated\",\"timestamp\":1787052400600,"
             "\"data\":{%s,\"requestId\":\"%s\"}}",
             payload, RID);
    rc = proto_normalize_webhook(buf, strlen(buf), 1000, &ev, &err);
    check_event("webhook", v, w, rc, &ev, &err);

    snprintf(buf, sizeof(buf), "{%s}", payload);
    rc = proto_normalize_status_v3(buf, strlen(buf), RID, 1000, &ev, &err);
    check_event("status v3", v, w, rc, &ev, &err);

    /* /requests/v3: null instead of "N/A" there */
    char q[96], oq[96];
    snprintf(q, sizeof(q), strcmp(v, "N/A") == 0 ? "null" : "\"%s\"", v);
    snprintf(oq, sizeof(oq), w == FAIL_REASON ? "null" : "\"%s\"", other_v);
    snprintf(buf, sizeof(buf),
             "{\"id\":\"%s\",\"status\":\"%s\",\"updatedAt\":\"2026-08-18T10:41:00Z\","
             "\"data\":{\"%s\":%s,\"%s\":%s,\"inTxs\":[{\"txHash\":\"0x01\",\"chainId\":10}]}}",
             RID, status, key, q, other, oq);
    rc = proto_normalize_requests_item(buf, strlen(buf), 1000, &ev, &err);
    check_event("requests v3 (data)", v, w, rc, &ev, &err);

    snprintf(buf, sizeof(buf),
             "{\"id\":\"%s\",\"status\":\"%s\",\"updatedAt\":\"2026-08-18T10:41:00Z\","
             "\"%s\":%s,\"%s\":%s,\"data\":{\"inTxs\":[{\"txHash\":\"0x01\",\"chainId\":10}]}}",
             RID, status, key, q, other, oq);
    rc = proto_normalize_requests_item(buf, strlen(buf), 1000, &ev, &err);
    check_event("requests v3 (top level)", v, w, rc, &ev, &err);
}

static void test_fail_reasons(void **state)
{
    (void)state;
    assert_int_equal(N_ROWS(sdk_fail), 69);
    for (size_t i = 0; i < N_ROWS(sdk_fail); i++)
        through_all(sdk_fail[i], FAIL_REASON);
    for (size_t i = 0; i < N_ROWS(more_fail); i++)
        through_all(more_fail[i], FAIL_REASON);
    assert_int_equal(chaos_live, 0);
}

static void test_refund_reasons(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_ROWS(refund_reasons_up); i++)
        through_all(refund_reasons_up[i], REFUND_REASON);
    assert_int_equal(chaos_live, 0);
}

/* The check is not vacuous: a value nobody documents is kept and flagged. */
static void test_unknown_flagged(void **state)
{
    (void)state;
    char buf[512];
    struct status_event ev;
    struct proto_err err;
    snprintf(buf, sizeof(buf),
             "{\"status\":\"refund\",\"updatedAt\":1,\"failReason\":\"NOT_A_REASON_YET\","
             "\"refundFailReason\":\"NOR_THIS\"}");
    assert_int_equal(proto_normalize_status_v3(buf, strlen(buf), RID, 1000, &ev, &err), 0);
    assert_string_equal(ev.fail_reason, "NOT_A_REASON_YET");
    assert_true(ev.flags & PROTO_F_UNKNOWN_FAIL_REASON);
    assert_true(ev.flags & PROTO_F_UNKNOWN_REFUND_REASON);
    status_event_cleanup(&ev);
}

/* ---- the SDK's own enums, when installed --------------------------------------------------- */

/* Every quoted value of the first "<key>?: ... ;" declaration of text must be known. Returns
 * how many values were checked. */
static size_t check_sdk_enum(const char *text, const char *decl, enum which w)
{
    const char *at = strstr(text, decl);
    if (at == NULL)
        fail_msg("%s not in %s", decl, SDK_TYPES);
    const char *end = strchr(at, ';');
    size_t n = 0;
    for (const char *p = at + strlen(decl); p != NULL && p < end; p++) {
        if (*p != '"')
            continue;
        const char *q = strchr(p + 1, '"');
        char v[PROTO_MAX_STATUS + 1];
        if (q == NULL || q > end || (size_t)(q - p - 1) > PROTO_MAX_STATUS)
            fail_msg("%s: unexpected text", decl);
        snprintf(v, sizeof(v), "%.*s", (int)(q - p - 1), p + 1);
        int known = w == FAIL_REASON ? proto_fail_reason_known(v) : proto_refund_reason_known(v);
        if (!known)
            fail_msg("the SDK's %s has %s, unknown to protocol/event.c", decl, v);
        through_all(v, w);
        n++;
        p = q;
    }
    return n;
}

static void test_sdk_enums(void **state)
{
    (void)state;
    FILE *f = fopen(SDK_TYPES, "rb");
    if (f == NULL) {
        print_message("  (skipped: %s absent; make npm-deps installs it)\n", SDK_TYPES);
        return;
    }
    static char text[4 << 20];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    /* the first declarations are GetIntentsStatusV3's (status answers) */
    assert_int_equal(check_sdk_enum(text, "failReason?: ", FAIL_REASON), 69);
    assert_true(check_sdk_enum(text, "refundFailReason?: ", REFUND_REASON) >= 4);
    assert_int_equal(chaos_live, 0);
}

/* ---- /requests/v3: reasons at the top level ------------------------------------------------ */

static void item(const char *top, const char *data, struct status_event *ev)
{
    char buf[1024];
    struct proto_err err;
    snprintf(buf, sizeof(buf),
             "{\"id\":\"%s\",\"status\":\"failure\",\"updatedAt\":\"2026-08-18T10:41:00Z\"%s%s}",
             RID, top, data);
    int rc = proto_normalize_requests_item(buf, strlen(buf), 1000, ev, &err);
    if (rc != 0)
        fail_msg("%s: %s %s %s", buf, proto_strerror(rc), err.field, err.msg);
}

static void test_v3_top_level(void **state)
{
    static const struct {
        const char *top, *data, *fail, *refund;
    } rows[] = {
        /* only at the top level */
        {",\"failReason\":\"SLIPPAGE\",\"refundFailReason\":\"AMOUNT_TOO_LOW_TO_REFUND\"",
         ",\"data\":{\"inTxs\":[]}", "SLIPPAGE", "AMOUNT_TOO_LOW_TO_REFUND"},
        /* data's are null */
        {",\"failReason\":\"SLIPPAGE\"",
         ",\"data\":{\"failReason\":null,\"refundFailReason\":null}", "SLIPPAGE", "N/A"},
        /* no data at all */
        {",\"failReason\":\"DOUBLE_SPEND\"", "", "DOUBLE_SPEND", "N/A"},
        /* data's empty string says nothing either */
        {",\"failReason\":\"DOUBLE_SPEND\"", ",\"data\":{\"failReason\":\"\"}", "DOUBLE_SPEND",
         "N/A"},
        /* data wins when it says something */
        {",\"failReason\":\"SLIPPAGE\"", ",\"data\":{\"failReason\":\"NO_QUOTES\"}", "NO_QUOTES",
         "N/A"},
        /* top-level null: data's, else N/A */
        {",\"failReason\":null", ",\"data\":{\"failReason\":\"NO_QUOTES\"}", "NO_QUOTES", "N/A"},
        {",\"failReason\":null", ",\"data\":{}", "N/A", "N/A"},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct status_event ev;
        item(rows[i].top, rows[i].data, &ev);
        assert_string_equal(ev.fail_reason, rows[i].fail);
        assert_string_equal(ev.refund_fail_reason, rows[i].refund);
        assert_int_equal(ev.flags & (PROTO_F_UNKNOWN_FAIL_REASON | PROTO_F_UNKNOWN_REFUND_REASON),
                         0);
        if (strcmp(rows[i].fail, "N/A") != 0)
            assert_true(ev.flags & PROTO_HAS_REASONS);
        status_event_cleanup(&ev);
    }
    /* a top-level value is checked like data's: a bad token rejects the item */
    struct status_event ev;
    struct proto_err err;
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"id\":\"%s\",\"status\":\"failure\",\"updatedAt\":\"2026-08-18T10:41:00Z\","
             "\"failReason\":\"has space\"}",
             RID);
    assert_int_equal(proto_normalize_requests_item(buf, strlen(buf), 1000, &ev, &err),
                     PROTO_EVALUE);
    assert_string_equal(err.field, "failReason");
    assert_int_equal(chaos_live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_reasons),   cmocka_unit_test(test_refund_reasons),
        cmocka_unit_test(test_unknown_flagged), cmocka_unit_test(test_sdk_enums),
        cmocka_unit_test(test_v3_top_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
