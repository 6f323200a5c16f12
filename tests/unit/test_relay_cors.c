/* test_relay_cors.c - unit tests for relay/common/cors.c (origin matching, the origins setting's
 * check, echoable request headers) and relay/common/rate_table.c (per-key token buckets:
 * burst, refill, Retry-After, per-key independence, bounded memory with the overflow bucket,
 * rate 0). runs on: the test process, one thread. */
#include "relay/common/cors.h"
#include "relay/common/rate_table.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static void test_allow_origin(void **state)
{
    static const struct {
        const char *list, *origin, *want; /* want NULL: refused; "=": the origin itself */
    } rows[] = {
        {"*", "https://a.example", "*"},
        {"*", NULL, NULL},
        {"*", "", NULL},
        {NULL, "https://a.example", NULL},
        {"", "https://a.example", NULL},
        {"https://a.example", "https://a.example", "="},
        {"https://a.example", "HTTPS://A.EXAMPLE", "="},
        {"https://a.example", "https://a.example:443", NULL},
        {"https://a.example", "https://a.example.evil", NULL},
        {"https://a.example", "https://a.exampl", NULL},
        {" https://a.example , http://localhost:3000 ", "http://localhost:3000", "="},
        {"https://a.example,http://localhost:3000", "http://localhost", NULL},
        {"https://a.example, *", "https://b.example", "*"},
        {"https://a.example", "null", NULL},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *got = cors_allow_origin(rows[i].list, rows[i].origin);
        if (rows[i].want == NULL)
            assert_null(got);
        else if (strcmp(rows[i].want, "=") == 0)
            assert_ptr_equal(got, rows[i].origin);
        else
            assert_string_equal(got, rows[i].want);
    }
}

static void test_list_check(void **state)
{
    static const char *good[] = {NULL, "", "*", "https://a.example", "http://localhost:3000",
                                 " https://a.example , http://[::1]:8080 ", "app+x://h",
                                 "https://a.example,,*"};
    static const char *bad[] = {"a.example", "https://", "https://a.example/",
                                "https://a.example/path", "://a.example", "1http://a",
                                "https://a example", "https://a.example, foo"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        assert_null(cors_list_check(good[i]));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_non_null(cors_list_check(bad[i]));
}

static void test_headers_ok(void **state)
{
    char longer[CORS_HEADERS_MAX + 2];
    memset(longer, 'a', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    assert_true(cors_headers_ok("relay-sdk-version,content-type"));
    assert_true(cors_headers_ok("Authorization, Content-Type"));
    assert_false(cors_headers_ok(NULL));
    assert_false(cors_headers_ok("x\r\nset-cookie: a"));
    assert_false(cors_headers_ok("a:b"));
    assert_false(cors_headers_ok("\"quoted\""));
    assert_false(cors_headers_ok(longer));
    longer[CORS_HEADERS_MAX] = '\0';
    assert_true(cors_headers_ok(longer));
}

static void test_bucket_burst_and_refill(void **state)
{
    struct rate_table *t = rate_table_new(3, 16);
    int64_t now = 1000000;
    for (int i = 0; i < 3; i++)
        assert_int_equal(rate_table_take(t, "10.0.0.1", now), 0);
    int wait = rate_table_take(t, "10.0.0.1", now);
    assert_int_equal(wait, 20); /* 3 a minute: one every 20 s */
    assert_int_not_equal(rate_table_take(t, "10.0.0.1", now + 19000), 0);
    assert_int_equal(rate_table_take(t, "10.0.0.1", now + 20000), 0);
    assert_int_not_equal(rate_table_take(t, "10.0.0.1", now + 20000), 0);
    /* another key has its own bucket */
    assert_int_equal(rate_table_take(t, "10.0.0.2", now), 0);
    /* long idle: full again, never more than the burst */
    now += 3600 * 1000;
    for (int i = 0; i < 3; i++)
        assert_int_equal(rate_table_take(t, "10.0.0.1", now), 0);
    assert_int_not_equal(rate_table_take(t, "10.0.0.1", now), 0);
    /* a clock that goes back does not mint tokens */
    assert_int_not_equal(rate_table_take(t, "10.0.0.1", now - 60000), 0);
    rate_table_free(t);
    rate_table_free(NULL);
}

static void test_bounded_memory(void **state)
{
    /* 16 slots: many busy keys end up sharing the overflow bucket (burst 2) */
    struct rate_table *t = rate_table_new(2, 16);
    char k[32];
    int refused = 0;
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "192.0.2.%d", i);
        refused += rate_table_take(t, k, 5000) != 0;
    }
    assert_true(refused >= 200 - 16 - 2);
    /* once the busy buckets refill, their slots are reused by new keys (8: fewer than a probe
     * window, so none of them can find its window taken by the others) */
    for (int i = 0; i < 8; i++) {
        snprintf(k, sizeof(k), "198.51.100.%d", i);
        assert_int_equal(rate_table_take(t, k, 5000 + 60000), 0);
    }
    rate_table_free(t);
}

static void test_rate_zero_and_long_keys(void **state)
{
    struct rate_table *t = rate_table_new(0, 16);
    assert_int_equal(rate_table_take(t, "10.0.0.1", 1), 60);
    rate_table_free(t);
    t = rate_table_new(1, 16);
    char a[200], b[200];
    memset(a, 'a', sizeof(a) - 1);
    a[sizeof(a) - 1] = '\0';
    memcpy(b, a, sizeof(b));
    b[150] = 'b'; /* differs past RATE_TABLE_KEY_MAX: the same bucket */
    assert_int_equal(rate_table_take(t, a, 1), 0);
    assert_int_not_equal(rate_table_take(t, b, 1), 0);
    assert_int_equal(rate_table_take(t, "", 1), 0); /* the empty key is a key too */
    assert_int_not_equal(rate_table_take(t, "", 1), 0);
    rate_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allow_origin),
        cmocka_unit_test(test_list_check),
        cmocka_unit_test(test_headers_ok),
        cmocka_unit_test(test_bucket_burst_and_refill),
        cmocka_unit_test(test_bounded_memory),
        cmocka_unit_test(test_rate_zero_and_long_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
