/* test_relay_store_history.c - unit tests for store/history.c's timeline ids (issue 24): the
 * hash's "tl" field decoded as store/tl_lib.lua encodes it (the first id in decimal, then
 * hexadecimal differences to the first, "-<seq>" when not 0; a malformed entry ends the ids, an overflow too), decimal stream ids of the list and
 * of an older version's "tl1" (strict), and the ids of several places merged into stream order
 * without repeats while those of one place stay as read. No Redis: replies are built by hand;
 * the reads are never sent. runs on: the test process. */
#include "store/command.h"
#include "store/history.c"

#include <setjmp.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/unit/reply_pool.h"

static struct svec_pos got[64];
static size_t ngot;

static void add(void *arg, struct svec_pos v)
{
    (void)arg;
    if (ngot < 64)
        got[ngot++] = v;
}

static size_t dec(const char *f)
{
    ngot = 0;
    return tl_decode(f, strlen(f), add, NULL);
}

static void test_decode(void **state)
{
    (void)state;
    /* tl_lib.lua's own example: 1764197395123-0, 40 s later, a day after the first, the same
     * ms */
    assert_int_equal(dec("1764197395123-0,9c40,5265c00,5265c00-1"), 4);
    assert_true(got[0].ms == 1764197395123ULL && got[0].seq == 0);
    assert_true(got[1].ms == 1764197435123ULL && got[1].seq == 0);
    assert_true(got[2].ms == 1764283795123ULL && got[2].seq == 0);
    assert_true(got[3].ms == 1764283795123ULL && got[3].seq == 1);
    assert_int_equal(dec("10-3,a-ff,b"), 3);
    assert_true(got[1].ms == 20 && got[1].seq == 255);
    assert_true(got[2].ms == 21 && got[2].seq == 0); /* from the first id, not the one before */
    assert_int_equal(dec("7-0"), 1);               /* one event: the stream id itself */
    assert_int_equal(dec(""), 0);
    assert_int_equal(dec(","), 0);
    assert_int_equal(dec("a"), 0);                 /* the first id is decimal */
    assert_int_equal(dec("5-0,A"), 1);             /* upper case is not ours */
    assert_int_equal(dec("5-0,-1,7"), 1);          /* a malformed entry ends them */
    assert_int_equal(dec("5-0,6-,7"), 1);
    assert_int_equal(dec("5-0,6 7"), 1);
    assert_int_equal(dec("5-0,"), 1);
    assert_int_equal(dec("5-0,g"), 1);
    assert_int_equal(dec("5-0,10000000000000000"), 1); /* over 64 bits */
    assert_int_equal(dec("5-0,ffffffffffffffff"), 1);  /* the sum too */
    assert_int_equal(dec("0-0,ffffffffffffffff,1"), 3);
    assert_true(got[1].ms == UINT64_MAX && got[2].ms == 1);
}

static void test_parse_sid(void **state)
{
    (void)state;
    struct svec_pos v;
    assert_int_equal(tl_parse_sid("1764197395123-7", 15, &v), 0);
    assert_true(v.ms == 1764197395123ULL && v.seq == 7);
    assert_int_equal(tl_parse_sid("18446744073709551615-0", 22, &v), 0);
    assert_int_equal(tl_parse_sid("18446744073709551616-0", 22, &v), -1);
    assert_int_equal(tl_parse_sid("5", 1, &v), -1);
    assert_int_equal(tl_parse_sid("5-", 2, &v), -1);
    assert_int_equal(tl_parse_sid("-5", 2, &v), -1);
    assert_int_equal(tl_parse_sid("5-1x", 4, &v), -1);
    assert_int_equal(tl_parse_sid("", 0, &v), -1);
}

static struct tl *tl_new(void)
{
    struct tl *t = xcalloc(1, sizeof(*t));
    t->pending = 3; /* the test merges by hand: the reads never complete */
    t->limit = 100;
    return t;
}

static void test_merge(void **state)
{
    (void)state;
    struct rpool p = {0};
    /* one place: kept as read */
    struct tl *t = tl_new();
    on_tl_fields(t, NULL, rp_arr(&p, 2, rp_str(&p, "10-0,1,3"), rp_nil(&p)));
    on_tl_list(t, NULL, rp_arr(&p, 0));
    tl_merge_ids(t);
    assert_int_equal(t->places, 1);
    assert_int_equal(t->nids, 3);
    assert_true(t->ids[0].ms == 10 && t->ids[2].ms == 13);
    assert_null(t->err);
    free(t->ids);
    free(t);
    /* three places (an upgrade: the field, an older process's tl1 and list): stream order,
     * one of each id */
    t = tl_new();
    on_tl_fields(t, NULL, rp_arr(&p, 2, rp_str(&p, "10-0,1"), rp_str(&p, "12-0")));
    on_tl_list(t, NULL, rp_arr(&p, 3, rp_str(&p, "12-0"), rp_str(&p, "13-0"), rp_str(&p, "bad")));
    tl_merge_ids(t);
    assert_int_equal(t->places, 3);
    assert_int_equal(t->nids, 4);
    assert_true(t->ids[0].ms == 10 && t->ids[1].ms == 11 && t->ids[2].ms == 12 &&
                t->ids[3].ms == 13);
    free(t->ids);
    free(t);
    /* an error reply is the answer's error */
    t = tl_new();
    redisReply *e = rp_str(&p, "ERR");
    e->type = REDIS_REPLY_ERROR;
    on_tl_fields(t, NULL, e);
    assert_ptr_equal(t->err, store_err_server);
    free(t->ids);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_parse_sid),
        cmocka_unit_test(test_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
