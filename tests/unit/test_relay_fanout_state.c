/* test_relay_fanout_state.c - unit tests for relay/delivery/fanout_state.c: the fan-out's
 * per-pair decisions as rows (a candidate's admission after wh_held.lua, the commit's step
 * for every state, how each state is recorded by wh_fanout.lua and whether it carries the
 * body), and the names and outcome mappings. runs on: the test process, one thread. */
#include "relay/delivery/fanout_internal.h"
#include "store/deliveries.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void test_admit_rows(void **state)
{
    static const struct {
        int held, has_pred;
        enum fo_state pred;
        enum fo_admit want;
    } rows[] = {
        {1, 0, FO_PENDING, FO_ADMIT_HELD},  /* held wins over everything */
        {1, 1, FO_OK, FO_ADMIT_HELD},
        {1, 1, FO_OPEN, FO_ADMIT_HELD},
        {0, 0, FO_PENDING, FO_ADMIT_SEND},  /* no predecessor: send */
        {0, 1, FO_OK, FO_ADMIT_SEND},       /* predecessor delivered: send */
        {0, 1, FO_OPEN, FO_ADMIT_CHAIN},    /* predecessor still out: wait in memory */
        {0, 1, FO_CHAINED, FO_ADMIT_CHAIN}, /* predecessor waits itself: behind it */
        {0, 1, FO_PENDING, FO_ADMIT_BEHIND},
        {0, 1, FO_SKIPPED, FO_ADMIT_BEHIND},
        {0, 1, FO_RETRY, FO_ADMIT_BEHIND},
        {0, 1, FO_DEAD, FO_ADMIT_BEHIND},
        {0, 1, FO_GONE, FO_ADMIT_BEHIND},
        {0, 1, FO_INFLIGHT, FO_ADMIT_BEHIND},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        assert_int_equal(fo_admit_decide(rows[i].held, rows[i].has_pred, rows[i].pred),
                         rows[i].want);
}

static void test_commit_rows(void **state)
{
    static const struct {
        enum fo_state st;
        int out;
        enum fo_state want;
        int closes, lease, unchain;
        enum dl_pair pair;
        int body;
    } rows[] = {
        /* state, attempt out -> state after, closes, lease, unchain, recorded as, body */
        {FO_OPEN, 1, FO_INFLIGHT, 1, 1, 1, DL_PAIR_INFLIGHT, 1},
        {FO_INFLIGHT, 1, FO_INFLIGHT, 0, 1, 0, DL_PAIR_INFLIGHT, 1}, /* fresh lease */
        {FO_INFLIGHT, 0, FO_INFLIGHT, 0, 0, 0, DL_PAIR_INFLIGHT, 1},
        {FO_CHAINED, 0, FO_PENDING, 1, 0, 0, DL_PAIR_PENDING, 1},
        {FO_PENDING, 0, FO_PENDING, 0, 0, 0, DL_PAIR_PENDING, 1},
        {FO_SKIPPED, 0, FO_SKIPPED, 0, 0, 0, DL_PAIR_SKIPPED, 1},
        {FO_OK, 0, FO_OK, 0, 0, 0, DL_PAIR_OK, 0},
        {FO_RETRY, 0, FO_RETRY, 0, 0, 0, DL_PAIR_RETRY, 1},
        {FO_DEAD, 0, FO_DEAD, 0, 0, 0, DL_PAIR_DEAD, 0},
        {FO_GONE, 0, FO_GONE, 0, 0, 0, DL_PAIR_GONE, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct fo_commit_step s = fo_commit_decide(rows[i].st, rows[i].out);
        assert_int_equal(s.st, rows[i].want);
        assert_int_equal(s.closes, rows[i].closes);
        assert_int_equal(s.lease, rows[i].lease);
        assert_int_equal(s.unchain, rows[i].unchain);
        assert_int_equal(fo_state_pair(s.st), rows[i].pair);
        assert_int_equal(dl_pair_needs_body(fo_state_pair(s.st)), rows[i].body);
    }
}

static void test_outcomes_and_names(void **state)
{
    static const struct {
        enum dl_outcome o;
        enum fo_state st;
        const char *name;
    } rows[] = {
        {DL_OUTCOME_OK, FO_OK, "ok"},
        {DL_OUTCOME_RETRY, FO_RETRY, "retry"},
        {DL_OUTCOME_DEAD, FO_DEAD, "dead"},
        {DL_OUTCOME_GONE, FO_GONE, "gone"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        assert_int_equal(fo_outcome_state(rows[i].o), rows[i].st);
        assert_int_equal(fo_state_outcome(rows[i].st), rows[i].o);
        assert_string_equal(dl_outcome_name(rows[i].o), rows[i].name);
        assert_string_equal(fo_state_name(rows[i].st), rows[i].name);
    }
    assert_string_equal(dl_outcome_name(DL_OUTCOME_LOCAL), "local"); /* wh_done.lua's word */
    assert_string_equal(fo_state_name(FO_INFLIGHT), "inflight");
    assert_string_equal(fo_state_name(FO_STATE_COUNT), "?");
    for (int k = 0; k < DL_PAIR_COUNT; k++) /* every pair kind has a name */
        assert_string_not_equal(dl_pair_name((enum dl_pair)k), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admit_rows),
        cmocka_unit_test(test_commit_rows),
        cmocka_unit_test(test_outcomes_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
