/* test_relay_store_facts.c - unit tests for store/facts.c's stored form of request facts:
 * zlib with the preset dictionary round-trips every fixture item's facts, is smaller than
 * plain zlib, and refuses what it did not write. No Redis. runs on: the test process. */
#include "protocol/facts.h"
#include "protocol/json.h"
#include "store/facts.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

static char *read_fixture(size_t *n)
{
    FILE *f = fopen("tests/fixtures/upstream/requests_v3_page.json", "rb");
    assert_non_null(f);
    static char buf[1 << 20];
    *n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    return buf;
}

static void test_round_trip(void **state)
{
    size_t n;
    char *page = read_fixture(&n);
    struct pjson_doc doc;
    struct proto_err e;
    assert_int_equal(pjson_parse(page, n, &doc, &e), 0);
    int items = 0;
    for (const struct pjson *it = pjson_get(doc.root, "requests")->u.kids.first; it;
         it = it->next, items++) {
        char *text, *val, *back;
        size_t tl, vl, bl;
        assert_int_equal(proto_facts_from_pjson(it, "", NULL, &text, &tl, &e), 0);
        assert_int_equal(store_facts_encode(text, tl, &val, &vl), 0);
        assert_int_equal(val[0], 'z');
        assert_int_equal(store_facts_decode(val, vl, &back, &bl), 0);
        assert_int_equal(bl, tl);
        assert_memory_equal(back, text, tl);
        /* the dictionary pays: well under plain zlib level 9, and under a sixth of the text */
        uLongf pl = compressBound(tl);
        unsigned char *plain = malloc(pl);
        assert_int_equal(compress2(plain, &pl, (const Bytef *)text, tl, 9), Z_OK);
        assert_true(vl < pl * 3 / 4);
        assert_true(vl < tl / 5);
        /* a plain JSON text reads as itself; damage is refused, not misread */
        free(back);
        assert_int_equal(store_facts_decode(text, tl, &back, &bl), 0);
        assert_memory_equal(back, text, tl);
        free(back);
        val[vl / 2] ^= 0x55;
        assert_int_equal(store_facts_decode(val, vl, &back, &bl), -1);
        assert_null(back);
        assert_int_equal(store_facts_decode(val, vl / 2, &back, &bl), -1);
        assert_int_equal(store_facts_decode("x", 1, &back, &bl), -1);
        assert_int_equal(store_facts_decode("", 0, &back, &bl), -1);
        /* an older version against the next newer text: round-trips, a fraction of its 'z'
         * form when the newer text repeats it, refused against another text */
        char *dv, *dback;
        size_t dl, dbl;
        assert_int_equal(store_facts_encode_delta(text, tl, text, tl, &dv, &dl), 0);
        assert_int_equal(dv[0], 'd');
        assert_true(dl < vl / 4);
        assert_int_equal(store_facts_decode_older(dv, dl, text, tl, &dback, &dbl), 0);
        assert_int_equal(dbl, tl);
        assert_memory_equal(dback, text, tl);
        free(dback);
        assert_int_equal(store_facts_decode_older(dv, dl, "{}", 2, &dback, &dbl), -1);
        assert_null(dback);
        assert_int_equal(store_facts_decode_older(dv, dl, NULL, 0, &dback, &dbl), -1);
        assert_int_equal(store_facts_decode(dv, dl, &dback, &dbl), -1); /* needs its newer */
        /* any other stored form reads without the newer text */
        char *zv;
        size_t zl;
        assert_int_equal(store_facts_encode(text, tl, &zv, &zl), 0);
        assert_int_equal(store_facts_decode_older(zv, zl, NULL, 0, &dback, &dbl), 0);
        assert_memory_equal(dback, text, tl);
        free(dback);
        free(zv);
        free(dv);
        free(plain);
        free(val);
        free(text);
    }
    assert_int_equal(items, 4);
    pjson_free(&doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
