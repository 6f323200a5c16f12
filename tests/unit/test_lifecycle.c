/* test_lifecycle.c - unit tests for protocol/lifecycle.c: every rule of lifecycle.h as a table
 * row (last state, observation, verdict, merged result), out-of-order deliveries of whole
 * lifecycles in every order, the failure -> pending -> refund flow, and allocation failure.
 * Observations are written as /intents/status/v3 bodies and go through the real normaliser.
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

static const char RID[] = "0x7cb884e84710b6fbce8bd9945f5cbc09b55081b654d6eb3a515de9fb1bdc0d84";

/* An observation from the fields of a status v3 body (without the braces). */
static void obs_of(struct status_event *ev, const char *fields, enum proto_source src)
{
    char buf[8192];
    struct proto_err err;
    snprintf(buf, sizeof(buf), "{%s}", fields);
    int rc = proto_normalize_status_v3(buf, strlen(buf), RID, 1000, ev, &err);
    if (rc != 0)
        fail_msg("test bug: %s: %s %s %s", buf, proto_strerror(rc), err.field, err.msg);
    ev->source = src;
}

/* "a,b,c" -> compare with a hash list */
static void assert_list(const struct proto_strv *sv, const char *want)
{
    char got[4096] = "";
    for (size_t i = 0; i < sv->n; i++) {
        strcat(got, i ? "," : "");
        strcat(got, sv->v[i]);
    }
    assert_string_equal(got, want);
}

static enum proto_verdict decide(const struct status_event *last, const struct status_event *obs,
                                 struct status_event *next)
{
    enum proto_verdict v;
    assert_int_equal(proto_lifecycle_decide(last, obs, 5000, &v, next), 0);
    if (v != PROTO_ACCEPT)
        assert_null(next->request_id); /* empty unless accepted */
    return v;
}

/* ---- the rules, one row each --------------------------------------------------------------- */

struct row {
    const char *name;
    const char *last; /* NULL: request never seen */
    const char *obs;
    enum proto_verdict verdict;
    /* the merged state when accepted */
    const char *status, *in, *out, *fail, *refund, *details;
    unsigned flags; /* next.flags & ROW_FLAGS (0 when left out) */
};

#define ROW_FLAGS                                                                          \
    (PROTO_F_REVERSAL | PROTO_F_UNCONFIRMED_DEPOSIT | PROTO_F_UNKNOWN_FAIL_REASON |       \
     PROTO_HAS_DETAILS_JSON)
#define REV PROTO_F_REVERSAL
#define S300 "\"status\":\"success\",\"updatedAt\":300"
#define R300 "\"status\":\"refund\",\"updatedAt\":300"
#define F300 "\"status\":\"failure\",\"updatedAt\":300"

#define P100 "\"status\":\"pending\",\"updatedAt\":100"
#define NO_MERGE NULL, NULL, NULL, NULL, NULL, NULL, 0

