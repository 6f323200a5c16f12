/* test_relay_accept_guard.c - unit tests for relay/common/accept_guard.c (pause at the cap,
 * resume on a close, EMFILE backoff 100 ms doubling to 1 s and reset by an accept, other
 * errors never pause, per-address counts, the reserve) and config_fit_descriptors in relay/config.c (derived caps, the reserve
 * formula, caps that do not fit). runs on: the test process, one thread. */
#include "relay/common/accept_guard.h"
#include "relay/config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

struct hooks {
    int watching; /* what the listener would do: 1 = watching the socket */
    int pauses, resumes, arms;
    int64_t last_arm;
};

static void h_pause(void *arg)
{
    struct hooks *h = arg;
    assert_int_equal(h->watching, 1); /* never paused twice */
    h->watching = 0;
    h->pauses++;
}

static void h_resume(void *arg)
{
    struct hooks *h = arg;
    assert_int_equal(h->watching, 0); /* never resumed twice */
    h->watching = 1;
    h->resumes++;
}

static void h_arm(void *arg, int64_t ms)
{
    struct hooks *h = arg;
    h->arms++;
    h->last_arm = ms;
}

static const struct accept_guard_ops ops = {h_pause, h_resume, h_arm};

enum op { OPEN, CLOSE, FAIL, TIMER };

static void test_steps(void **state)
{
    static const struct {
        enum op op;
        int err;          /* FAIL: errno */
        int want_watch;   /* after the step */
        int64_t want_count;
        int64_t want_arm; /* FAIL with a pause: the backoff asked for; else -1 */
    } rows[] = {
        {OPEN, 0, 1, 1, -1},
        {OPEN, 0, 0, 2, -1},        /* cap 2: paused */
        {CLOSE, 0, 1, 1, -1},       /* a close resumes */
        {FAIL, EMFILE, 0, 1, 100},  /* out of descriptors: paused, 100 ms */
        {TIMER, 0, 1, 1, -1},
        {FAIL, ENFILE, 0, 1, 200},  /* doubling */
        {TIMER, 0, 1, 1, -1},
        {FAIL, ENOBUFS, 0, 1, 400},
        {FAIL, ENOMEM, 0, 1, 800},  /* again while paused: stays paused, no second pause */
        {FAIL, EMFILE, 0, 1, 1000}, /* capped at 1 s */
        {FAIL, EMFILE, 0, 1, 1000},
        {CLOSE, 0, 1, 0, -1},       /* a close ends the descriptor pause at once */
        {TIMER, 0, 1, 0, -1},       /* the late timer changes nothing */
        {FAIL, ECONNRESET, 1, 0, -1}, /* not a resource error: no pause */
        {OPEN, 0, 1, 1, -1},        /* an accept resets the backoff */
        {FAIL, EMFILE, 0, 1, 100},
        {OPEN, 0, 0, 2, -1},        /* at the cap while waiting for the timer */
        {TIMER, 0, 0, 2, -1},       /* ... still at the cap: stays paused */
        {CLOSE, 0, 1, 1, -1},
        {CLOSE, 0, 1, 0, -1},
        {CLOSE, 0, 1, 0, -1},       /* never below 0 */
    };
    struct hooks h = {.watching = 1};
    struct accept_guard *g = accept_guard_new("test", 2, &ops, &h);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int arms = h.arms;
        switch (rows[i].op) {
        case OPEN:
            accept_guard_opened(g);
            break;
        case CLOSE:
            accept_guard_closed(g);
            break;
        case FAIL:
            assert_int_equal(accept_guard_failed(g, rows[i].err), rows[i].want_arm >= 0);
            break;
        case TIMER:
            accept_guard_on_timer(g);
            break;
        }
        assert_int_equal(h.watching, rows[i].want_watch);
        assert_int_equal(accept_guard_paused(g), !rows[i].want_watch);
        assert_int_equal(accept_guard_count(g), rows[i].want_count);
        if (rows[i].want_arm >= 0) {
            assert_int_equal(h.arms, arms + 1);
            assert_int_equal(h.last_arm, rows[i].want_arm);
        } else {
            assert_int_equal(h.arms, arms);
        }
    }
    accept_guard_free(g);
    accept_guard_free(NULL);
}

