/* test_relay_store_watches.c - unit tests for store/watches.c (the typed track, watch and
 * anonymous hold calls): the keys and arguments each script gets (its wire format, also
 * documented at the top of the script), one command per partition holding some of the ids
 * (N = 1: one command with every id), and one answer after the last partition's, summed.
 * The store is tests/unit/fake_store.h. runs on: the test process, one thread. */
#include "store/watches.c"
#include "fake_store.h"

#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

static const struct watches_windows win = {1000, 2000, 3000, 50000};

static void heard_track(void *arg, const char *err, size_t created)
{
    heard.calls++;
    heard.err = err;
    heard.count = (long long)created;
}

/* Track "a".."c" with one partition: one command, the keys poll, ct and one req hash per id,
 * then now, metadata, tag, the three windows and the ids. */
static void test_track_one_partition(void **state)
{
    fake_reset(1);
    memset(&heard, 0, sizeof(heard));
    const char *ids[] = {"a", "b", "c"};
    assert_int_equal(watches_track(NULL, &win, ids, 3, "{\"k\":1}", heard_track, NULL), 0);
    assert_int_equal(fake.ncalls, 1);
    struct fake_call *c = &fake.calls[0];
    assert_string_equal(c->script, "track");
    assert_int_equal(c->nkeys, 5);
    assert_int_equal(c->argc, 14);
    assert_string_equal(c->argv[0], "{sr}:poll");
    assert_string_equal(c->argv[1], "{sr}:ct");
    assert_string_equal(c->argv[2], "{sr}:req:a");
    assert_string_equal(c->argv[4], "{sr}:req:c");
    assert_string_equal(c->argv[6], "{\"k\":1}");
    assert_string_equal(c->argv[7], "{sr}");
    assert_string_equal(c->argv[8], "1000");
    assert_string_equal(c->argv[9], "2000");
    assert_string_equal(c->argv[10], "3000");
    assert_string_equal(c->argv[11], "a");
    assert_string_equal(c->argv[13], "c");
    struct fake_pool p = {0};
    fake_answer(0, NULL, fake_int(&p, 2));
    assert_int_equal(heard.calls, 1);
    assert_null(heard.err);
    assert_int_equal(heard.count, 2);
}

/* With several partitions: one command per partition holding some ids, each with only its
 * ids under its tag; the caller hears once, after the last, the sum (and the first error). */
static void test_track_partitions(void **state)
{
    fake_reset(4);
    memset(&heard, 0, sizeof(heard));
    const char *ids[] = {"r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"};
    unsigned used = 0;
    for (size_t i = 0; i < 8; i++)
        used |= 1u << key_partition(ids[i], strlen(ids[i]), 4);
    assert_int_equal(watches_track(NULL, &win, ids, 8, NULL, heard_track, NULL), 0);
    assert_int_equal(fake.ncalls, __builtin_popcount(used));
    size_t total = 0;
    for (int i = 0; i < fake.ncalls; i++) {
        struct fake_call *c = &fake.calls[i];
        size_t n = (size_t)c->nkeys - 2;
        const char *tag = c->argv[c->nkeys + 2];
        assert_int_equal(c->argc, 2 * (int)n + 8);
        assert_string_equal(c->argv[c->nkeys + 1], ""); /* no metadata */
        for (size_t j = 0; j < n; j++) {
            const char *id = c->argv[c->nkeys + 6 + j];
            assert_string_equal(tag, fake.tags[key_partition(id, strlen(id), 4)]);
            char k[KEY_MAX];
            key_build(k, sizeof(k), tag, "req", id, NULL);
            assert_string_equal(c->argv[2 + j], k);
        }
        total += n;
    }
    assert_int_equal(total, 8);
    struct fake_pool p = {0};
    for (int i = 0; i < fake.ncalls; i++) {
        assert_int_equal(heard.calls, 0); /* not before the last answer */
        fake_answer(i, i == 0 ? store_err_disconnected : NULL, i == 0 ? NULL : fake_int(&p, 1));
    }
    assert_int_equal(heard.calls, 1);
    assert_ptr_equal(heard.err, store_err_disconnected);
    assert_int_equal(heard.count, fake.ncalls - 1);
}

static void heard_hold(void *arg, const char *err, long long started, const char *const *unknown,
                    size_t n)
{
    heard.calls++;
    heard.err = err;
    heard.count = started;
    heard.n = n;
    for (size_t i = 0; i < n && i < 8; i++)
        snprintf(heard.ids[i], sizeof(heard.ids[i]), "%s", unknown[i]);
}