static const struct row rows[] = {
    {"first observation", NULL, P100 ",\"inTxHashes\":[\"a\"]", PROTO_ACCEPT, "pending", "a", "",
     "N/A", "N/A", NULL, 0},
    {"older updatedAt, same status", P100 ",\"inTxHashes\":[\"a\"]",
     "\"status\":\"pending\",\"updatedAt\":50,\"inTxHashes\":[\"a\",\"b\"]", PROTO_STALE, NO_MERGE},
    {"older updatedAt, new status", P100, "\"status\":\"submitted\",\"updatedAt\":99",
     PROTO_STALE, NO_MERGE},
    {"identical", P100 ",\"inTxHashes\":[\"a\"]", P100 ",\"inTxHashes\":[\"a\"]",
     PROTO_DUPLICATE, NO_MERGE},
    {"only updatedAt moved", P100 ",\"inTxHashes\":[\"a\"]",
     "\"status\":\"pending\",\"updatedAt\":200,\"inTxHashes\":[\"a\"]", PROTO_DUPLICATE, NO_MERGE},
    {"fewer hashes", P100 ",\"inTxHashes\":[\"a\",\"b\"]", P100 ",\"inTxHashes\":[\"b\"]",
     PROTO_DUPLICATE, NO_MERGE},
    {"no hash fields at all", P100 ",\"inTxHashes\":[\"a\"]", P100, PROTO_DUPLICATE, NO_MERGE},
    {"new in hash: union", P100 ",\"inTxHashes\":[\"a\"]",
     "\"status\":\"pending\",\"updatedAt\":200,\"inTxHashes\":[\"b\",\"a\"]", PROTO_ACCEPT,
     "pending", "a,b", "", "N/A", "N/A", NULL, 0},
    {"new out hash", "\"status\":\"submitted\",\"updatedAt\":100,\"txHashes\":[\"x\"]",
     "\"status\":\"submitted\",\"updatedAt\":100,\"txHashes\":[\"y\",\"x\"]", PROTO_ACCEPT,
     "submitted", "", "x,y", "N/A", "N/A", NULL, 0},
    {"fail reason set", "\"status\":\"failure\",\"updatedAt\":100,\"failReason\":\"N/A\"",
     "\"status\":\"failure\",\"updatedAt\":100,\"failReason\":\"SLIPPAGE\"", PROTO_ACCEPT,
     "failure", "", "", "SLIPPAGE", "N/A", NULL, 0},
    {"refund reason set", "\"status\":\"failure\",\"updatedAt\":100,\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"failure\",\"updatedAt\":101,\"failReason\":\"SLIPPAGE\","
     "\"refundFailReason\":\"AMOUNT_TOO_LOW_TO_REFUND\"",
     PROTO_ACCEPT, "failure", "", "", "SLIPPAGE", "AMOUNT_TOO_LOW_TO_REFUND", NULL, 0},
    {"reason back to N/A only",
     "\"status\":\"failure\",\"updatedAt\":100,\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"failure\",\"updatedAt\":100,\"failReason\":\"N/A\"", PROTO_DUPLICATE, NO_MERGE},
    {"N/A with a new hash keeps the reason",
     "\"status\":\"failure\",\"updatedAt\":100,\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"failure\",\"updatedAt\":100,\"failReason\":\"N/A\",\"inTxHashes\":[\"h\"]",
     PROTO_ACCEPT, "failure", "h", "", "SLIPPAGE", "N/A", NULL, 0},
    {"reasons absent", "\"status\":\"failure\",\"updatedAt\":100,\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"failure\",\"updatedAt\":100", PROTO_DUPLICATE, NO_MERGE},
    {"details set", P100 ",\"details\":null", P100 ",\"details\":\"reverted\"", PROTO_ACCEPT,
     "pending", "", "", "N/A", "N/A", "reverted", 0},
    {"same details", P100 ",\"details\":\"reverted\"", P100 ",\"details\":\"reverted\"",
     PROTO_DUPLICATE, NO_MERGE},
    {"details null on same status", P100 ",\"details\":\"reverted\"", P100 ",\"details\":null",
     PROTO_DUPLICATE, NO_MERGE},
    {"status change, equal updatedAt", P100, "\"status\":\"submitted\",\"updatedAt\":100",
     PROTO_ACCEPT, "submitted", "", "", "N/A", "N/A", NULL, 0},
    /* failReason is "N/A" on pending: the failure's reason does not follow (was "SLIPPAGE"
     * before the status-response rule) */
    {"status change keeps absent fields",
     "\"status\":\"failure\",\"updatedAt\":100,\"details\":\"d\",\"failReason\":\"SLIPPAGE\","
     "\"inTxHashes\":[\"a\"],\"originChainId\":10,\"destinationChainId\":137",
     "\"status\":\"pending\",\"updatedAt\":200", PROTO_ACCEPT, "pending", "a", "", "N/A",
     "N/A", "d", 0},
    {"status change takes present values (null clears)",
     "\"status\":\"failure\",\"updatedAt\":100,\"details\":\"d\",\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"pending\",\"updatedAt\":200,\"details\":null,\"failReason\":\"N/A\"",
     PROTO_ACCEPT, "pending", "", "", "N/A", "N/A", NULL, 0},
    /* reversals: no status is absorbing (these four rows were PROTO_STALE while success and
     * refund were terminal) */
    {"success -> pending, newer: reversal", S300, "\"status\":\"pending\",\"updatedAt\":400",
     PROTO_ACCEPT, "pending", "", "", "N/A", "N/A", NULL, REV},
    {"success -> failure, newer: reversal", S300,
     "\"status\":\"failure\",\"updatedAt\":400,\"failReason\":\"SLIPPAGE\"", PROTO_ACCEPT,
     "failure", "", "", "SLIPPAGE", "N/A", NULL, REV},
    {"success -> refund, newer: reversal", S300, "\"status\":\"refund\",\"updatedAt\":301",
     PROTO_ACCEPT, "refund", "", "", "UNKNOWN", "N/A", NULL, REV},
    {"refund -> success, newer: reversal", R300, "\"status\":\"success\",\"updatedAt\":400",
     PROTO_ACCEPT, "success", "", "", "N/A", "N/A", NULL, REV},
    {"refund(SLIPPAGE) -> failure, newer: reversal", R300 ",\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"failure\",\"updatedAt\":400", PROTO_ACCEPT, "failure", "", "", "SLIPPAGE",
     "N/A", NULL, REV},
    {"success -> failure, equal updatedAt", S300,
     "\"status\":\"failure\",\"updatedAt\":300,\"failReason\":\"SLIPPAGE\"", PROTO_STALE,
     NO_MERGE},
    {"success -> failure, older", S300,
     "\"status\":\"failure\",\"updatedAt\":299,\"failReason\":\"SLIPPAGE\"", PROTO_STALE,
     NO_MERGE},
    {"refund -> pending, equal updatedAt", R300, "\"status\":\"pending\",\"updatedAt\":300",
     PROTO_STALE, NO_MERGE},
    {"failure -> pending, equal updatedAt: not settled", F300 ",\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"pending\",\"updatedAt\":300", PROTO_ACCEPT, "pending", "", "", "N/A", "N/A",
     NULL, 0},
    {"failure -> refund is no reversal", F300, "\"status\":\"refund\",\"updatedAt\":400",
     PROTO_ACCEPT, "refund", "", "", "UNKNOWN", "N/A", NULL, 0},
    {"terminal, enriched", "\"status\":\"success\",\"updatedAt\":300,\"txHashes\":[\"x\"]",
     "\"status\":\"success\",\"updatedAt\":300,\"txHashes\":[\"x\",\"y\"]", PROTO_ACCEPT,
     "success", "", "x,y", "N/A", "N/A", NULL, 0},
    {"terminal, nothing new", "\"status\":\"success\",\"updatedAt\":300,\"txHashes\":[\"x\"]",
     "\"status\":\"success\",\"updatedAt\":900,\"txHashes\":[\"x\"]", PROTO_DUPLICATE, NO_MERGE},
    {"failure is not terminal", "\"status\":\"failure\",\"updatedAt\":300",
     "\"status\":\"pending\",\"updatedAt\":400", PROTO_ACCEPT, "pending", "", "", "N/A", "N/A",
     NULL, 0},
    /* a failure without a reason is "UNKNOWN", and the refund inherits it (was "N/A") */
    {"refund after failure", "\"status\":\"failure\",\"updatedAt\":300",
     "\"status\":\"refund\",\"updatedAt\":300", PROTO_ACCEPT, "refund", "", "", "UNKNOWN",
     "N/A", NULL, 0},
    {"unknown status is not terminal", "\"status\":\"mystery\",\"updatedAt\":300",
     "\"status\":\"pending\",\"updatedAt\":400", PROTO_ACCEPT, "pending", "", "", "N/A", "N/A",
     NULL, 0},
    {"to an unknown status", P100, "\"status\":\"mystery\",\"updatedAt\":400", PROTO_ACCEPT,
     "mystery", "", "", "N/A", "N/A", NULL, 0},

    /* failReason: the upstream's status-response rule */
    {"first failure without a reason", NULL, "\"status\":\"failure\",\"updatedAt\":100",
     PROTO_ACCEPT, "failure", "", "", "UNKNOWN", "N/A", NULL, 0},
    {"first fallback, reason N/A", NULL,
     "\"status\":\"fallback\",\"updatedAt\":100,\"failReason\":\"N/A\"", PROTO_ACCEPT,
     "fallback", "", "", "UNKNOWN", "N/A", NULL, 0},
    {"first pending with a reason", NULL, P100 ",\"failReason\":\"SLIPPAGE\"", PROTO_ACCEPT,
     "pending", "", "", "N/A", "N/A", NULL, 0},
    {"first success with a reason", NULL,
     "\"status\":\"success\",\"updatedAt\":100,\"failReason\":\"BRAND_NEW\"", PROTO_ACCEPT,
     "success", "", "", "N/A", "N/A", NULL, 0},
    {"first unknown status with a reason", NULL,
     "\"status\":\"mystery\",\"updatedAt\":100,\"failReason\":\"BRAND_NEW\"", PROTO_ACCEPT,
     "mystery", "", "", "BRAND_NEW", "N/A", NULL, PROTO_F_UNKNOWN_FAIL_REASON},
    {"failure -> pending: reason N/A", F300 ",\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"pending\",\"updatedAt\":400,\"failReason\":\"SLIPPAGE\"", PROTO_ACCEPT,
     "pending", "", "", "N/A", "N/A", NULL, 0},
    {"pending -> failure without a reason: UNKNOWN", P100,
     "\"status\":\"failure\",\"updatedAt\":200", PROTO_ACCEPT, "failure", "", "", "UNKNOWN",
     "N/A", NULL, 0},
    {"pending -> failure, reason N/A: UNKNOWN", P100,
     "\"status\":\"failure\",\"updatedAt\":200,\"failReason\":\"N/A\"", PROTO_ACCEPT, "failure",
     "", "", "UNKNOWN", "N/A", NULL, 0},
    {"failure(SLIPPAGE) -> refund without a reason keeps it", F300 ",\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"refund\",\"updatedAt\":400", PROTO_ACCEPT, "refund", "", "", "SLIPPAGE",
     "N/A", NULL, 0},
    {"failure(SLIPPAGE) -> refund, reason N/A keeps it", F300 ",\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"refund\",\"updatedAt\":400,\"failReason\":\"N/A\"", PROTO_ACCEPT, "refund",
     "", "", "SLIPPAGE", "N/A", NULL, 0},
    {"failure(SLIPPAGE) -> refund with its own reason", F300 ",\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"refund\",\"updatedAt\":400,\"failReason\":\"DOUBLE_SPEND\"", PROTO_ACCEPT,
     "refund", "", "", "DOUBLE_SPEND", "N/A", NULL, 0},
    {"fallback(X) -> refund keeps X", "\"status\":\"fallback\",\"updatedAt\":300,"
     "\"failReason\":\"DEPOSIT_REORGED\"", "\"status\":\"refund\",\"updatedAt\":400",
     PROTO_ACCEPT, "refund", "", "", "DEPOSIT_REORGED", "N/A", NULL, 0},
    {"unknown(X) -> refund: not inherited", "\"status\":\"mystery\",\"updatedAt\":300,"
     "\"failReason\":\"SLIPPAGE\"", "\"status\":\"refund\",\"updatedAt\":400", PROTO_ACCEPT,
     "refund", "", "", "UNKNOWN", "N/A", NULL, 0},
    {"failure(SLIPPAGE) -> unknown status: N/A", F300 ",\"failReason\":\"SLIPPAGE\"",
     "\"status\":\"mystery\",\"updatedAt\":400", PROTO_ACCEPT, "mystery", "", "", "N/A", "N/A",
     NULL, 0},
    {"failure(UNKNOWN), then a reason", F300, F300 ",\"failReason\":\"SLIPPAGE\"", PROTO_ACCEPT,
     "failure", "", "", "SLIPPAGE", "N/A", NULL, 0},
    {"pending: a reason adds nothing", P100, P100 ",\"failReason\":\"SLIPPAGE\"", PROTO_DUPLICATE,
     NO_MERGE},
    {"new known reasons are not flagged", P100,
     "\"status\":\"failure\",\"updatedAt\":200,\"failReason\":\"QUOTED_GAS_LIMIT_EXCEEDED\"",
     PROTO_ACCEPT, "failure", "", "", "QUOTED_GAS_LIMIT_EXCEEDED", "N/A", NULL, 0},
    {"unknown reasons are", P100,
     "\"status\":\"failure\",\"updatedAt\":200,\"failReason\":\"NOT_YET_DOCUMENTED\"",
     PROTO_ACCEPT, "failure", "", "", "NOT_YET_DOCUMENTED", "N/A", NULL,
     PROTO_F_UNKNOWN_FAIL_REASON},

    /* details of any JSON type: compared as text plus type */
    {"details object", P100, P100 ",\"details\":{\"revert\": \"0x08c379a0\", \"n\": [1, 2]}",
     PROTO_ACCEPT, "pending", "", "", "N/A", "N/A", "{\"revert\":\"0x08c379a0\",\"n\":[1,2]}",
     PROTO_HAS_DETAILS_JSON},
    {"same details object, other spacing", P100 ",\"details\":{\"a\":[1,true]}",
     P100 ",\"details\":{ \"a\" : [ 1 , true ] }", PROTO_DUPLICATE, NO_MERGE},
    {"details \"1\" then 1", P100 ",\"details\":\"1\"", P100 ",\"details\":1", PROTO_ACCEPT,
     "pending", "", "", "N/A", "N/A", "1", PROTO_HAS_DETAILS_JSON},
    {"details 1 then \"1\"", P100 ",\"details\":1", P100 ",\"details\":\"1\"", PROTO_ACCEPT,
     "pending", "", "", "N/A", "N/A", "1", 0},
    {"details object kept over a status change", P100 ",\"details\":[false]",
     "\"status\":\"submitted\",\"updatedAt\":200", PROTO_ACCEPT, "submitted", "", "", "N/A",
     "N/A", "[false]", PROTO_HAS_DETAILS_JSON},
    {"details object replaced by a string", P100 ",\"details\":[false]",
     "\"status\":\"submitted\",\"updatedAt\":200,\"details\":\"x\"", PROTO_ACCEPT, "submitted",
     "", "", "N/A", "N/A", "x", 0},
};

