/* test_stream_vec.c - unit tests for protocol/stream_vec.c: the vector cursor of a
 * partitioned event stream as table rows (accepted vectors with their components, rejected
 * text), formatting (round trip, the bound, a buffer too small), and the component-wise
 * order the dashboards and the page rely on.
 * runs on: the test process, one thread. Run from the repository root. */
#include "tests/unit/proto_test.h"

#include "protocol/proto.c"
#include "protocol/stream_vec.c"

#define N_ROWS(a) (sizeof(a) / sizeof((a)[0]))

static void test_parse_rows(void **state)
{
    static const struct {
        const char *in;
        int want; /* components, or -1 */
        uint64_t ms0, seq0, msl, seql; /* first and last component */
    } rows[] = {
        {"1712345678901-7", 1, 1712345678901u, 7, 1712345678901u, 7},
        {"42", 1, 42, 0, 42, 0},
        {"0-0,0-0,0-0", 3, 0, 0, 0, 0},
        {"1-2,3-4,5-6", 3, 1, 2, 5, 6},
        {"1-2,3", 2, 1, 2, 3, 0},
        {"18446744073709551615-18446744073709551615", 1, UINT64_MAX, UINT64_MAX, UINT64_MAX,
         UINT64_MAX},
        {"", -1, 0, 0, 0, 0},
        {",", -1, 0, 0, 0, 0},
        {"1-2,", -1, 0, 0, 0, 0},
        {",1-2", -1, 0, 0, 0, 0},
        {"1-2,,3-4", -1, 0, 0, 0, 0},
        {"1-2 ,3-4", -1, 0, 0, 0, 0},
        {"1-", -1, 0, 0, 0, 0},
        {"-1", -1, 0, 0, 0, 0},
        {"a-1,2-3", -1, 0, 0, 0, 0},
        {"1-2;3-4", -1, 0, 0, 0, 0},
        {"123456789012345678901234567890123456789012345678", -1, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct svec_pos v[SVEC_MAX];
        int n = svec_parse(rows[i].in, v, SVEC_MAX);
        if (n != rows[i].want)
            fail_msg("row %zu (%s): %d components, want %d", i, rows[i].in, n, rows[i].want);
        if (n > 0) {
            assert_true(v[0].ms == rows[i].ms0 && v[0].seq == rows[i].seq0);
            assert_true(v[n - 1].ms == rows[i].msl && v[n - 1].seq == rows[i].seql);
        }
    }
    assert_int_equal(svec_parse(NULL, NULL, 0), -1);
}

/* svec_parse_after: a bare ms component is "after that millisecond" (seq UINT64_MAX); a
 * component with a seq keeps it; what svec_parse rejects stays rejected. */
static void test_parse_after_rows(void **state)
{
    static const struct {
        const char *in;
        int want;
        uint64_t ms0, seq0, msl, seql;
    } rows[] = {
        {"42", 1, 42, UINT64_MAX, 42, UINT64_MAX},
        {"42-0", 1, 42, 0, 42, 0},
        {"1-2,3", 2, 1, 2, 3, UINT64_MAX},
        {"5,6-7", 2, 5, UINT64_MAX, 6, 7},
        {"18446744073709551615-18446744073709551615", 1, UINT64_MAX, UINT64_MAX, UINT64_MAX,
         UINT64_MAX},
        {"", -1, 0, 0, 0, 0},
        {"1-", -1, 0, 0, 0, 0},
        {"1-2,", -1, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct svec_pos v[SVEC_MAX];
        int n = svec_parse_after(rows[i].in, v, SVEC_MAX);
        assert_int_equal(n, rows[i].want);
        if (n < 1)
            continue;
        assert_true(v[0].ms == rows[i].ms0 && v[0].seq == rows[i].seq0);
        assert_true(v[n - 1].ms == rows[i].msl && v[n - 1].seq == rows[i].seql);
    }
    struct svec_pos one;
    assert_int_equal(svec_parse_after("1-2,3-4", &one, 1), -1); /* more than max */
}

static void test_bound(void **state)
{
    /* SVEC_MAX components parse; one more does not; fewer room than components fails */
    char text[SVEC_TEXT_MAX + SVEC_ID_TEXT];
    struct svec_pos v[SVEC_MAX + 1], back[SVEC_MAX];
    for (unsigned i = 0; i <= SVEC_MAX; i++)
        v[i] = (struct svec_pos){UINT64_MAX - i, UINT64_MAX};
    int len = svec_format(text, SVEC_TEXT_MAX, v, SVEC_MAX);
    assert_true(len > 0 && (size_t)len < SVEC_TEXT_MAX);
    assert_int_equal(svec_parse(text, back, SVEC_MAX), SVEC_MAX);
    assert_memory_equal(back, v, sizeof(back));
    assert_int_equal(svec_parse(text, back, 3), -1);
    assert_int_equal(svec_format(text, sizeof(text), v, SVEC_MAX + 1) > 0, 1);
    assert_int_equal(svec_parse(text, back, SVEC_MAX), -1);
}

static void test_format(void **state)
{
    struct svec_pos v[3] = {{1712345678901u, 7}, {0, 0}, {5, 18446744073709551615u}};
    char buf[SVEC_TEXT_MAX];
    assert_int_equal(svec_format(buf, sizeof(buf), v, 1), 15);
    assert_string_equal(buf, "1712345678901-7"); /* one partition: a plain stream id */
    assert_int_equal(svec_format(buf, sizeof(buf), v, 3), 42);
    assert_string_equal(buf, "1712345678901-7,0-0,5-18446744073709551615");
    char small[10];
    assert_int_equal(svec_format(small, sizeof(small), v, 3), -1);
    assert_string_equal(small, "");
    assert_int_equal(svec_format(small, 0, v, 3), -1);
    assert_int_equal(svec_format(buf, sizeof(buf), v, 0), 0);
    assert_string_equal(buf, "");
}

static void test_order(void **state)
{
    struct svec_pos a = {5, 1}, b = {5, 2}, c = {6, 0};
    assert_int_equal(svec_pos_cmp(&a, &b), -1);
    assert_int_equal(svec_pos_cmp(&b, &a), 1);
    assert_int_equal(svec_pos_cmp(&a, &a), 0);
    assert_int_equal(svec_pos_cmp(&b, &c), -1); /* ms first */
    struct svec_pos x[3] = {{5, 1}, {7, 0}, {0, 0}}, y[3] = {{5, 1}, {6, 9}, {0, 0}},
                    z[3] = {{5, 2}, {6, 0}, {0, 0}};
    assert_true(svec_ge(x, y, 3));
    assert_false(svec_ge(y, x, 3));
    assert_true(svec_ge(x, x, 3));
    assert_false(svec_ge(x, z, 3)); /* incomparable: neither is at or after the other */
    assert_false(svec_ge(z, x, 3));
    assert_true(svec_ge(x, z, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_rows),
        cmocka_unit_test(test_parse_after_rows),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
