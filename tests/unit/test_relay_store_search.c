/* test_relay_store_search.c - unit tests for store/search.c (the search indexes): the normal
 * form of a value (0x values lower-cased, others kept, spaces and control bytes refused), the
 * index entries of a facts text (wallets, every transaction hash, the deposit's, referrer as
 * given, createdAt) and of a status record (only what the last record did not say), and the
 * merge of the partitions' pages. No Redis: replies are built by hand.
 * runs on: the test process. */
#include "store/search.c"

#include <setjmp.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/unit/reply_pool.h"

static int has(const struct store_search_ents *e, const char *s)
{
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->v[i], s) == 0)
            return 1;
    return 0;
}

static void test_norm(void **state)
{
    char out[STORE_SEARCH_MAX_VALUE + 1];
    assert_int_equal(store_search_norm(out, sizeof(out), "0xAbCdEF", 8), 8);
    assert_string_equal(out, "0xabcdef");
    assert_int_equal(store_search_norm(out, sizeof(out), "0XAB", 4), 4);
    assert_string_equal(out, "0xab");
    /* Solana / Bitcoin: case matters */
    assert_int_equal(store_search_norm(out, sizeof(out), "5VfYdXyZAb", 10), 10);
    assert_string_equal(out, "5VfYdXyZAb");
    assert_int_equal(store_search_norm(out, sizeof(out), "a b", 3), 0);
    assert_string_equal(out, "");
    assert_int_equal(store_search_norm(out, sizeof(out), "a\nb", 3), 0);
    assert_int_equal(store_search_norm(out, sizeof(out), "", 0), 0);
    char big[STORE_SEARCH_MAX_VALUE + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(store_search_norm(out, sizeof(out), big, strlen(big)), 0);
    assert_int_equal(store_search_norm(out, sizeof(out), big, STORE_SEARCH_MAX_VALUE),
                     STORE_SEARCH_MAX_VALUE);
}

static void test_facts_entries(void **state)
{
    static const char facts[] =
        "{\"createdAt\":1732600000123,\"updatedAt\":1732600009000,"
        "\"user\":\"0xAAAAaaaa00000000000000000000000000000001\","
        "\"sender\":\"0xaaaaAAAA00000000000000000000000000000001\","
        "\"recipient\":\"bc1qRecipient\",\"refundTo\":\"0xdead\",\"referrer\":\"My App\","
        "\"requestType\":null,"
        "\"depositAddress\":{\"address\":\"0xDEP\",\"type\":\"open\",\"depositor\":\"0xD0\","
        "\"depositTxHash\":\"0xDTX\",\"recoveryAddress\":null},"
        "\"currencyIn\":null,\"currencyOut\":null,\"refundCurrency\":null,"
        "\"inTxs\":[{\"txHash\":\"0xIN1\",\"chainId\":1},{\"txHash\":\"0xin1\",\"chainId\":1}],"
        "\"outTxs\":[{\"txHash\":\"SoLaNaSig\",\"chainId\":792703809}],"
        "\"fees\":null,\"appFees\":null,\"route\":null,\"orderId\":null,"
        "\"supersededByRequestId\":null}";
    struct store_search_ents e = {0};
    int64_t ca = 0;
    assert_int_equal(store_search_facts_entries(facts, strlen(facts), &e, &ca), 0);
    assert_int_equal(ca, 1732600000123LL);
    assert_true(has(&e, "w:0xaaaaaaaa00000000000000000000000000000001")); /* user = sender */
    assert_true(has(&e, "w:bc1qRecipient"));
    assert_true(has(&e, "w:0xd0"));
    assert_true(has(&e, "ref:My App")); /* free text, as given */
    assert_true(has(&e, "tx:0xin1"));
    assert_true(has(&e, "tx:SoLaNaSig"));
    assert_true(has(&e, "tx:0xdtx"));
    assert_true(has(&e, "dep:0xdep"));
    assert_false(has(&e, "w:0xdead")); /* refundTo is no wallet of the request's */
    /* user and sender are one entry, the two spellings of 0xIN1 too */
    assert_int_equal(e.n, 8);
    store_search_ents_free(&e);

    static const char facts2[] = "{\"createdAt\":null,\"user\":null,\"referrer\":\"relay.link\","
                                 "\"inTxs\":[],\"outTxs\":[]}";
    assert_int_equal(store_search_facts_entries(facts2, strlen(facts2), &e, &ca), 0);
    assert_int_equal(ca, -1);
    assert_int_equal(e.n, 1);
    assert_string_equal(e.v[0], "ref:relay.link");
    store_search_ents_free(&e);

    assert_int_equal(store_search_facts_entries("[1]", 3, &e, &ca), -1);
    assert_int_equal(store_search_facts_entries("{", 1, &e, &ca), -1);
    assert_int_equal(e.n, 0);
}

static void test_event_entries(void **state)
{
    struct status_event last, ev;
    status_event_init(&last);
    status_event_init(&ev);
    char a[] = "0xAB", b[] = "0xab", c[] = "0xCD", r[] = "ref", ad[] = "0xAd", wa[] = "0xWa",
         d[] = "0xD";
    char *in1[] = {a}, *in2[] = {b}, *out2[] = {c};
    last.in_tx_hashes = (struct proto_strv){in1, 1};
    ev.in_tx_hashes = (struct proto_strv){in2, 1};
    ev.tx_hashes = (struct proto_strv){out2, 1};
    ev.referrer = r;
    struct proto_deposit dep = {.address = ad, .depositor = wa, .deposit_tx_hash = d};
    ev.deposit = &dep;
    struct store_search_ents e = {0};
    store_search_event_entries(&last, &ev, &e);
    /* 0xAB is known from the last record: not again */
    assert_int_equal(e.n, 5);
    assert_true(has(&e, "tx:0xcd"));
    assert_true(has(&e, "tx:0xd"));
    assert_true(has(&e, "dep:0xad"));
    assert_true(has(&e, "w:0xwa"));
    assert_true(has(&e, "ref:ref"));
    store_search_ents_free(&e);
    store_search_event_entries(&ev, &ev, &e); /* nothing new */
    assert_int_equal(e.n, 0);
    store_search_event_entries(NULL, &last, &e);
    assert_int_equal(e.n, 1);
    assert_string_equal(e.v[0], "tx:0xab");
    store_search_ents_free(&e);
}

static struct seen {
    int calls, more;
    size_t n;
    char ids[8][16];
} seen;

static void on_seen(void *arg, const char *err, const struct store_req_ref *e, size_t n,
                    int more)
{
    seen.calls++;
    seen.n = n;
    seen.more = more;
    for (size_t i = 0; i < n && i < 8; i++)
        snprintf(seen.ids[i], sizeof(seen.ids[i]), "%s", e[i].id);
}

static void test_page_merge(void **state)
{
    struct rpool p = {0};
    struct ref_page *pg = ref_page_new(2, on_seen, NULL);
    assert_int_equal(ref_page_part(pg, 0, NULL,
                             rp_arr(&p, 4, rp_str(&p, "z"), rp_str(&p, "100"), rp_str(&p, "y"),
                                    rp_str(&p, "7"))),
                     0);
    assert_int_equal(ref_page_part(pg, 1, NULL, rp_arr(&p, 2, rp_str(&p, "a"), rp_str(&p, "100"))),
                     0);
    ref_page_done(pg, NULL);
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.n, 2);
    assert_true(seen.more);
    assert_string_equal(seen.ids[0], "y");
    assert_string_equal(seen.ids[1], "a");
}

static void test_given(void **state)
{
    struct store_search_query q = {.from = -1, .to = -1, .status = "success"};
    assert_false(store_search_given(&q));
    q.to = 5;
    assert_true(store_search_given(&q));
    q = (struct store_search_query){.from = -1, .to = -1, .referrer = ""};
    assert_false(store_search_given(&q));
    q.referrer = "x";
    assert_true(store_search_given(&q));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norm),          cmocka_unit_test(test_facts_entries),
        cmocka_unit_test(test_event_entries), cmocka_unit_test(test_page_merge),
        cmocka_unit_test(test_given),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
