/* test_relay_store_eventlog.c - unit tests for store/eventlog.c (pages of the event log): the
 * merge of partitions' entries by (ms, seq, partition) cut at the limit, records copied out of
 * the replies, one stream's entries kept in reply order, a reply of the wrong shape, and a
 * store that is not ready (the callback runs once, with store_err_unsent; positions at the
 * largest id send nothing, so the page is empty and not an error). No Redis: replies are
 * built by hand; the store is never started. runs on: the test process. */
#include "store/command.h"
#include "store/eventlog.c"

#include <event2/event.h>
#include <setjmp.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/unit/reply_pool.h"

static struct seen {
    int calls;
    const char *err;
    size_t n;
    char sid[8][SVEC_ID_TEXT];
    unsigned part[8];
    char rec[8][16];
} seen;

static void on_seen(void *arg, const char *err, const struct store_eventlog_entry *e, size_t n)
{
    seen.calls++;
    seen.err = err;
    seen.n = n;
    for (size_t i = 0; i < n && i < 8; i++) {
        snprintf(seen.sid[i], sizeof(seen.sid[i]), "%s", e[i].sid);
        seen.part[i] = e[i].part;
        snprintf(seen.rec[i], sizeof(seen.rec[i]), "%.*s", (int)e[i].rec_len,
                 e[i].rec ? e[i].rec : "");
    }
}

static redisReply *entry(struct rpool *p, const char *sid, const char *rec)
{
    return rp_arr(p, 2, rp_str(p, sid), rp_arr(p, 2, rp_str(p, "rec"), rp_str(p, rec)));
}

static void test_merge(void **state)
{
    struct rpool p = {0};
    memset(&seen, 0, sizeof(seen));
    struct page *pg = page_new(on_seen, NULL, 1, 3, 1);
    redisReply *r0 = rp_arr(&p, 3, entry(&p, "5-0", "a"), entry(&p, "7-1", "c"),
                            entry(&p, "9-0", "e"));
    redisReply *r1 = rp_arr(&p, 2, entry(&p, "6-0", "b"), entry(&p, "7-1", "d"));
    assert_int_equal(on_entries(pg, 0, NULL, r0), 0);
    assert_int_equal(on_entries(pg, 1, NULL, r1), 0);
    on_page(pg, NULL);
    assert_int_equal(seen.calls, 1);
    assert_null(seen.err);
    assert_int_equal(seen.n, 3); /* cut at the limit */
    assert_string_equal(seen.sid[0], "5-0");
    assert_string_equal(seen.sid[1], "6-0");
    assert_int_equal(seen.part[1], 1);
    assert_string_equal(seen.sid[2], "7-1"); /* the same id in two partitions: 0 first */
    assert_int_equal(seen.part[2], 0);
    assert_string_equal(seen.rec[2], "c");
}

static void test_one_stream(void **state)
{
    struct rpool p = {0};
    memset(&seen, 0, sizeof(seen));
    struct page *pg = page_new(on_seen, NULL, 0, 0, 0);
    pg->part = 4; /* a request's partition */
    redisReply *r = rp_arr(&p, 3, entry(&p, "5-0", "a"), rp_str(&p, "not an entry"),
                           rp_arr(&p, 2, rp_str(&p, "6-0"), rp_nil(&p)));
    assert_int_equal(on_entries(pg, 0, NULL, r), 0);
    on_page(pg, NULL);
    assert_int_equal(seen.n, 2);
    assert_int_equal(seen.part[0], 4);
    assert_string_equal(seen.rec[0], ""); /* records not asked for */
    assert_string_equal(seen.sid[1], "6-0");

    memset(&seen, 0, sizeof(seen));
    pg = page_new(on_seen, NULL, 0, 0, 1);
    redisReply *e = rp_str(&p, "ERR");
    e->type = REDIS_REPLY_ERROR;
    assert_int_equal(on_entries(pg, 0, NULL, e), -1);
    on_page(pg, store_err_reply);
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.n, 0);
}

static void test_not_ready(void **state)
{
    struct event_base *base = event_base_new();
    struct store_opts o = {.url = "redis://127.0.0.1:1", .prefix = "t", .partitions = 2};
    struct store *s = store_new(base, &o);
    memset(&seen, 0, sizeof(seen));
    store_eventlog_read(s, NULL, 10, on_seen, NULL);
    assert_int_equal(seen.calls, 1);
    assert_ptr_equal(seen.err, store_err_unsent);
    memset(&seen, 0, sizeof(seen));
    store_eventlog_newest_of(s, "0xabc", on_seen, NULL);
    assert_int_equal(seen.calls, 1);
    assert_ptr_equal(seen.err, store_err_unsent);
    struct svec_pos max[2] = {{UINT64_MAX, UINT64_MAX}, {UINT64_MAX, UINT64_MAX}};
    memset(&seen, 0, sizeof(seen));
    store_eventlog_read(s, max, 10, on_seen, NULL); /* nothing after the largest id */
    assert_int_equal(seen.calls, 1);
    assert_null(seen.err);
    assert_int_equal(seen.n, 0);
    memset(&seen, 0, sizeof(seen));
    store_eventlog_of_request(s, "0xabc", max, 10, on_seen, NULL);
    assert_int_equal(seen.calls, 1);
    assert_null(seen.err);
    store_free(s);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_one_stream),
        cmocka_unit_test(test_not_ready),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