static void test_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        const struct row *r = &rows[i];
        struct status_event lobs, last, obs, next;
        status_event_init(&last);
        if (r->last != NULL) {
            obs_of(&lobs, r->last, PROTO_SRC_WS);
            assert_int_equal(decide(NULL, &lobs, &last), PROTO_ACCEPT);
            status_event_cleanup(&lobs);
        }
        obs_of(&obs, r->obs, PROTO_SRC_POLL);
        enum proto_verdict v = decide(r->last ? &last : NULL, &obs, &next);
        if (v != r->verdict)
            fail_msg("%s: %s, want %s", r->name, proto_verdict_name(v),
                     proto_verdict_name(r->verdict));
        if (v == PROTO_ACCEPT) {
            assert_string_equal(next.request_id, RID);
            assert_string_equal(next.status, r->status);
            assert_int_equal(next.st, proto_status_parse(r->status));
            assert_list(&next.in_tx_hashes, r->in);
            assert_list(&next.tx_hashes, r->out);
            assert_string_equal(next.fail_reason, r->fail);
            assert_string_equal(next.refund_fail_reason, r->refund);
            if (r->details == NULL)
                assert_null(next.details);
            else
                assert_string_equal(next.details, r->details);
            assert_int_equal(next.updated_at, obs.updated_at);
            assert_int_equal(next.seq, r->last ? 2 : 1);
            if (r->last)
                assert_string_equal(next.prev_status, last.status);
            else
                assert_null(next.prev_status);
            char id[PROTO_EVENT_ID_MAX];
            /* a new record starts its generation at now; a known one keeps last's */
            assert_int_equal(next.gen, r->last ? last.gen : 5000);
            proto_event_id(RID, next.seq, next.gen, id);
            assert_string_equal(next.event_id, id);
            assert_int_equal(next.created_at, 5000);
            assert_int_equal(next.source, PROTO_SRC_POLL);
            assert_int_equal(next.observed_at, 1000);
            assert_int_equal(next.flags & PROTO_F_UNKNOWN_STATUS,
                             next.st == PROTO_ST_OTHER ? PROTO_F_UNKNOWN_STATUS : 0);
            if ((next.flags & ROW_FLAGS) != r->flags)
                fail_msg("%s: flags 0x%x, want 0x%x", r->name, next.flags & ROW_FLAGS, r->flags);
            /* the merged state is already what the upstream shapes show */
            assert_string_equal(proto_fail_reason_out(&next), next.fail_reason);
        }
        status_event_cleanup(&next);
        status_event_cleanup(&obs);
        status_event_cleanup(&last);
    }
}