/* anon_hold.lua: KEYS anonh; ARGV now, lease, holder, tag, windows, start, ids. Two
 * partitions answer: started summed, the unknown ids of both. */
static void test_hold(void **state)
{
    fake_reset(2);
    memset(&heard, 0, sizeof(heard));
    const char *ids[] = {"x1", "x2", "x3", "x4", "x5", "x6"};
    struct watches_hold h = {.holder = "inst", .lease_ms = 45000, .start = 1};
    assert_int_equal(watches_hold(NULL, &win, &h, ids, 6, heard_hold, NULL), 0);
    assert_int_equal(fake.ncalls, 2); /* six ids: both partitions hold some */
    for (int i = 0; i < 2; i++) {
        struct fake_call *c = &fake.calls[i];
        assert_string_equal(c->script, "anon_hold");
        assert_int_equal(c->nkeys, 1);
        char k[KEY_MAX];
        key_build(k, sizeof(k), c->argv[4], "anonh", NULL, NULL);
        assert_string_equal(c->argv[0], k);
        assert_string_equal(c->argv[2], "45000");
        assert_string_equal(c->argv[3], "inst");
        assert_string_equal(c->argv[5], "1000");
        assert_string_equal(c->argv[8], "1");
    }
    assert_int_equal(fake.calls[0].argc + fake.calls[1].argc, 2 * 9 + 6);
    struct fake_pool p = {0};
    fake_answer(1, NULL, fake_arr(&p, 2, fake_int(&p, 2), fake_str(&p, "x9")));
    fake_answer(0, NULL, fake_arr(&p, 2, fake_int(&p, 1), fake_str(&p, "x8")));
    assert_int_equal(heard.calls, 1);
    assert_null(heard.err);
    assert_int_equal(heard.count, 3);
    assert_int_equal(heard.n, 2);
    assert_string_equal(heard.ids[0], "x9");
    assert_string_equal(heard.ids[1], "x8");
}

static void heard_stats(void *arg, const char *err, const struct watches_stats *r)
{
    heard.calls++;
    heard.err = err;
    heard.count = r != NULL ? r->stuck : -1;
    heard.n = 0;
    for (size_t i = 0; r != NULL && i < r->n; i++)
        snprintf(heard.ids[heard.n++], sizeof(heard.ids[0]), "%s=%lld", r->by_status[i].status,
                 (long long)r->by_status[i].n);
}

/* watch_stats.lua on every partition: the oldest of the oldest, stuck and by-status summed. */
static void test_stats(void **state)
{
    fake_reset(3);
    memset(&heard, 0, sizeof(heard));
    assert_int_equal(watches_stats(NULL, 777, 10000, heard_stats, NULL), 0);
    assert_int_equal(fake.ncalls, 3);
    assert_string_equal(fake.calls[2].argv[0], "{sr:p2}:act");
    assert_string_equal(fake.calls[2].argv[1], "{sr:p2}:unset");
    assert_string_equal(fake.calls[2].argv[2], "777");
    assert_string_equal(fake.calls[2].argv[3], "{sr:p2}");
    assert_string_equal(fake.calls[2].argv[4], "10000");
    struct fake_pool p = {0};
    fake_answer(0, NULL, fake_arr(&p, 4, fake_int(&p, 50), fake_int(&p, 2),
                                  fake_str(&p, "pending"), fake_int(&p, 2)));
    fake_answer(1, NULL, fake_arr(&p, 2, fake_int(&p, -1), fake_int(&p, 0)));
    fake_answer(2, NULL, fake_arr(&p, 6, fake_int(&p, 40), fake_int(&p, 3),
                                  fake_str(&p, "pending"), fake_int(&p, 1),
                                  fake_str(&p, "delayed"), fake_int(&p, 2)));
    assert_int_equal(heard.calls, 1);
    assert_null(heard.err);
    assert_int_equal(heard.count, 5);
    assert_int_equal(heard.n, 2);
    assert_string_equal(heard.ids[0], "pending=3");
    assert_string_equal(heard.ids[1], "delayed=2");
}

static void heard_stuck(void *arg, const char *err, long long n)
{
    heard.calls++;
    heard.err = err;
    heard.count = n;
}

