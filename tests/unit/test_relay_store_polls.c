/* test_relay_store_polls.c - unit tests for store/polls.c (the typed poll, budget and chain
 * list calls): the keys and arguments each script gets (its wire format, also documented at
 * the top of the script), a claim of polls as one poll_claim.lua with one partition and as a
 * round (budget_take, poll_take per partition, budget_give of the rest) with several, and
 * the replies decoded. The store is tests/unit/fake_store.h.
 * runs on: the test process, one thread. */
#include "store/polls.c"
#include "fake_store.h"

#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

static void heard_claim(void *arg, const char *err, const char *const *ids, size_t n)
{
    heard.calls++;
    heard.err = err;
    heard.n = n;
    for (size_t i = 0; i < n && i < 8; i++)
        snprintf(heard.ids[i], sizeof(heard.ids[i]), "%s", ids[i]);
}

static void heard_reserve(void *arg, const char *err, int granted)
{
    heard.calls++;
    heard.err = err;
    heard.count = granted;
}

/* One partition: one poll_claim.lua, KEYS poll, budget, pollu, polls, polln, budgetr; ARGV
 * now, max, lease, budget, calls to reserve 0, only reserve "0", share 0, feed skip ms (a
 * healthy changes feed), tag. */
static void test_claim_one_partition(void **state)
{
    fake_reset(1);
    memset(&heard, 0, sizeof(heard));
    struct polls_claim q = {
        .budget = 600, .max = 5, .lease_ms = 30000, .round = 7, .skip_feed_ms = 600000};
    assert_int_equal(polls_claim(NULL, &q, heard_claim, NULL), 0);
    assert_int_equal(fake.ncalls, 1);
    struct fake_call *c = &fake.calls[0];
    assert_string_equal(c->script, "poll_claim");
    assert_int_equal(c->nkeys, 6);
    assert_int_equal(c->argc, 15);
    const char *keys[] = {"{sr}:poll",  "{sr}:budget", "{sr}:pollu",
                          "{sr}:polls", "{sr}:polln",  "{sr}:budgetr"};
    for (int i = 0; i < 6; i++)
        assert_string_equal(c->argv[i], keys[i]);
    assert_string_equal(c->argv[7], "5");
    assert_string_equal(c->argv[8], "30000");
    assert_string_equal(c->argv[9], "600");
    assert_string_equal(c->argv[10], "0");
    assert_string_equal(c->argv[11], "0");
    assert_string_equal(c->argv[12], "0");
    assert_string_equal(c->argv[13], "600000");
    assert_string_equal(c->argv[14], "{sr}");
    struct fake_pool p = {0};
    fake_answer(0, NULL, fake_arr(&p, 4, fake_int(&p, 0), fake_str(&p, "a"), fake_int(&p, 9),
                                  fake_str(&p, "b")));
    assert_int_equal(heard.calls, 1);
    assert_null(heard.err);
    assert_int_equal(heard.n, 2);
    assert_string_equal(heard.ids[0], "a");
    assert_string_equal(heard.ids[1], "b");
}

/* A reservation is poll_claim.lua under the deployment tag whatever the partitions: no polls
 * ("1" = only reserve), the anonymous share as the last argument. */
static void test_reserve(void **state)
{
    fake_reset(3);
    memset(&heard, 0, sizeof(heard));
    struct polls_reserve q = {.budget = 600, .calls = 1, .anon_share = 150};
    assert_int_equal(polls_reserve(NULL, &q, heard_reserve, NULL), 0);
    struct fake_call *c = &fake.calls[0];
    assert_string_equal(c->script, "poll_claim");
    assert_string_equal(c->argv[0], "{sr}:poll");
    assert_string_equal(c->argv[5], "{sr}:budgetr");
    assert_string_equal(c->argv[7], "0");
    assert_string_equal(c->argv[10], "1");
    assert_string_equal(c->argv[11], "1");
    assert_string_equal(c->argv[12], "150");
    struct fake_pool p = {0};
    fake_answer(0, NULL, fake_arr(&p, 1, fake_int(&p, 1)));
    assert_int_equal(heard.calls, 1);
    assert_int_equal(heard.count, 1);
    /* an answer of another shape is an error, nothing granted */
    memset(&heard, 0, sizeof(heard));
    assert_int_equal(polls_reserve(NULL, &q, heard_reserve, NULL), 0);
    fake_answer(1, NULL, fake_int(&p, 1));
    assert_ptr_equal(heard.err, polls_err_reply);
    assert_int_equal(heard.count, 0);
}

/* poll_take.lua's arguments: the four tiers of partition tag, then tracked and anonymous
 * counts. */
static void assert_take(int i, const char *tag, const char *tracked, const char *anon)
{
    struct fake_call *c = &fake.calls[i];
    char k[KEY_MAX];
    assert_string_equal(c->script, "poll_take");
    key_build(k, sizeof(k), tag, "pollu", NULL, NULL);
    assert_string_equal(c->argv[0], k);
    key_build(k, sizeof(k), tag, "polln", NULL, NULL);
    assert_string_equal(c->argv[3], k);
    assert_string_equal(c->argv[5], tracked);
    assert_string_equal(c->argv[6], "30000");
    assert_string_equal(c->argv[7], anon);
    assert_string_equal(c->argv[8], "0"); /* no feed skip: the feed is not healthy */
    assert_string_equal(c->argv[9], tag);
}