/* ---- merging details ----------------------------------------------------------------------- */

/* Apply observations in order; returns the final state in *state_out (caller cleans). */
static int apply_all(const char *const *obs_fields, size_t n, struct status_event *st)
{
    int accepted = 0;
    status_event_init(st);
    for (size_t i = 0; i < n; i++) {
        struct status_event obs, next;
        obs_of(&obs, obs_fields[i], PROTO_SRC_WS);
        if (decide(st->request_id ? st : NULL, &obs, &next) == PROTO_ACCEPT) {
            status_event_cleanup(st);
            *st = next;
            accepted++;
        } else {
            status_event_cleanup(&next);
        }
        status_event_cleanup(&obs);
    }
    return accepted;
}

static void test_deposit_merge(void **state)
{
    struct status_event st;
    (void)state;
    static const char *const seq1[] = {
        P100 ",\"depositAddress\":{\"address\":\"0xA\",\"depositAddressType\":\"open\","
        "\"depositor\":null,\"depositTxHash\":null}",
        /* the deposit lands: same status, the tx hash is new -> accepted */
        P100 ",\"depositAddress\":{\"address\":\"0xA\",\"depositAddressType\":\"open\","
        "\"depositor\":\"0xD\",\"depositTxHash\":\"0xH\"}",
        /* a lagging source without the hash: nothing new, and nothing erased */
        P100 ",\"depositAddress\":{\"address\":\"0xA\",\"depositAddressType\":\"open\","
        "\"depositor\":null,\"depositTxHash\":null}",
        P100 ",\"depositAddress\":null",
        /* a status change whose source does not carry the field keeps it */
        "\"status\":\"success\",\"updatedAt\":200",
    };
    assert_int_equal(apply_all(seq1, N_ROWS(seq1), &st), 3);
    assert_string_equal(st.status, "success");
    assert_non_null(st.deposit);
    assert_string_equal(st.deposit->address, "0xA");
    assert_string_equal(st.deposit->depositor, "0xD");
    assert_string_equal(st.deposit->deposit_tx_hash, "0xH");
    assert_true(st.flags & PROTO_HAS_DEPOSIT);
    status_event_cleanup(&st);

    static const char *const seq2[] = {
        P100 ",\"depositAddress\":{\"address\":\"0xA\"}",
        P100 ",\"depositAddress\":{\"address\":\"0xB\"}",             /* changed: accepted */
        "\"status\":\"failure\",\"updatedAt\":200,\"depositAddress\":null", /* cleared */
    };
    assert_int_equal(apply_all(seq2, N_ROWS(seq2), &st), 3);
    assert_null(st.deposit);
    status_event_cleanup(&st);

    /* chain ids and quoteCreatedAt are kept when an observation does not know them */
    static const char *const seq3[] = {
        P100 ",\"originChainId\":10,\"destinationChainId\":137,\"quoteCreatedAt\":90",
        "\"status\":\"submitted\",\"updatedAt\":200,\"destinationChainId\":8453",
    };
    assert_int_equal(apply_all(seq3, N_ROWS(seq3), &st), 2);
    assert_int_equal(st.origin_chain_id, 10);
    assert_int_equal(st.destination_chain_id, 8453);
    assert_int_equal(st.quote_created_at, 90);
    status_event_cleanup(&st);
}

static void test_flags_recomputed(void **state)
{
    struct status_event st;
    (void)state;
    static const char *const seq[] = {
        "\"status\":\"failure\",\"updatedAt\":100,\"failReason\":\"NEW_REASON\"",
        "\"status\":\"mystery\",\"updatedAt\":200", /* reasons absent: N/A, unflagged */
        "\"status\":\"pending\",\"updatedAt\":300,\"failReason\":\"N/A\","
        "\"refundFailReason\":\"N/A\"",
    };
    assert_int_equal(apply_all(seq, 1, &st), 1);
    assert_int_equal(st.flags & 0xff, PROTO_F_UNKNOWN_FAIL_REASON);
    status_event_cleanup(&st);
    /* an unknown status shows its own reason or "N/A" (before the status-response rule the
     * failure's NEW_REASON was kept, and flagged) */
    assert_int_equal(apply_all(seq, 2, &st), 2);
    assert_string_equal(st.fail_reason, "N/A");
    assert_int_equal(st.flags & 0xff, PROTO_F_UNKNOWN_STATUS);
    assert_true(st.flags & PROTO_HAS_REASONS);
    status_event_cleanup(&st);
    assert_int_equal(apply_all(seq, 3, &st), 3);
    assert_int_equal(st.flags & 0xff, 0);
    assert_int_equal(st.seq, 3);
    status_event_cleanup(&st);
}

static void test_hash_bound(void **state)
{
    char fields[4096], list[2048] = "";
    struct status_event st, obs, next;
    (void)state;
    for (int i = 0; i < PROTO_MAX_HASHES; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s\"h%d\"", i ? "," : "", i);
    snprintf(fields, sizeof(fields), P100 ",\"inTxHashes\":[%s]", list);
    const char *first[] = {fields};
    assert_int_equal(apply_all(first, 1, &st), 1);
    assert_int_equal(st.in_tx_hashes.n, PROTO_MAX_HASHES);
    /* no room: a new hash is not a change on the same status ... */
    obs_of(&obs, P100 ",\"inTxHashes\":[\"extra\"]", PROTO_SRC_WS);
    assert_int_equal(decide(&st, &obs, &next), PROTO_DUPLICATE);
    status_event_cleanup(&obs);
    /* ... and is dropped from an accepted status change */
    obs_of(&obs, "\"status\":\"submitted\",\"updatedAt\":200,\"inTxHashes\":[\"extra\"]",
           PROTO_SRC_WS);
    assert_int_equal(decide(&st, &obs, &next), PROTO_ACCEPT);
    assert_int_equal(next.in_tx_hashes.n, PROTO_MAX_HASHES);
    assert_string_equal(next.in_tx_hashes.v[PROTO_MAX_HASHES - 1], "h63");
    /* the bounded state still round-trips through storage */
    size_t len;
    char *rec = proto_event_record(&next, &len);
    struct status_event back;
    struct proto_err err;
    assert_int_equal(proto_event_from_record(rec, len, &back, &err), 0);
    assert_true(status_event_equal(&back, &next));
    status_event_cleanup(&back);
    free(rec);
    status_event_cleanup(&next);
    status_event_cleanup(&obs);
    status_event_cleanup(&st);
}