/* Per address: at most per_address per key, a put gives one back, keys are independent,
 * 0 means no limit; the reserve is the last cap/8 slots (1..64, none below a cap of 2). */
static void test_per_address(void **state)
{
    struct hooks h = {.watching = 1};
    struct accept_guard *g = accept_guard_new("http", 100, &ops, &h);
    accept_guard_set_per_address(g, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(accept_guard_addr_take(g, "127.0.0.1"), 0);
    assert_int_equal(accept_guard_addr_take(g, "127.0.0.1"), -1);
    assert_int_equal(accept_guard_addr_count(g, "127.0.0.1"), 3);
    assert_int_equal(accept_guard_addr_take(g, "2001:db8::/64"), 0);
    accept_guard_addr_put(g, "127.0.0.1");
    assert_int_equal(accept_guard_addr_take(g, "127.0.0.1"), 0);
    accept_guard_addr_put(g, "nobody"); /* never taken: nothing happens */
    for (int i = 0; i < 3; i++)
        accept_guard_addr_put(g, "127.0.0.1");
    assert_int_equal(accept_guard_addr_count(g, "127.0.0.1"), 0);
    accept_guard_addr_put(g, "127.0.0.1"); /* below zero: stays 0 */
    assert_int_equal(accept_guard_addr_count(g, "127.0.0.1"), 0);
    accept_guard_set_per_address(g, 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(accept_guard_addr_take(g, "10.0.0.1"), 0);
    /* the reserve: cap 100 -> the last 12 slots */
    for (int i = 0; i < 88; i++)
        accept_guard_opened(g);
    assert_int_equal(accept_guard_reserved(g), 0);
    accept_guard_opened(g);
    assert_int_equal(accept_guard_reserved(g), 1);
    accept_guard_closed(g);
    assert_int_equal(accept_guard_reserved(g), 0);
    accept_guard_free(g);
    struct hooks h1 = {.watching = 1};
    g = accept_guard_new("ws", 1, &ops, &h1); /* too small for a reserve */
    accept_guard_opened(g);
    assert_int_equal(accept_guard_reserved(g), 0);
    accept_guard_free(g);
    struct hooks h2 = {.watching = 1};
    g = accept_guard_new("http", 100000, &ops, &h2); /* at most 64 */
    for (int i = 0; i < 100000 - 64; i++)
        accept_guard_opened(g);
    assert_int_equal(accept_guard_reserved(g), 0);
    accept_guard_opened(g);
    assert_int_equal(accept_guard_reserved(g), 1);
    accept_guard_free(g);
}

static void test_fit_descriptors(void **state)
{
    static const struct {
        int64_t limit, http, ws; /* given (0: derived) */
        int rc;
        int64_t want_http, want_ws;
    } rows[] = {
        {1024, 0, 0, 0, 256, 616},         /* reserve 24 + 128 = 152: 872 left */
        {20000, 0, 0, 0, 4369, 13107},     /* reserve 2524: a quarter, the rest */
        {1048576, 0, 0, 0, 229370, 688110},
        {160, 0, 0, 0, 58, 58},
        {64, 0, 0, 0, 16, 16},             /* the audit's ulimit -n 64 */
        {20, 0, 0, 0, 1, 1},               /* nothing left: at least 1 */
        {1024, 100, 0, 0, 100, 616},
        {1024, 1000, 0, 0, 1000, 616},     /* fits alone (<= limit - 24) */
        {1024, 1001, 0, -1, 0, 0},         /* does not */
        {1024, 0, 5000, -1, 0, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct config c;
        memset(&c, 0, sizeof(c));
        c.http_max_connections = rows[i].http;
        c.ws_max_connections = rows[i].ws;
        assert_int_equal(config_fit_descriptors(&c, rows[i].limit), rows[i].rc);
        if (rows[i].rc == 0) {
            assert_int_equal(c.http_max_connections, rows[i].want_http);
            assert_int_equal(c.ws_max_connections, rows[i].want_ws);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_fit_descriptors),
        cmocka_unit_test(test_per_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
