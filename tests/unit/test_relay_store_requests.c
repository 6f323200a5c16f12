/* test_relay_store_requests.c - unit tests for store/requests.c (the request records of the
 * REST views): fields read from an HMGET-like array (nil and missing values absent, found and
 * tracked), the merge of partitions' index pages (score as a number, then id bytes; cut at
 * the limit with "more"), and a store that is not ready (a get is refused; a page and a read
 * complete once with store_err_unsent). No Redis: replies are built by hand; the store is
 * never started. runs on: the test process. */
#include "store/command.h"
#include "store/requests.c"

#include <event2/event.h>
#include <setjmp.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/unit/reply_pool.h"

static void test_fill(void **state)
{
    struct rpool p = {0};
    struct store_request r;
    redisReply *a = rp_arr(&p, 9, rp_str(&p, "{}"), rp_str(&p, "3"), rp_str(&p, "pending"),
                           rp_nil(&p), rp_str(&p, "100"), rp_str(&p, "1"), rp_nil(&p),
                           rp_str(&p, "active"), rp_nil(&p));
    fill(&r, SRF_REST, a, NULL);
    assert_true(r.found);
    assert_true(r.tracked);
    assert_string_equal(r.status.str, "pending");
    assert_int_equal(r.status.len, 7);
    assert_null(r.meta.str);
    assert_string_equal(r.watch.str, "active");
    assert_null(r.cf.str); /* not asked for */
    fill(&r, SRF_REC | SRF_CF, rp_arr(&p, 2, rp_nil(&p), rp_str(&p, "55")), NULL);
    assert_true(r.found);
    assert_null(r.rec.str);
    assert_string_equal(r.cf.str, "55");
    assert_false(r.tracked);
    fill(&r, SRF_REST, rp_arr(&p, 2, rp_nil(&p), rp_nil(&p)), NULL); /* short: the rest absent */
    assert_false(r.found);
    fill(&r, SRF_REST, rp_str(&p, "not an array"), NULL);
    assert_false(r.found);
    fill(&r, SRF_TRK, rp_arr(&p, 1, rp_str(&p, "11")), NULL);
    assert_false(r.tracked);
    assert_int_equal(count_of(SRF_REST), 9);
}

static struct seen {
    int calls, more;
    const char *err;
    size_t n;
    char ids[8][16];
} seen;

static void on_page_seen(void *arg, const char *err, const struct store_req_ref *e, size_t n,
                         int more)
{
    seen.calls++;
    seen.err = err;
    seen.n = n;
    seen.more = more;
    for (size_t i = 0; i < n && i < 8; i++)
        snprintf(seen.ids[i], sizeof(seen.ids[i]), "%s", e[i].id);
}

static void test_page_merge(void **state)
{
    struct rpool p = {0};
    memset(&seen, 0, sizeof(seen));
    struct ref_page *pg = ref_page_new(3, on_page_seen, NULL);
    redisReply *r0 = rp_arr(&p, 4, rp_str(&p, "b"), rp_str(&p, "9"), rp_str(&p, "c"),
                            rp_str(&p, "10"));
    redisReply *r1 = rp_arr(&p, 5, rp_str(&p, "a"), rp_str(&p, "10"), rp_str(&p, "z"),
                            rp_str(&p, "11"), rp_str(&p, "odd")); /* a trailing id: ignored */
    assert_int_equal(ref_page_part(pg, 0, NULL, r0), 0);
    assert_int_equal(ref_page_part(pg, 1, NULL, r1), 0);
    ref_page_done(pg, NULL);
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.n, 3);
    assert_true(seen.more);
    assert_string_equal(seen.ids[0], "b"); /* 9 before 10: numbers, not text */
    assert_string_equal(seen.ids[1], "a"); /* same score: id bytes */
    assert_string_equal(seen.ids[2], "c");

    memset(&seen, 0, sizeof(seen));
    pg = ref_page_new(3, on_page_seen, NULL);
    redisReply *e = rp_str(&p, "ERR");
    e->type = REDIS_REPLY_ERROR;
    assert_int_equal(ref_page_part(pg, 0, NULL, e), -1);
    ref_page_done(pg, store_err_reply);
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.n, 0);
}

static int done_calls;
static const char *done_err;

static void on_each(void *arg, size_t i, const struct store_request *r)
{
    fail(); /* nothing is read from a store that is not ready */
}

static void on_done(void *arg, const char *err)
{
    done_calls++;
    done_err = err;
}

static void on_got(void *arg, const char *err, const struct store_request *r)
{
    fail();
}

static void test_not_ready(void **state)
{
    struct event_base *base = event_base_new();
    struct store_opts o = {.url = "redis://127.0.0.1:1", .prefix = "t", .partitions = 3};
    struct store *s = store_new(base, &o);
    assert_int_equal(store_request_get(s, "0xabc", SRF_REST, on_got, NULL), -1);
    memset(&seen, 0, sizeof(seen));
    struct store_req_query q = {.index = STORE_REQ_STATUS, .status = "pending", .limit = 5};
    store_requests_page(s, &q, on_page_seen, NULL);
    assert_int_equal(seen.calls, 1);
    assert_ptr_equal(seen.err, store_err_unsent);
    const char *ids[] = {"0xa", "0xb", "0xc", "0xd"};
    store_requests_read(s, ids, 4, on_each, on_done, NULL);
    assert_int_equal(done_calls, 1);
    assert_ptr_equal(done_err, store_err_unsent);
    store_free(s);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill),
        cmocka_unit_test(test_page_merge),
        cmocka_unit_test(test_not_ready),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