static void test_invalid_input(void **state)
{
    struct status_event a, b, next;
    enum proto_verdict v = PROTO_ACCEPT;
    (void)state;
    obs_of(&a, P100, PROTO_SRC_WS);
    status_event_init(&b);
    assert_int_equal(proto_lifecycle_decide(NULL, &b, 1, &v, &next), PROTO_EVALUE);
    assert_int_equal(v, PROTO_STALE);
    assert_null(next.request_id);
    b.request_id = strdup("other");
    b.status = strdup("pending");
    assert_int_equal(proto_lifecycle_decide(&a, &b, 1, &v, &next), PROTO_EVALUE);
    assert_int_equal(proto_lifecycle_decide(&b, &a, 1, &v, &next), PROTO_EVALUE);
    status_event_cleanup(&a);
    status_event_cleanup(&b);
}

/* ---- reversals ---------------------------------------------------------------------------- */

/* obs on st: the verdict; when accepted, st becomes the new state. */
static enum proto_verdict step(struct status_event *st, const char *fields)
{
    struct status_event obs, next;
    obs_of(&obs, fields, PROTO_SRC_WS);
    enum proto_verdict v = decide(st->request_id ? st : NULL, &obs, &next);
    if (v == PROTO_ACCEPT) {
        status_event_cleanup(st);
        *st = next;
    }
    status_event_cleanup(&obs);
    return v;
}

static void test_reversal_per_event(void **state)
{
    struct status_event st;
    (void)state;
    status_event_init(&st);
    assert_int_equal(step(&st, S300 ",\"inTxHashes\":[\"a\"],\"txHashes\":[\"x\"]"), PROTO_ACCEPT);
    assert_int_equal(st.flags & PROTO_F_REVERSAL, 0);
    /* success -> failure: a reversal, with the settled status as previousStatus */
    assert_int_equal(step(&st, "\"status\":\"failure\",\"updatedAt\":400,"
                               "\"failReason\":\"DEPOSIT_REORGED\""),
                     PROTO_ACCEPT);
    assert_true(st.flags & PROTO_F_REVERSAL);
    assert_string_equal(st.prev_status, "success");
    assert_string_equal(st.fail_reason, "DEPOSIT_REORGED");
    assert_int_equal(st.flags & PROTO_F_UNKNOWN_FAIL_REASON, 0);
    assert_list(&st.tx_hashes, "x");
    size_t len;
    char *body = proto_event_webhook_body(&st, &len);
    assert_non_null(strstr(body, "\"previousStatus\":\"success\",\"source\":\"ws\","
                                 "\"observedAt\":1000,\"flags\":[\"reversal\"]}}"));
    free(body);
    /* the flag belongs to that event only: an enrichment and the next status change lack it */
    assert_int_equal(step(&st, "\"status\":\"failure\",\"updatedAt\":400,\"inTxHashes\":[\"b\"]"),
                     PROTO_ACCEPT);
    assert_int_equal(st.flags & PROTO_F_REVERSAL, 0);
    assert_int_equal(step(&st, "\"status\":\"refund\",\"updatedAt\":500"), PROTO_ACCEPT);
    assert_int_equal(st.flags & PROTO_F_REVERSAL, 0);
    assert_string_equal(st.fail_reason, "DEPOSIT_REORGED"); /* inherited from the failure */
    /* refund -> success: a reversal again; equal updatedAt would have been stale */
    assert_int_equal(step(&st, "\"status\":\"success\",\"updatedAt\":500"), PROTO_STALE);
    assert_int_equal(step(&st, "\"status\":\"success\",\"updatedAt\":600"), PROTO_ACCEPT);
    assert_true(st.flags & PROTO_F_REVERSAL);
    assert_string_equal(st.prev_status, "refund");
    assert_string_equal(st.fail_reason, "N/A");
    assert_int_equal(st.seq, 5);
    /* an older observation never reverses */
    assert_int_equal(step(&st, "\"status\":\"failure\",\"updatedAt\":599"), PROTO_STALE);
    /* the flag survives storage */
    char *rec = proto_event_record(&st, &len);
    struct status_event back;
    struct proto_err err;
    assert_int_equal(proto_event_from_record(rec, len, &back, &err), 0);
    assert_true(status_event_equal(&back, &st));
    /* a stored reversal used as an observation starts no reversal of its own */
    struct status_event next;
    assert_int_equal(decide(NULL, &back, &next), PROTO_ACCEPT);
    assert_int_equal(next.flags & PROTO_F_REVERSAL, 0);
    status_event_cleanup(&next);
    status_event_cleanup(&back);
    free(rec);
    status_event_cleanup(&st);
}

/* A facts follow-up (relay/ingest/facts.c): the last event's state with PROTO_F_FACTS and the
 * seq it follows is one more event of the same status, flagged for that event only; once
 * another event came first it is a duplicate. */
static void test_facts_followup(void **state)
{
    struct status_event st, fu, next;
    (void)state;
    status_event_init(&st);
    assert_int_equal(step(&st, S300 ",\"inTxHashes\":[\"a\"],\"txHashes\":[\"x\"]"), PROTO_ACCEPT);
    assert_int_equal(status_event_copy(&fu, &st), 0);
    fu.flags = (fu.flags & ~PROTO_F_MASK) | PROTO_F_FACTS;
    fu.source = PROTO_SRC_REQUESTS;
    assert_int_equal(decide(&st, &fu, &next), PROTO_ACCEPT);
    assert_int_equal(next.seq, st.seq + 1);
    assert_string_equal(next.status, "success");
    assert_string_equal(next.prev_status, "success");
    assert_true(next.flags & PROTO_F_FACTS);
    assert_list(&next.tx_hashes, "x");
    size_t len;
    char *body = proto_event_webhook_body(&next, &len);
    assert_non_null(strstr(body, "\"source\":\"requests\",\"observedAt\":1000,"
                                 "\"flags\":[\"facts\"]}}"));
    free(body);
    /* against the follow-up itself (the seq moved on): a duplicate */
    struct status_event dup;
    assert_int_equal(decide(&next, &fu, &dup), PROTO_DUPLICATE);
    status_event_cleanup(&dup);
    /* a request never seen: nothing to follow */
    assert_int_equal(decide(NULL, &fu, &dup), PROTO_DUPLICATE);
    status_event_cleanup(&dup);
    /* the next observation does not inherit the flag */
    struct status_event obs, after;
    obs_of(&obs, "\"status\":\"success\",\"updatedAt\":300,\"txHashes\":[\"y\"]", PROTO_SRC_WS);
    assert_int_equal(decide(&next, &obs, &after), PROTO_ACCEPT);
    assert_int_equal(after.flags & PROTO_F_FACTS, 0);
    status_event_cleanup(&after);
    status_event_cleanup(&obs);
    status_event_cleanup(&next);
    status_event_cleanup(&fu);
    status_event_cleanup(&st);
}

