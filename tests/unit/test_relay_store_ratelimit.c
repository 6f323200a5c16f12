/* test_relay_store_ratelimit.c - unit tests for store/ratelimit.c (an endpoint's rateLimit
 * grant log): the key (the deployment's tag whatever the partition count) and arguments of
 * ratelimit_take.lua and ratelimit_give.lua, and the take's reply decoded. The store is
 * tests/unit/fake_store.h.
 * runs on: the test process, one thread. */
#include "store/ratelimit.c"
#include "fake_store.h"

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static struct {
    long granted;
    int64_t at, wait;
} took;

static void heard_take(void *arg, const char *err, long granted, int64_t at, int64_t wait_ms)
{
    heard.calls++;
    heard.err = err;
    took.granted = granted;
    took.at = at;
    took.wait = wait_ms;
}

/* KEYS {sr}:rl:<wh> with 3 partitions too; ARGV limit, window ms, wanted; the reply
 * {granted, at, wait} decoded. */
static void test_take(void **state)
{
    fake_reset(3);
    memset(&heard, 0, sizeof(heard));
    assert_int_equal(ratelimit_take(NULL, "wh_abc", 5, 1150, 2, heard_take, NULL), 0);
    struct fake_call *c = &fake.calls[0];
    assert_string_equal(c->script, "ratelimit_take");
    assert_int_equal(c->nkeys, 1);
    assert_int_equal(c->argc, 4);
    assert_string_equal(c->argv[0], "{sr}:rl:wh_abc");
    assert_string_equal(c->argv[1], "5");
    assert_string_equal(c->argv[2], "1150");
    assert_string_equal(c->argv[3], "2");
    struct fake_pool p = {0};
    fake_answer(0, NULL, fake_arr(&p, 3, fake_int(&p, 2), fake_int(&p, 1787055532140LL),
                                  fake_int(&p, 0)));
    assert_int_equal(heard.calls, 1);
    assert_null(heard.err);
    assert_int_equal(took.granted, 2);
    assert_int_equal(took.at, 1787055532140LL);
    assert_int_equal(took.wait, 0);
}

/* An answer of another shape, or a store error: nothing granted. */
static void test_take_errors(void **state)
{
    fake_reset(1);
    memset(&heard, 0, sizeof(heard));
    struct fake_pool p = {0};
    assert_int_equal(ratelimit_take(NULL, "wh_x", 1, 1150, 1, heard_take, NULL), 0);
    fake_answer(0, NULL, fake_arr(&p, 2, fake_int(&p, 1), fake_int(&p, 7)));
    assert_ptr_equal(heard.err, ratelimit_err_reply);
    assert_int_equal(took.granted, 0);
    assert_int_equal(ratelimit_take(NULL, "wh_x", 1, 1150, 1, heard_take, NULL), 0);
    fake_answer(1, NULL, fake_arr(&p, 3, fake_str(&p, "1"), fake_int(&p, 7), fake_int(&p, 0)));
    assert_ptr_equal(heard.err, ratelimit_err_reply);
    assert_int_equal(ratelimit_take(NULL, "wh_x", 1, 1150, 1, heard_take, NULL), 0);
    fake_answer(2, store_err_disconnected, NULL);
    assert_ptr_equal(heard.err, store_err_disconnected);
    assert_int_equal(took.granted, 0);
    assert_int_equal(heard.calls, 3);
}

/* KEYS {sr}:rl:<wh>; ARGV the grant's time, the count given back; no answer expected. */
static void test_give(void **state)
{
    fake_reset(2);
    assert_int_equal(ratelimit_give(NULL, "wh_abc", 1787055532140LL, 3), 0);
    struct fake_call *c = &fake.calls[0];
    assert_string_equal(c->script, "ratelimit_give");
    assert_int_equal(c->nkeys, 1);
    assert_int_equal(c->argc, 3);
    assert_string_equal(c->argv[0], "{sr}:rl:wh_abc");
    assert_string_equal(c->argv[1], "1787055532140");
    assert_string_equal(c->argv[2], "3");
    assert_null(c->cb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take),
        cmocka_unit_test(test_take_errors),
        cmocka_unit_test(test_give),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
