/* test_relay_store_delivery_log.c - unit tests for store/delivery_log.c (the deliveries
 * listing): cursor rows with one and three partitions, the merge of partitions' pages
 * (newest first, cut at the limit, one offset per partition in the next cursor), the
 * degenerate one-partition page, replies of the wrong shape, and a store that is not ready
 * (the callback runs once, with store_err_unsent). No Redis: replies are built by hand and
 * fed to the reply functions; the store is never started. runs on: the test process. */
#include "store/command.h"
#include "store/delivery_log.c"

#include <event2/event.h>
#include <setjmp.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/unit/reply_pool.h"

static struct store *store_of(struct event_base *base, int partitions)
{
    struct store_opts o = {.url = "redis://127.0.0.1:1", .prefix = "t", .partitions = partitions};
    struct store *s = store_new(base, &o);
    assert_non_null(s);
    return s;
}

static void test_cursor_rows(void **state)
{
    static const struct {
        int parts;
        const char *in;
        int ok;
        long o0, olast;
    } rows[] = {
        {3, NULL, 1, 0, 0},      {3, "", 1, 0, 0},        {3, "1,2,3", 1, 1, 3},
        {3, "0,0,90", 1, 0, 90}, {3, "1,2", 0, 0, 0},     {3, "1,2,3,", 0, 0, 0},
        {3, "1,-2,3", 0, 0, 0},  {3, " 1,2,3", 0, 0, 0},  {3, "1,2,3x", 0, 0, 0},
        {3, "a", 0, 0, 0},       {1, "7", 1, 7, 7},       {1, "7,1", 0, 0, 0},
        {1, "-1", 0, 0, 0},      {1, "+1", 0, 0, 0},      {1, "", 1, 0, 0},
    };
    struct event_base *base = event_base_new();
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct store *s = store_of(base, rows[i].parts);
        struct store_dl_cursor *c = store_dl_cursor_parse(s, rows[i].in);
        assert_int_equal(c != NULL, rows[i].ok);
        if (c != NULL) {
            assert_int_equal(c->np, (unsigned)rows[i].parts);
            assert_int_equal(c->off[0], rows[i].o0);
            assert_int_equal(c->off[c->np - 1], rows[i].olast);
        }
        store_dl_cursor_free(c);
        store_free(s);
    }
    event_base_free(base);
}

/* What the page callback saw. */
static struct seen {
    int calls;
    const char *err;
    size_t n;
    char ids[8][16];
    size_t natt[8];
    char state0[16];
    char next[64];
    int has_next;
} seen;

static void on_page_seen(void *arg, const char *err, const struct store_dl_listed *e, size_t n,
                         const char *next)
{
    seen.calls++;
    seen.err = err;
    seen.n = n;
    for (size_t i = 0; i < n && i < 8; i++) {
        snprintf(seen.ids[i], sizeof(seen.ids[i]), "%s", e[i].id ? e[i].id : "");
        seen.natt[i] = e[i].nattempts;
    }
    if (n > 0)
        snprintf(seen.state0, sizeof(seen.state0), "%s", e[0].state ? e[0].state : "");
    seen.has_next = next != NULL;
    snprintf(seen.next, sizeof(seen.next), "%s", next ? next : "");
}

static redisReply *rec(struct rpool *p, const char *id, const char *ct, const char *off)
{
    return rp_arr(p, 12, rp_str(p, "id"), rp_str(p, id), rp_str(p, "ct"), rp_str(p, ct),
                  rp_str(p, "off"), rp_str(p, off), rp_str(p, "state"),
                  rp_str(p, "delivered"), rp_str(p, "nlog"), rp_str(p, "2"), rp_str(p, "a2"),
                  rp_str(p, "{\"n\":2}")); /* a1 missing: skipped */
}

static struct dl_page *page_of(unsigned np, int limit)
{
    struct dl_page *pg = xcalloc(1, sizeof(*pg));
    pg->cb = on_page_seen;
    pg->limit = limit;
    pg->pos.np = np;
    memset(&seen, 0, sizeof(seen));
    return pg;
}