/* ---- /requests/v3 additions: reorg details and unconfirmed Bitcoin deposits --------------- */

/* An observation from a /requests/v3 item: status, updatedAt second, extra "data" members
 * (after inTxs) and extra top-level members. */
static void item_of(struct status_event *ev, const char *status, int sec, const char *in_txs,
                    const char *data_extra, const char *top_extra)
{
    char buf[8192];
    struct proto_err err;
    snprintf(buf, sizeof(buf),
             "{\"id\":\"%s\",\"status\":\"%s\",\"updatedAt\":\"2026-08-18T10:41:%02dZ\"%s,"
             "\"data\":{\"failReason\":null,\"refundFailReason\":null,\"inTxs\":[%s]%s}}",
             RID, status, sec, top_extra, in_txs, data_extra);
    int rc = proto_normalize_requests_item(buf, strlen(buf), 1000, ev, &err);
    if (rc != 0)
        fail_msg("test bug: %s: %s %s %s", buf, proto_strerror(rc), err.field, err.msg);
}

#define TX_OK "{\"txHash\":\"0x01\",\"chainId\":10,\"status\":\"success\"}"
#define TX_REORGED "{\"txHash\":\"0x01\",\"chainId\":10,\"status\":\"failure\"}"
#define TX_NEW "{\"txHash\":\"0x02\",\"chainId\":10,\"status\":\"success\"}"
#define META(x) ",\"metadata\":{\"reorg\":{\"action\":\"" x "\",\"blockNumber\":7}}"

/* Decide item obs on st (NULL fields: not sent); returns the verdict and keeps the state. */
static enum proto_verdict step_item(struct status_event *st, const char *status, int sec,
                                    const char *in_txs, const char *data_extra,
                                    const char *top_extra)
{
    struct status_event obs, next;
    item_of(&obs, status, sec, in_txs, data_extra, top_extra);
    enum proto_verdict v = decide(st->request_id ? st : NULL, &obs, &next);
    if (v == PROTO_ACCEPT) {
        status_event_cleanup(st);
        *st = next;
    }
    status_event_cleanup(&obs);
    return v;
}

static void test_reorg_merge(void **state)
{
    struct status_event st;
    (void)state;
    status_event_init(&st);
    /* the deposit was reorged out: the first observation carries the details */
    assert_int_equal(step_item(&st, "pending", 10, TX_REORGED, "", META("refund")),
                     PROTO_ACCEPT);
    assert_string_equal(st.reorg, "{\"inTxs\":[{\"txHash\":\"0x01\",\"chainId\":10,"
                                  "\"status\":\"failure\"}],\"metadata\":{\"action\":"
                                  "\"refund\",\"blockNumber\":7}}");
    assert_true(st.flags & PROTO_HAS_REORG);
    /* the same again: a duplicate; without reorg details and nothing else new: a duplicate */
    assert_int_equal(step_item(&st, "pending", 10, TX_REORGED, "", META("refund")),
                     PROTO_DUPLICATE);
    assert_int_equal(step_item(&st, "pending", 11, TX_OK, "", ""), PROTO_DUPLICATE);
    /* different reorg details on the same status: an enrichment */
    assert_int_equal(step_item(&st, "pending", 12, TX_REORGED, META("fill"), ""), PROTO_ACCEPT);
    assert_non_null(strstr(st.reorg, "\"action\":\"fill\""));
    /* same status, something else new, no reorg details: the last ones are kept */
    assert_int_equal(step_item(&st, "pending", 13, TX_OK "," TX_NEW, "", ""), PROTO_ACCEPT);
    assert_non_null(strstr(st.reorg, "\"action\":\"fill\""));
    assert_true(st.flags & PROTO_HAS_REORG);
    /* a status change without reorg details clears them */
    assert_int_equal(step_item(&st, "submitted", 14, TX_OK, "", ""), PROTO_ACCEPT);
    assert_null(st.reorg);
    assert_int_equal(st.flags & PROTO_HAS_REORG, 0);
    /* a status change with reorg details takes them */
    assert_int_equal(step_item(&st, "refund", 15, TX_REORGED, "", META("refund")),
                     PROTO_ACCEPT);
    assert_non_null(strstr(st.reorg, "\"action\":\"refund\""));
    assert_string_equal(st.fail_reason, "UNKNOWN");
    /* and the next status change (a reversal) drops them again */
    assert_int_equal(step_item(&st, "success", 16, TX_OK, "", ""), PROTO_ACCEPT);
    assert_null(st.reorg);
    assert_true(st.flags & PROTO_F_REVERSAL);
    status_event_cleanup(&st);
}

#define BTC_ROUTE                                                                          \
    ",\"route\":{\"quoted\":{\"origin\":{\"inputCurrency\":{\"currency\":{\"chainId\":8253038}}}}}"
#define BTC_MEMPOOL "{\"txHash\":\"btc1\",\"chainId\":8253038,\"block\":null}"
#define BTC_MINED "{\"txHash\":\"btc1\",\"chainId\":8253038,\"block\":912345}"

