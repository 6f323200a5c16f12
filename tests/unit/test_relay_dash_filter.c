/* test_relay_dash_filter.c - unit tests for relay/edge/dash_filter.c (dashboard "broad" filters):
 * validation of client filters, matching (OR within a list, AND across lists), the canonical
 * JSON both threads exchange, and equality. runs on: the test process, one thread. */
#include "relay/edge/dash_filter.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Parse a client's filters text; returns the rc and leaves *why set on errors. */
static int from_text(const char *text, struct proto_filter *f, const char **why)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    assert_non_null(j);
    *why = NULL;
    int rc = dash_broad_from_json(j, f, why);
    json_decref(j);
    return rc;
}

/* Match an event known only by its routing fields (no frame text). */
static int bm(const struct proto_filter *f, const char *status, int64_t origin, int64_t dest)
{
    struct dash_frame fr;
    dash_frame_init(&fr, NULL, 0, status, "0xabc", origin, dest);
    int r = dash_broad_match(f, &fr);
    dash_frame_cleanup(&fr);
    return r;
}

/* Match a frame text (the shape of proto_event_ws_frame). */
static int fm(const char *filters, const char *frame)
{
    struct proto_filter f;
    const char *why = NULL;
    json_t *j = json_loads(filters, 0, NULL);
    assert_non_null(j);
    if (dash_broad_from_json(j, &f, &why) != 0)
        fail_msg("refused %s: %s", filters, why);
    json_decref(j);
    struct dash_frame fr;
    dash_frame_init(&fr, frame, strlen(frame), "failure", "0xabc", 1, 8453);
    int r = dash_broad_match(&f, &fr);
    dash_frame_cleanup(&fr);
    dash_broad_cleanup(&f);
    return r;
}

#define FRAME(data, rel)                                                                       \
    "{\"event\":\"request.status.updated\",\"data\":{\"status\":\"failure\"," data "}," \
    "\"publishedAt\":1,\"statusrelay\":{\"eventId\":\"evt_1\",\"seq\":2" rel "}}"

/* users .. metadata are read from the frame's JSON */
static void test_frame_fields(void **state)
{
    const char *fr = FRAME("\"depositAddress\":{\"address\":\"0xd\",\"depositor\":\"0xAbC\"},"
                           "\"referrer\":\"shop-1\",\"failReason\":\"SLIPPAGE\","
                           "\"refundFailReason\":\"N/A\"",
                           ",\"flags\":[\"reversal\"],\"reorg\":{\"inTxs\":[]},"
                           "\"metadata\":{\"order\":\"A-1\",\"n\":3,\"vip\":true},"
                           "\"request\":{\"user\":\"0xUser\",\"recipient\":\"bc1qrcpt\"}");
    assert_true(fm("{\"users\":\"0xabc\"}", fr));  /* the depositor, any case */
    assert_true(fm("{\"users\":\"0xUSER\"}", fr)); /* request facts: user */
    assert_true(fm("{\"users\":[\"x\",\"bc1qrcpt\"]}", fr));
    assert_false(fm("{\"users\":\"BC1QRCPT\"}", fr)); /* not 0x: exact */
    assert_true(fm("{\"referrers\":[\"shop-2\",\"shop-1\"]}", fr));
    assert_false(fm("{\"referrers\":\"shop\"}", fr));
    assert_true(fm("{\"failReasons\":\"SLIPPAGE\",\"refundFailReasons\":\"N/A\"}", fr));
    assert_false(fm("{\"failReasons\":\"N/A\"}", fr));
    assert_true(fm("{\"flags\":\"reversal\"}", fr));
    assert_true(fm("{\"flags\":[\"facts\",\"reorg\"]}", fr));
    assert_false(fm("{\"flags\":\"facts\"}", fr));
    assert_true(fm("{\"metadata\":{\"order\":\"A-1\",\"n\":3.0}}", fr));
    assert_true(fm("{\"metadata\":{\"vip\":true},\"status\":\"failure\"}", fr));
    assert_false(fm("{\"metadata\":{\"order\":\"A-2\"}}", fr));
    assert_false(fm("{\"metadata\":{\"n\":\"3\"}}", fr));
    assert_false(fm("{\"metadata\":{\"order\":\"A-1\"},\"status\":\"success\"}", fr));
    const char *bare = FRAME("\"depositAddress\":null,\"referrer\":null,\"failReason\":\"N/A\","
                             "\"refundFailReason\":\"N/A\"", "");
    assert_false(fm("{\"users\":\"0xabc\"}", bare));
    assert_false(fm("{\"referrers\":\"shop-1\"}", bare));
    assert_false(fm("{\"flags\":\"reversal\"}", bare));
    assert_false(fm("{\"metadata\":{\"order\":\"A-1\"}}", bare));
    assert_true(fm("{\"failReasons\":\"N/A\"}", bare));
    assert_false(fm("{\"referrers\":\"shop-1\"}", "{not json")); /* unreadable: no match */
    assert_true(fm("{\"status\":\"failure\"}", "{not json")); /* routing fields suffice */
}