static void test_merge(void **state)
{
    struct rpool p = {0};
    struct dl_page *pg = page_of(2, 2);
    /* partition 0: scanned to its end; partition 1: more to scan from offset 5 */
    redisReply *r0 = rp_arr(&p, 3, rp_int(&p, -1), rec(&p, "d_a", "30", "1"),
                            rec(&p, "d_c", "10", "2"));
    redisReply *r1 = rp_arr(&p, 2, rp_int(&p, 5), rec(&p, "d_b", "20", "1"));
    assert_int_equal(on_list_part(pg, 0, NULL, r0), 0);
    assert_int_equal(on_list_part(pg, 1, NULL, r1), 0);
    on_listed(pg, NULL);
    assert_int_equal(seen.calls, 1);
    assert_null(seen.err);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.ids[0], "d_a"); /* newest first across partitions */
    assert_string_equal(seen.ids[1], "d_b");
    assert_int_equal(seen.natt[0], 1);
    assert_string_equal(seen.state0, "delivered");
    assert_true(seen.has_next);
    assert_string_equal(seen.next, "1,5"); /* after d_a in 0; 1 shown all: the script's */

    pg = page_of(2, 5); /* everything shown, both scanned to the end: no next page */
    r0 = rp_arr(&p, 2, rp_int(&p, -1), rec(&p, "d_x", "5", "1"));
    r1 = rp_arr(&p, 2, rp_int(&p, -1), rec(&p, "d_y", "5", "1"));
    on_list_part(pg, 0, NULL, r0);
    on_list_part(pg, 1, NULL, r1);
    on_listed(pg, NULL);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.ids[0], "d_y"); /* same time: by id, descending */
    assert_false(seen.has_next);
}

static void test_one_partition(void **state)
{
    struct rpool p = {0};
    struct dl_page *pg = page_of(1, 50);
    on_list_part(pg, 0, NULL, rp_arr(&p, 2, rp_int(&p, 7), rec(&p, "d_a", "1", "3")));
    on_listed(pg, NULL);
    assert_int_equal(seen.n, 1);
    assert_string_equal(seen.next, "7"); /* the script's own offset, as one partition had */
    pg = page_of(1, 50);
    on_list_part(pg, 0, NULL, rp_arr(&p, 1, rp_int(&p, -1)));
    on_listed(pg, NULL);
    assert_int_equal(seen.n, 0);
    assert_false(seen.has_next);
}

static void test_bad_replies(void **state)
{
    struct rpool p = {0};
    struct dl_page *pg = page_of(1, 50);
    assert_int_equal(on_list_part(pg, 0, NULL, rp_arr(&p, 0)), -1);
    redisReply *e = rp_str(&p, "ERR");
    e->type = REDIS_REPLY_ERROR;
    assert_int_equal(on_list_part(pg, 0, NULL, e), -1);
    assert_int_equal(on_list_part(pg, 0, store_err_disconnected, NULL), 0); /* counted */
    on_listed(pg, store_err_reply);
    assert_int_equal(seen.calls, 1);
    assert_ptr_equal(seen.err, store_err_reply);
    assert_int_equal(seen.n, 0);
}

static void test_not_ready(void **state)
{
    struct event_base *base = event_base_new();
    struct store *s = store_of(base, 3);
    struct store_dl_cursor *c = store_dl_cursor_parse(s, NULL);
    memset(&seen, 0, sizeof(seen));
    store_dl_list(s, "wh_1", "", c, 10, on_page_seen, NULL);
    assert_int_equal(seen.calls, 1); /* once, before the call returned */
    assert_ptr_equal(seen.err, store_err_unsent);
    store_dl_cursor_free(c);
    store_free(s);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cursor_rows),  cmocka_unit_test(test_merge),
        cmocka_unit_test(test_one_partition), cmocka_unit_test(test_bad_replies),
        cmocka_unit_test(test_not_ready),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