static void test_unconfirmed_deposit(void **state)
{
    struct status_event st;
    (void)state;
    status_event_init(&st);
    assert_int_equal(step_item(&st, "pending", 10, BTC_MEMPOOL, BTC_ROUTE, ""), PROTO_ACCEPT);
    assert_true(st.flags & PROTO_F_UNCONFIRMED_DEPOSIT);
    size_t len;
    char *body = proto_event_webhook_body(&st, &len);
    assert_non_null(strstr(body, "\"flags\":[\"unconfirmedDeposit\"]}}"));
    free(body);
    /* an enrichment still in the mempool keeps it */
    assert_int_equal(step_item(&st, "pending", 11, BTC_MEMPOOL ",{\"txHash\":\"btc2\"}",
                               BTC_ROUTE, ""),
                     PROTO_ACCEPT);
    assert_true(st.flags & PROTO_F_UNCONFIRMED_DEPOSIT);
    /* a pending observation of a source that cannot tell (websocket) keeps it */
    assert_int_equal(step(&st, "\"status\":\"pending\",\"updatedAt\":1787049672000,"
                               "\"inTxHashes\":[\"btc3\"]"),
                     PROTO_ACCEPT);
    assert_true(st.flags & PROTO_F_UNCONFIRMED_DEPOSIT);
    /* mined, nothing else new: news by itself (the deposit confirmed), the flag is cleared */
    assert_int_equal(step_item(&st, "pending", 13, BTC_MINED, BTC_ROUTE, ""), PROTO_ACCEPT);
    assert_int_equal(st.flags & PROTO_F_UNCONFIRMED_DEPOSIT, 0);
    assert_int_equal(step_item(&st, "pending", 14, BTC_MINED, BTC_ROUTE, ""), PROTO_DUPLICATE);
    /* a websocket pending, then /requests/v3 tells the deposit is in the mempool: news too */
    assert_int_equal(step(&st, "\"status\":\"pending\",\"updatedAt\":1787049690000,"
                               "\"inTxHashes\":[\"btc5\"]"),
                     PROTO_ACCEPT);
    assert_int_equal(st.flags & PROTO_F_UNCONFIRMED_DEPOSIT, 0);
    assert_int_equal(step_item(&st, "pending", 31, BTC_MEMPOOL, BTC_ROUTE, ""), PROTO_ACCEPT);
    assert_true(st.flags & PROTO_F_UNCONFIRMED_DEPOSIT);
    /* and so does any status change, flagged observation or not */
    assert_int_equal(step_item(&st, "pending", 50, BTC_MEMPOOL ",{\"txHash\":\"btc4\"}",
                               BTC_ROUTE, ""),
                     PROTO_ACCEPT);
    assert_true(st.flags & PROTO_F_UNCONFIRMED_DEPOSIT);
    assert_int_equal(step_item(&st, "submitted", 51, BTC_MEMPOOL, BTC_ROUTE, ""), PROTO_ACCEPT);
    assert_int_equal(st.flags & PROTO_F_UNCONFIRMED_DEPOSIT, 0);
    status_event_cleanup(&st);
    /* a flagged observation of another status never carries it into the state */
    struct status_event obs, next;
    item_of(&obs, "pending", 10, BTC_MEMPOOL, BTC_ROUTE, "");
    free(obs.status);
    obs.status = strdup("depositing");
    assert_int_equal(decide(NULL, &obs, &next), PROTO_ACCEPT);
    assert_int_equal(next.flags & PROTO_F_UNCONFIRMED_DEPOSIT, 0);
    status_event_cleanup(&next);
    status_event_cleanup(&obs);
}

/* ---- out-of-order delivery ----------------------------------------------------------------- */

static int rank(const char *status)
{
    static const char *const order[] = {"pending", "submitted", "failure", "refund", "success"};
    for (int i = 0; i < 5; i++)
        if (strcmp(order[i], status) == 0)
            return i;
    return -1;
}

/* Visit every permutation of idx[k..n) (Heap-style recursion). */
typedef void perm_cb(const size_t *idx, size_t n, void *arg);

static void permute(size_t *idx, size_t k, size_t n, perm_cb *fn, void *arg)
{
    if (k == n) {
        fn(idx, n, arg);
        return;
    }
    for (size_t i = k; i < n; i++) {
        size_t t = idx[k];
        idx[k] = idx[i];
        idx[i] = t;
        permute(idx, k + 1, n, fn, arg);
        idx[i] = idx[k];
        idx[k] = t;
    }
}

struct order_case {
    const char *const *obs;
    const struct status_event *want; /* the state after in-order delivery */
    int runs;
};

/* Deliver in this order: no status regression, seq +1 per accepted event, the final state
 * equals the in-order one. */
static void check_order(const size_t *idx, size_t n, void *arg)
{
    struct order_case *oc = arg;
    struct status_event st;
    int have = 0, last_rank = -1;
    int64_t last_updated = 0;
    uint64_t seq = 0;
    status_event_init(&st);
    for (size_t i = 0; i < n; i++) {
        struct status_event obs, next;
        obs_of(&obs, oc->obs[idx[i]], PROTO_SRC_WS);
        if (decide(have ? &st : NULL, &obs, &next) == PROTO_ACCEPT) {
            assert_true(next.updated_at >= last_updated);
            /* within one lifecycle failure may go back to pending; the test sequences are
             * monotone in rank except for that legal step */
            if (!(last_rank == rank("failure") && rank(next.status) == rank("pending")))
                assert_true(rank(next.status) >= last_rank);
            assert_int_equal(next.seq, ++seq);
            last_rank = rank(next.status);
            last_updated = next.updated_at;
            status_event_cleanup(&st);
            st = next;
            have = 1;
        } else {
            status_event_cleanup(&next);
        }
        status_event_cleanup(&obs);
    }
    assert_string_equal(st.status, oc->want->status);
    assert_int_equal(st.updated_at, oc->want->updated_at);
    assert_true(strv_eq(&st.in_tx_hashes, &oc->want->in_tx_hashes));
    assert_true(strv_eq(&st.tx_hashes, &oc->want->tx_hashes));
    assert_string_equal(st.fail_reason, oc->want->fail_reason);
    assert_string_equal(st.refund_fail_reason, oc->want->refund_fail_reason);
    status_event_cleanup(&st);
    oc->runs++;
}

static void run_orders(const char *const *obs, size_t n, int want_runs)
{
    struct status_event want;
    struct order_case oc = {obs, &want, 0};
    size_t idx[8];
    apply_all(obs, n, &want);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    permute(idx, 0, n, check_order, &oc);
    assert_int_equal(oc.runs, want_runs);
    status_event_cleanup(&want);
}

static void test_shuffled_success(void **state)
{
    (void)state;
    /* each observation carries everything known so far, as the upstream's do */
    static const char *const obs[] = {
        "\"status\":\"pending\",\"updatedAt\":100,\"inTxHashes\":[\"in1\"]",
        "\"status\":\"submitted\",\"updatedAt\":200,\"inTxHashes\":[\"in1\"],"
        "\"txHashes\":[\"out1\"]",
        "\"status\":\"success\",\"updatedAt\":300,\"inTxHashes\":[\"in1\"],"
        "\"txHashes\":[\"out1\"]",
    };
    run_orders(obs, 3, 6);
    /* every observation delivered twice (websocket and poll): 6! orders */
    static const char *const twice[] = {obs[0], obs[1], obs[2], obs[0], obs[1], obs[2]};
    run_orders(twice, 6, 720);
}