/* watch_stuck.lua on every partition (KEYS act; ARGV now, cutoff, max, tag, stream MAXLEN):
 * the events written summed, the first error kept. */
static void test_stuck(void **state)
{
    fake_reset(2);
    memset(&heard, 0, sizeof(heard));
    assert_int_equal(watches_stuck(NULL, &win, 777, 500, heard_stuck, NULL), 0);
    assert_int_equal(fake.ncalls, 2);
    for (int i = 0; i < 2; i++) {
        struct fake_call *c = &fake.calls[i];
        char k[KEY_MAX];
        assert_string_equal(c->script, "watch_stuck");
        assert_int_equal(c->nkeys, 1);
        assert_int_equal(c->argc, 6);
        key_build(k, sizeof(k), c->argv[4], "act", NULL, NULL);
        assert_string_equal(c->argv[0], k);
        assert_string_equal(c->argv[2], "777");
        assert_string_equal(c->argv[3], "500");
        assert_string_equal(c->argv[5], "50000");
    }
    assert_string_equal(fake.calls[1].argv[4], "{sr:p1}");
    struct fake_pool p = {0};
    fake_answer(0, NULL, fake_int(&p, 2));
    assert_int_equal(heard.calls, 0);
    fake_answer(1, NULL, fake_int(&p, 3));
    assert_int_equal(heard.calls, 1);
    assert_null(heard.err);
    assert_int_equal(heard.count, 5);
    /* another shape is an error */
    fake_reset(1);
    memset(&heard, 0, sizeof(heard));
    assert_int_equal(watches_stuck(NULL, &win, 777, 500, heard_stuck, NULL), 0);
    fake_answer(0, NULL, fake_str(&p, "x"));
    assert_int_equal(heard.calls, 1);
    assert_ptr_equal(heard.err, watches_err_reply);
}

/* watch_expire.lua and untrack.lua get the stream MAXLEN for their request.watch.ended. */
static void heard_untrack(void *arg, const char *err, int found)
{
    heard.calls++;
    heard.err = err;
    heard.count = found;
}

static void heard_expire(void *arg, const char *err, const char *const *ended, size_t n)
{
    heard.calls++;
    heard.err = err;
    heard.count = (long long)n;
}

static void test_typed_event_args(void **state)
{
    fake_reset(1);
    memset(&heard, 0, sizeof(heard));
    assert_int_equal(watches_untrack(NULL, &win, "a", heard_untrack, NULL), 0);
    struct fake_call *c = &fake.calls[0];
    assert_string_equal(c->script, "untrack");
    assert_int_equal(c->argc, 5);
    assert_string_equal(c->argv[0], "{sr}:req:a");
    assert_string_equal(c->argv[1], "a");
    assert_string_equal(c->argv[2], "{sr}");
    assert_string_equal(c->argv[4], "50000");
    struct fake_pool p = {0};
    fake_answer(0, NULL, fake_int(&p, 1));
    assert_int_equal(heard.count, 1);
    struct watches_windows w0 = win;
    w0.stream_maxlen = 0; /* unset: the default retention */
    fake_reset(1);
    memset(&heard, 0, sizeof(heard));
    assert_int_equal(watches_expire(NULL, &w0, 500, heard_expire, NULL), 0);
    c = &fake.calls[0];
    assert_string_equal(c->script, "watch_expire");
    assert_int_equal(c->argc, 8);
    assert_string_equal(c->argv[0], "{sr}:wend");
    assert_string_equal(c->argv[7], "100000");
    fake_answer(0, NULL, fake_arr(&p, 1, fake_str(&p, "a")));
    assert_int_equal(heard.calls, 1);
    assert_int_equal(heard.count, 1);
}

static struct watches_cursor step_next;
static int step_done;

static void heard_step(void *arg, const char *err, const struct watches_cursor *next, int done,
                    long long count)
{
    heard.calls++;
    heard.err = err;
    heard.count = count;
    step_next = *next;
    step_done = done;
}

/* The fallback walk goes partition by partition: a set's end moves to the next partition,
 * the last partition's end is the walk's. */
