/* test_relay_endpoint.c - unit tests for relay/delivery/endpoint.c: webhook_values_same, the
 * test a reload uses to keep an endpoint's parsed values (relay/delivery/endpoints.c). A row
 * is "the same" only when byte-identical pair by pair in the same order (pairs with a NULL are
 * skipped, as webhook_values_set skips them); any changed field (filters, secret, enabled,
 * rateLimit, ...) is not, and a new endpoint or cleared values never are. runs on: the test
 * process, one thread. */
#include "relay/delivery/endpoint.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

static const char *row[] = {
    "url",       "https://example.com/hook",
    "filters",   "{\"referrers\":[\"shop-A\"]}",
    "headers",   "{\"x-tenant\":\"a\"}",
    "enabled",   "1",
    "secret",    SECRET,
    "rateLimit", "5",
    "createdAt", "1700000000000",
};
#define NKV (sizeof(row) / sizeof(row[0]) / 2)

static void test_same_row(void **state)
{
    (void)state;
    struct webhook *wh = webhook_new("wh_0001");
    assert_false(webhook_values_same(wh, row, NKV)); /* no values yet */
    webhook_values_set(wh, row, NKV);
    assert_true(webhook_values_same(wh, row, NKV));
    /* equal bytes in other buffers */
    char copy[NKV * 2][128];
    const char *kv[NKV * 2];
    for (size_t i = 0; i < NKV * 2; i++) {
        strcpy(copy[i], row[i]);
        kv[i] = copy[i];
    }
    assert_true(webhook_values_same(wh, kv, NKV));
    /* a pair with a NULL is skipped, as values_set does */
    const char *with_null[NKV * 2 + 2];
    memcpy(with_null, row, sizeof(row));
    with_null[NKV * 2] = "failSince";
    with_null[NKV * 2 + 1] = NULL;
    assert_true(webhook_values_same(wh, with_null, NKV + 1));
    webhook_values_clear(wh);
    assert_false(webhook_values_same(wh, row, NKV)); /* cleared: parse again */
    webhook_unref(wh);
}

static void test_changed_rows(void **state)
{
    (void)state;
    struct webhook *wh = webhook_new("wh_0002");
    webhook_values_set(wh, row, NKV);
    /* each value changed by one byte, or shortened, or lengthened */
    for (size_t i = 0; i < NKV; i++) {
        const char *kv[NKV * 2];
        memcpy(kv, row, sizeof(row));
        char v[256];
        snprintf(v, sizeof(v), "%s", row[2 * i + 1]);
        v[strlen(v) - 1] ^= 1;
        kv[2 * i + 1] = v;
        assert_false(webhook_values_same(wh, kv, NKV));
        char shorter[256];
        snprintf(shorter, sizeof(shorter), "%.*s", (int)strlen(row[2 * i + 1]) - 1, row[2 * i + 1]);
        kv[2 * i + 1] = shorter;
        assert_false(webhook_values_same(wh, kv, NKV));
        char longer[300];
        snprintf(longer, sizeof(longer), "%sx", row[2 * i + 1]);
        kv[2 * i + 1] = longer;
        assert_false(webhook_values_same(wh, kv, NKV));
    }
    /* a field more, a field less, another order, a value moved into the next key */
    const char *more[NKV * 2 + 2];
    memcpy(more, row, sizeof(row));
    more[NKV * 2] = "prevSecret";
    more[NKV * 2 + 1] = SECRET;
    assert_false(webhook_values_same(wh, more, NKV + 1));
    assert_false(webhook_values_same(wh, row, NKV - 1));
    const char *swapped[NKV * 2];
    memcpy(swapped, row, sizeof(row));
    swapped[0] = row[2], swapped[1] = row[3], swapped[2] = row[0], swapped[3] = row[1];
    assert_false(webhook_values_same(wh, swapped, NKV));
    const char *shifted[] = {"url", "https://example.com/hookfilters", "",
                             "{\"referrers\":[\"shop-A\"]}"};
    struct webhook *two = webhook_new("wh_0003");
    webhook_values_set(two, row, 2);
    assert_true(webhook_values_same(two, row, 2));
    assert_false(webhook_values_same(two, shifted, 2));
    webhook_unref(two);
    webhook_unref(wh);
}

/* A kept endpoint is what values_set would have built: the parsed parts equal a fresh set. */
static void test_kept_values_equal_fresh(void **state)
{
    (void)state;
    struct webhook *a = webhook_new("wh_0004"), *b = webhook_new("wh_0004");
    webhook_values_set(a, row, NKV);
    webhook_values_set(b, row, NKV);
    assert_true(webhook_values_same(a, row, NKV));
    assert_string_equal(a->filters_json, b->filters_json);
    assert_string_equal(a->header_lines[0], "x-tenant: a");
    assert_null(a->header_lines[1]);
    assert_int_equal(a->enabled, 1);
    assert_int_equal(a->rate_limit, 5);
    assert_non_null(a->hmac);
    assert_int_equal(a->f.nreferrers, 1);
    webhook_unref(a);
    webhook_unref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_row),
        cmocka_unit_test(test_changed_rows),
        cmocka_unit_test(test_kept_values_equal_fresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
