/* test_relay_util.c - unit tests for relay/common/util.c's str_copy2 / str_copy (the bounded
 * copies that replaced snprintf("%s"), "%s.%s" and "%s\x1f%s" on the delivery hot path,
 * issue 26): the same bytes and length as snprintf for every destination size, fitting,
 * cut inside a, at the separator and inside b, with and without a separator.
 * runs on: the test process, one thread. */
#include "relay/common/util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* str_copy2 against snprintf for every size 1..len+3 (the return value is what was written,
 * not what would have been: snprintf's length capped at size - 1). */
static void check_like_snprintf(const char *a, char sep, const char *b)
{
    char want[128], got[128];
    size_t full = strlen(a) + (b ? strlen(b) + (sep ? 1 : 0) : 0);
    for (size_t n = 1; n <= full + 3 && n <= sizeof(got); n++) {
        if (b == NULL)
            snprintf(want, n, "%s", a);
        else if (sep != '\0')
            snprintf(want, n, "%s%c%s", a, sep, b);
        else
            snprintf(want, n, "%s%s", a, b);
        memset(got, 'Z', sizeof(got));
        size_t len = str_copy2(got, n, a, sep, b);
        assert_string_equal(got, want);
        assert_int_equal(len, strlen(want));
        assert_int_equal(got[n - 1 < len + 1 ? n - 1 : len + 1], n - 1 < len + 1 ? '\0' : 'Z');
    }
}

static void test_like_snprintf(void **state)
{
    check_like_snprintf("evt_0123456789abcdef0123456789abcdef", '.', "wh_42");
    check_like_snprintf("wh_1", '\x1f', "0xabc");
    check_like_snprintf("abc", '\0', "def");
    check_like_snprintf("", '.', "");
    check_like_snprintf("", '.', "x");
    check_like_snprintf("x", '.', "");
    check_like_snprintf("only", '.', NULL);
    check_like_snprintf("", '\0', NULL);
}

static void test_str_copy(void **state)
{
    char buf[8];
    assert_int_equal(str_copy(buf, sizeof(buf), "1700000000000-0"), 7);
    assert_string_equal(buf, "1700000");
    assert_int_equal(str_copy(buf, sizeof(buf), "0-0"), 3);
    assert_string_equal(buf, "0-0");
    assert_int_equal(str_copy(buf, 1, "abc"), 0);
    assert_string_equal(buf, "");
    buf[0] = 'q';
    assert_int_equal(str_copy2(buf, 0, "abc", '.', "d"), 0); /* nothing written */
    assert_int_equal(buf[0], 'q');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_like_snprintf),
        cmocka_unit_test(test_str_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