static void test_fallback_walk(void **state)
{
    fake_reset(2);
    memset(&heard, 0, sizeof(heard));
    struct watches_cursor at = {0, 0};
    struct fake_pool p = {0};
    assert_int_equal(watches_fallback(NULL, &win, &at, 1000, heard_step, NULL), 0);
    assert_string_equal(fake.calls[0].script, "watch_fallback");
    assert_string_equal(fake.calls[0].argv[0], "{sr:p0}:act");
    assert_string_equal(fake.calls[0].argv[2], "1000");
    assert_string_equal(fake.calls[0].argv[7], "0");
    fake_answer(0, NULL, fake_arr(&p, 2, fake_int(&p, 0), fake_int(&p, 4)));
    assert_int_equal(step_done, 0);
    assert_int_equal(step_next.part, 1);
    assert_int_equal(step_next.pos, 0);
    assert_int_equal(watches_fallback(NULL, &win, &step_next, 1000, heard_step, NULL), 0);
    assert_string_equal(fake.calls[1].argv[0], "{sr:p1}:act");
    fake_answer(1, NULL, fake_arr(&p, 2, fake_int(&p, 0), fake_int(&p, 0)));
    assert_int_equal(step_done, 1);
    assert_int_equal(heard.calls, 2);
}

static struct watches_batch fed[4];
static int nfed;

static void heard_feed(void *arg, const char *err, const struct watches_batch *b)
{
    heard.calls++;
    heard.err = err;
    if (b != NULL && nfed < 4) {
        fed[nfed] = *b;
        fed[nfed].v = NULL; /* borrowed: gone after the call */
        heard.count = b->n > 0 ? b->v[0].watched : -1;
        snprintf(heard.ids[nfed++], sizeof(heard.ids[0]), "%s", b->n > 0 ? b->v[0].id : "");
    }
}

/* The change feed reads each partition from its own version (-1 first: a full read) and
 * hands each answer over with its partition; a cut batch of changes asks for more. */
static void test_feed(void **state)
{
    fake_reset(2);
    memset(&heard, 0, sizeof(heard));
    nfed = 0;
    struct watches_feed *f = watches_feed_new(NULL, 5000, heard_feed, NULL);
    watches_feed_read(f);
    assert_int_equal(fake.ncalls, 2);
    struct fake_call *c = &fake.calls[1];
    assert_string_equal(c->script, "watch_sync");
    assert_int_equal(c->nkeys, 4);
    assert_string_equal(c->argv[0], "{sr:p1}:watch");
    assert_string_equal(c->argv[3], "{sr:p1}:wlow");
    assert_string_equal(c->argv[4], "-1");
    assert_string_equal(c->argv[5], "5000");
    assert_int_equal(c->argc, 8);
    assert_string_equal(c->argv[6], "{sr:p1}"); /* the trim's tag; the record pass: off */
    assert_string_equal(c->argv[7], "0");
    watches_feed_read(f); /* both in flight: nothing more */
    assert_int_equal(fake.ncalls, 2);
    struct fake_pool p = {0};
    fake_answer(1, NULL, fake_arr(&p, 4, fake_int(&p, 7), fake_int(&p, 1), fake_str(&p, "a"),
                                  fake_int(&p, 1)));
    assert_int_equal(fed[0].part, 1);
    assert_int_equal(fed[0].full, 1);
    assert_int_equal(fed[0].more, 0);
    assert_int_equal(fed[0].version, 7);
    assert_int_equal(watches_batch_covers(&fed[0], "a"), key_partition("a", 1, 2) == 1);
    fake_answer(0, NULL, fake_arr(&p, 4, fake_int(&p, 3), fake_int(&p, 0), fake_str(&p, "b"),
                                  fake_int(&p, 0)));
    assert_int_equal(fed[1].part, 0);
    assert_int_equal(fed[1].full, 0);
    assert_int_equal(fed[1].more, 1);
    assert_int_equal(heard.count, 0); /* "b" unwatched */
    watches_feed_read(f);
    assert_string_equal(fake.calls[2].argv[4], "3");
    assert_string_equal(fake.calls[3].argv[4], "7");
    watches_feed_reset(f);
    watches_feed_rec_pass(f, 1);
    fake_answer(2, store_err_disconnected, NULL);
    watches_feed_read(f);
    assert_string_equal(fake.calls[4].argv[4], "-1");
    assert_string_equal(fake.calls[4].argv[7], "1");
    watches_feed_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_track_one_partition),
        cmocka_unit_test(test_track_partitions),
        cmocka_unit_test(test_hold),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_stuck),
        cmocka_unit_test(test_typed_event_args),
        cmocka_unit_test(test_fallback_walk),
        cmocka_unit_test(test_feed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