static void test_empty_matches_all(void **state)
{
    struct proto_filter f;
    const char *why;
    assert_int_equal(dash_broad_from_json(NULL, &f, &why), 0);
    assert_true(dash_broad_is_all(&f));
    assert_true(bm(&f, "waiting", 1, 8453));
    assert_int_equal(from_text("{}", &f, &why), 0);
    assert_true(dash_broad_is_all(&f));
    assert_int_equal(from_text("{\"id\":\"0xabc\"}", &f, &why), 0); /* id: the caller's */
    assert_true(dash_broad_is_all(&f));
    dash_broad_cleanup(&f);
}

static void test_match_or_within_and_across(void **state)
{
    struct proto_filter f;
    const char *why;
    assert_int_equal(from_text("{\"status\":[\"success\",\"refund\"],\"originChainIds\":[1,8453],"
                               "\"destinationChainIds\":42161}",
                               &f, &why),
                     0);
    assert_false(dash_broad_is_all(&f));
    assert_true(bm(&f, "success", 1, 42161));
    assert_true(bm(&f, "refund", 8453, 42161));
    assert_false(bm(&f, "pending", 1, 42161));   /* status not listed */
    assert_false(bm(&f, "success", 10, 42161));  /* origin not listed */
    assert_false(bm(&f, "success", 1, 8453));    /* destination not listed */
    assert_false(bm(&f, "succes", 1, 42161));    /* exact status only */
    dash_broad_cleanup(&f);

    assert_int_equal(from_text("{\"status\":\"failure\"}", &f, &why), 0); /* one value */
    assert_true(bm(&f, "failure", 0, 0));
    assert_false(bm(&f, "success", 0, 0));
    dash_broad_cleanup(&f);
}

static void test_invalid_refused(void **state)
{
    static const char *bad[] = {
        "[]",
        "\"success\"",
        "{\"statuses\":[\"success\"]}",
        "{\"status\":[]}",
        "{\"status\":[\"\"]}",
        "{\"status\":[\"a-status-that-is-longer-than-31-chars\"]}",
        "{\"status\":[1]}",
        "{\"originChainIds\":[]}",
        "{\"originChainIds\":[0]}",
        "{\"originChainIds\":[-1]}",
        "{\"destinationChainIds\":[\"8453\"]}",
        "{\"destinationChainIds\":1.5}",
        "{\"status\":\"success\",\"originChainIds\":\"x\"}",
        "{\"users\":[]}",
        "{\"users\":\"has space\"}",
        "{\"referrers\":[\"\"]}",
        "{\"failReasons\":1}",
        "{\"flags\":\"bogus\"}",
        "{\"metadata\":{}}",
        "{\"metadata\":[]}",
        "{\"metadata\":null}",
        "{\"metadata\":{\"a\":{\"b\":1}}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct proto_filter f;
        const char *why = NULL;
        int rc = from_text(bad[i], &f, &why);
        if (rc != -1 || why == NULL)
            fail_msg("accepted: %s", bad[i]);
        assert_true(dash_broad_is_all(&f)); /* out is clean after an error */
    }
    /* 65 values is one too many */
    json_t *a = json_array();
    for (int i = 1; i <= 65; i++)
        json_array_append_new(a, json_integer(i));
    json_t *o = json_pack("{s:o}", "originChainIds", a);
    struct proto_filter f;
    const char *why = NULL;
    assert_int_equal(dash_broad_from_json(o, &f, &why), -1);
    assert_non_null(why);
    json_decref(o);
}

static void test_canonical_round_trip(void **state)
{
    struct proto_filter f, g;
    const char *why;
    assert_int_equal(from_text("{\"destinationChainIds\":[10],\"status\":\"pending\"}", &f, &why), 0);
    json_t *j = dash_broad_to_json(&f);
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    assert_non_null(text);
    assert_string_equal(text, "{\"destinationChainIds\":[10],\"status\":[\"pending\"]}");
    assert_int_equal(dash_broad_parse(text, strlen(text), &g), 0);
    assert_true(dash_broad_equal(&f, &g));
    assert_true(bm(&g, "pending", 5, 10));
    assert_false(bm(&g, "pending", 5, 11));
    free(text);
    dash_broad_cleanup(&g);
    assert_int_equal(from_text("{\"destinationChainIds\":[11],\"status\":\"pending\"}", &g, &why), 0);
    assert_false(dash_broad_equal(&f, &g));
    dash_broad_cleanup(&f);
    dash_broad_cleanup(&g);
    assert_int_equal(dash_broad_parse("{not json", 9, &g), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_matches_all),
        cmocka_unit_test(test_frame_fields),
        cmocka_unit_test(test_match_or_within_and_across),
        cmocka_unit_test(test_invalid_refused),
        cmocka_unit_test(test_canonical_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