/* Two partitions, round 1: the calls are taken first (3 of 5 tokens), the tracked tiers of
 * partition 1 then 0, the anonymous tiers with at most half of the tokens left, and the call
 * not used goes back. One answer with every id. */
static void test_claim_round(void **state)
{
    fake_reset(2);
    memset(&heard, 0, sizeof(heard));
    struct polls_claim q = {.budget = 600, .max = 4, .lease_ms = 30000, .round = 1};
    struct fake_pool p = {0};
    assert_int_equal(polls_claim(NULL, &q, heard_claim, NULL), 0);
    assert_string_equal(fake.calls[0].script, "budget_take");
    assert_string_equal(fake.calls[0].argv[0], "{sr}:budget");
    assert_string_equal(fake.calls[0].argv[2], "4");
    assert_string_equal(fake.calls[0].argv[3], "600");
    fake_answer(0, NULL, fake_arr(&p, 2, fake_int(&p, 3), fake_int(&p, 5)));
    assert_take(1, "{sr:p1}", "3", "0");
    fake_answer(1, NULL, fake_arr(&p, 1, fake_str(&p, "a")));
    assert_take(2, "{sr:p0}", "2", "0");
    fake_answer(2, NULL, fake_arr(&p, 0));
    assert_take(3, "{sr:p1}", "0", "2");
    fake_answer(3, NULL, fake_arr(&p, 1, fake_str(&p, "n1")));
    assert_take(4, "{sr:p0}", "0", "1");
    assert_int_equal(heard.calls, 0);
    fake_answer(4, NULL, fake_arr(&p, 0));
    assert_int_equal(fake.ncalls, 6);
    assert_string_equal(fake.calls[5].script, "budget_give");
    assert_string_equal(fake.calls[5].argv[2], "1");
    assert_int_equal(heard.calls, 1);
    assert_null(heard.err);
    assert_int_equal(heard.n, 2);
    assert_string_equal(heard.ids[0], "a");
    assert_string_equal(heard.ids[1], "n1");
}

/* Every partition's tiers: poll_due.lua once per partition. */
static void test_due_now(void **state)
{
    fake_reset(2);
    polls_due_now(NULL, POLLS_TIERS_ALL);
    polls_due_now(NULL, POLLS_TIERS_ACTIVE);
    assert_int_equal(fake.ncalls, 4);
    assert_int_equal(fake.calls[1].nkeys, 4);
    assert_string_equal(fake.calls[1].argv[0], "{sr:p1}:pollu");
    assert_string_equal(fake.calls[1].argv[3], "{sr:p1}:polln");
    assert_int_equal(fake.calls[2].nkeys, 2);
    assert_int_equal(fake.calls[2].argc, 3);
    assert_string_equal(fake.calls[2].argv[0], "{sr:p0}:poll");
    assert_string_equal(fake.calls[2].argv[1], "{sr:p0}:pollu");
}

static void heard_look(void *arg, const char *err, const struct polls_chains_seen *r)
{
    heard.calls++;
    heard.err = err;
    heard.count = r != NULL ? r->fetch : -1;
    heard.n = r != NULL && r->body != NULL ? r->body_len : 0;
    if (r != NULL)
        snprintf(heard.ids[0], sizeof(heard.ids[0]), "%s", r->at);
}

/* chains_poll.lua: KEYS chains, chainsl; ARGV now, period, lease, holder, known at. */
static void test_chains_look(void **state)
{
    fake_reset(1);
    memset(&heard, 0, sizeof(heard));
    struct polls_chains_look q = {600000, 30000, "inst", "17"};
    assert_int_equal(polls_chains_look(NULL, &q, heard_look, NULL), 0);
    struct fake_call *c = &fake.calls[0];
    assert_string_equal(c->script, "chains_poll");
    assert_string_equal(c->argv[0], "{sr}:chains");
    assert_string_equal(c->argv[1], "{sr}:chainsl");
    assert_string_equal(c->argv[3], "600000");
    assert_string_equal(c->argv[4], "30000");
    assert_string_equal(c->argv[5], "inst");
    assert_string_equal(c->argv[6], "17");
    struct fake_pool p = {0};
    fake_answer(0, NULL, fake_arr(&p, 3, fake_int(&p, 1), fake_str(&p, "18"),
                                  fake_str(&p, "{\"chains\":[]}")));
    assert_int_equal(heard.count, 1);
    assert_string_equal(heard.ids[0], "18");
    assert_int_equal(heard.n, 13);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claim_one_partition),
        cmocka_unit_test(test_reserve),
        cmocka_unit_test(test_claim_round),
        cmocka_unit_test(test_due_now),
        cmocka_unit_test(test_chains_look),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