static void test_failure_then_refund(void **state)
{
    struct status_event st;
    (void)state;
    static const char *const obs[] = {
        "\"status\":\"pending\",\"updatedAt\":100,\"inTxHashes\":[\"in1\"]",
        "\"status\":\"failure\",\"updatedAt\":200,\"inTxHashes\":[\"in1\"],"
        "\"failReason\":\"SLIPPAGE\",\"refundFailReason\":\"N/A\"",
        "\"status\":\"pending\",\"updatedAt\":300,\"inTxHashes\":[\"in1\"],"
        "\"failReason\":\"N/A\",\"refundFailReason\":\"N/A\"",
        "\"status\":\"refund\",\"updatedAt\":400,\"inTxHashes\":[\"in1\"],"
        "\"txHashes\":[\"rf1\"],\"failReason\":\"SLIPPAGE\",\"refundFailReason\":\"N/A\"",
    };
    /* in order: all four are events, with the expected chain of previous statuses */
    static const char *const prev[] = {NULL, "pending", "failure", "pending"};
    status_event_init(&st);
    for (size_t i = 0; i < 4; i++) {
        struct status_event o, next;
        obs_of(&o, obs[i], PROTO_SRC_WS);
        assert_int_equal(decide(i ? &st : NULL, &o, &next), PROTO_ACCEPT);
        assert_int_equal(next.seq, i + 1);
        if (prev[i] == NULL)
            assert_null(next.prev_status);
        else
            assert_string_equal(next.prev_status, prev[i]);
        if (i > 0)
            assert_string_not_equal(next.event_id, st.event_id);
        status_event_cleanup(&st);
        st = next;
        status_event_cleanup(&o);
    }
    assert_string_equal(st.status, "refund");
    assert_list(&st.tx_hashes, "rf1");
    assert_string_equal(st.fail_reason, "SLIPPAGE");
    /* after the settled refund, a pending with the same updatedAt is stale; a newer one is a
     * reversal (it was stale while refund was terminal) */
    struct status_event late, next;
    obs_of(&late, "\"status\":\"pending\",\"updatedAt\":400", PROTO_SRC_POLL);
    assert_int_equal(decide(&st, &late, &next), PROTO_STALE);
    status_event_cleanup(&late);
    obs_of(&late, "\"status\":\"pending\",\"updatedAt\":500", PROTO_SRC_POLL);
    assert_int_equal(decide(&st, &late, &next), PROTO_ACCEPT);
    assert_true(next.flags & PROTO_F_REVERSAL);
    assert_string_equal(next.prev_status, "refund");
    assert_string_equal(next.fail_reason, "N/A");
    status_event_cleanup(&next);
    status_event_cleanup(&late);
    status_event_cleanup(&st);
    /* in any order the request ends refunded at 400 */
    run_orders(obs, 4, 24);
}

/* ---- allocation failure ------------------------------------------------------------------ */

/* Fail the 1st, 2nd, ... allocation of deciding obs on lp until it succeeds: each run either
 * accepts with the unfailing result or returns PROTO_ENOMEM, and leaks nothing. */
static void chaos_decide(const struct status_event *lp, const struct status_event *obs)
{
    struct status_event ref;
    assert_int_equal(decide(lp, obs, &ref), PROTO_ACCEPT);
    long n;
    for (n = 1;; n++) {
        struct status_event next;
        enum proto_verdict v;
        long live = chaos_live;
        chaos_arm(n);
        int rc = proto_lifecycle_decide(lp, obs, 5000, &v, &next);
        chaos_disarm();
        assert_int_equal(rc != 0, chaos_tripped);
        if (rc != 0) {
            assert_int_equal(rc, PROTO_ENOMEM);
            assert_null(next.request_id);
        } else {
            assert_int_equal(v, PROTO_ACCEPT);
            assert_true(status_event_equal(&next, &ref));
            status_event_cleanup(&next);
        }
        assert_int_equal(chaos_live, live);
        if (rc == 0)
            break;
    }
    assert_true(n > 5);
    status_event_cleanup(&ref);
}

static void test_chaos(void **state)
{
    static const struct { const char *last, *obs; } cases[] = {
        {NULL, "\"status\":\"pending\",\"updatedAt\":100,\"inTxHashes\":[\"a\",\"b\"],"
               "\"details\":\"d\",\"depositAddress\":{\"address\":\"0xA\"}"},
        {"\"status\":\"pending\",\"updatedAt\":100,\"inTxHashes\":[\"a\"],\"txHashes\":[\"x\"],"
         "\"details\":\"d\",\"failReason\":\"SLIPPAGE\",\"depositAddress\":{\"address\":\"0xA\","
         "\"depositAddressType\":\"open\"}",
         "\"status\":\"pending\",\"updatedAt\":200,\"inTxHashes\":[\"b\"],\"txHashes\":[\"y\"],"
         "\"depositAddress\":{\"depositTxHash\":\"0xH\",\"depositor\":\"0xD\"}"},
        {"\"status\":\"failure\",\"updatedAt\":100,\"details\":\"d\",\"failReason\":\"SLIPPAGE\"",
         "\"status\":\"refund\",\"updatedAt\":200,\"refundFailReason\":\"NEW\""},
        /* first failure without a reason ("UNKNOWN" is allocated), then a reversal */
        {NULL, "\"status\":\"failure\",\"updatedAt\":100,\"details\":{\"a\":[1]}"},
        {"\"status\":\"success\",\"updatedAt\":100,\"details\":{\"a\":[1]}",
         "\"status\":\"failure\",\"updatedAt\":200,\"inTxHashes\":[\"b\"]"},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(cases); i++) {
        struct status_event last, obs, lobs;
        status_event_init(&last);
        if (cases[i].last != NULL) {
            obs_of(&lobs, cases[i].last, PROTO_SRC_WS);
            assert_int_equal(decide(NULL, &lobs, &last), PROTO_ACCEPT);
            status_event_cleanup(&lobs);
        }
        obs_of(&obs, cases[i].obs, PROTO_SRC_POLL);
        chaos_decide(cases[i].last ? &last : NULL, &obs);
        status_event_cleanup(&obs);
        status_event_cleanup(&last);
    }
    /* reorg details: first seen, enriched on the same status */
    struct status_event last, obs;
    item_of(&obs, "pending", 10, TX_REORGED, "", META("refund"));
    chaos_decide(NULL, &obs);
    assert_int_equal(decide(NULL, &obs, &last), PROTO_ACCEPT);
    status_event_cleanup(&obs);
    item_of(&obs, "pending", 11, TX_REORGED, META("fill"), "");
    chaos_decide(&last, &obs);
    status_event_cleanup(&obs);
    status_event_cleanup(&last);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_deposit_merge),
        cmocka_unit_test(test_flags_recomputed),
        cmocka_unit_test(test_hash_bound),
        cmocka_unit_test(test_invalid_input),
        cmocka_unit_test(test_reversal_per_event),
        cmocka_unit_test(test_reorg_merge),
        cmocka_unit_test(test_unconfirmed_deposit),
        cmocka_unit_test(test_shuffled_success),
        cmocka_unit_test(test_failure_then_refund),
        cmocka_unit_test(test_chaos),
        cmocka_unit_test(test_facts_followup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
