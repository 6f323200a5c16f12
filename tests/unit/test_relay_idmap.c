/* test_relay_idmap.c - unit tests for relay/common/idmap.c (the id set of the dashboard hub):
 * put/get/del/count/each, growth far past the first capacity, churn with deletions, ids of
 * the maximum length; and its keyed hash (relay/common/siphash.c): the reference vectors, and
 * two maps (two random keys) place the same ids in different orders.
 * runs on: the test process, one thread. */
#include "protocol/proto.h"
#include "relay/common/idmap.h"
#include "relay/common/siphash.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void id_of(char *buf, size_t n, unsigned i)
{
    snprintf(buf, n, "0x%064x", i);
}

static void test_put_get_del(void **state)
{
    struct idmap *m = idmap_new();
    uint32_t v = 0;
    assert_int_equal(idmap_count(m), 0);
    assert_int_equal(idmap_get(m, "0xabc", &v), 0);
    assert_int_equal(idmap_put(m, "0xabc", 7), 1);
    assert_int_equal(idmap_put(m, "0xabc", 9), 0); /* update, not new */
    assert_int_equal(idmap_get(m, "0xabc", &v), 1);
    assert_int_equal(v, 9);
    assert_int_equal(idmap_get(m, "0xabd", NULL), 0);
    assert_int_equal(idmap_get(m, "0xab", NULL), 0); /* a prefix is another id */
    assert_int_equal(idmap_count(m), 1);
    assert_int_equal(idmap_del(m, "0xabc"), 1);
    assert_int_equal(idmap_del(m, "0xabc"), 0);
    assert_int_equal(idmap_get(m, "0xabc", NULL), 0);
    assert_int_equal(idmap_count(m), 0);
    idmap_free(m);
    idmap_free(NULL);
}

static void test_grow_and_churn(void **state)
{
    enum { N = 20000 };
    struct idmap *m = idmap_new();
    char id[80];
    for (unsigned i = 0; i < N; i++) {
        id_of(id, sizeof(id), i);
        assert_int_equal(idmap_put(m, id, i * 3), 1);
    }
    assert_int_equal(idmap_count(m), N);
    for (unsigned i = 0; i < N; i += 2) { /* delete every other one */
        id_of(id, sizeof(id), i);
        assert_int_equal(idmap_del(m, id), 1);
    }
    assert_int_equal(idmap_count(m), N / 2);
    for (unsigned i = 0; i < N; i++) {
        uint32_t v = 0;
        id_of(id, sizeof(id), i);
        int has = idmap_get(m, id, &v);
        assert_int_equal(has, i % 2);
        if (has)
            assert_int_equal(v, i * 3);
    }
    /* reinsert into the holes the deletions left: nothing is lost or duplicated */
    for (unsigned i = 0; i < N; i += 2) {
        id_of(id, sizeof(id), i);
        assert_int_equal(idmap_put(m, id, 1), 1);
    }
    assert_int_equal(idmap_count(m), N);
    idmap_free(m);
}

struct visit {
    size_t n;
    uint64_t sum;
};

static void visit(void *arg, const char *id, uint32_t *value)
{
    struct visit *v = arg;
    v->n++;
    v->sum += *value;
    *value += 1; /* the callback may update the value */
}

static void test_each(void **state)
{
    struct idmap *m = idmap_new();
    char id[80];
    uint64_t want = 0;
    for (unsigned i = 0; i < 500; i++) {
        id_of(id, sizeof(id), i);
        idmap_put(m, id, i);
        want += i;
    }
    id_of(id, sizeof(id), 7);
    idmap_del(m, id);
    want -= 7;
    struct visit v = {0};
    idmap_each(m, visit, &v);
    assert_int_equal(v.n, 499);
    assert_int_equal(v.sum, want);
    uint32_t x = 0;
    id_of(id, sizeof(id), 8);
    assert_int_equal(idmap_get(m, id, &x), 1);
    assert_int_equal(x, 9);
    idmap_free(m);
}

static void test_long_ids(void **state)
{
    struct idmap *m = idmap_new();
    char a[PROTO_MAX_ID + 1], b[PROTO_MAX_ID + 1];
    memset(a, 'a', PROTO_MAX_ID);
    a[PROTO_MAX_ID] = '\0';
    memcpy(b, a, sizeof(a));
    b[PROTO_MAX_ID - 1] = 'b'; /* differs only in the last byte */
    assert_int_equal(idmap_put(m, a, 1), 1);
    assert_int_equal(idmap_put(m, b, 2), 1);
    uint32_t v = 0;
    assert_int_equal(idmap_get(m, a, &v), 1);
    assert_int_equal(v, 1);
    assert_int_equal(idmap_get(m, b, &v), 1);
    assert_int_equal(v, 2);
    assert_int_equal(idmap_count(m), 2);
    idmap_free(m);
}

/* SipHash-2-4 with key 00 01 .. 0f over the messages 00 01 .. (n-1): the paper's appendix
 * and the reference implementation's vectors.h (n = 0, 1, 8, 15). */
static void test_siphash_vectors(void **state)
{
    unsigned char kb[16], msg[16];
    for (int i = 0; i < 16; i++)
        kb[i] = (unsigned char)i, msg[i] = (unsigned char)i;
    struct sipkey k;
    sipkey_from_bytes(&k, kb);
    assert_true(siphash24(&k, msg, 0) == 0x726fdb47dd0e0e31ULL);
    assert_true(siphash24(&k, msg, 1) == 0x74f839c593dc67fdULL);
    assert_true(siphash24(&k, msg, 8) == 0x93f5f5799a932462ULL);
    assert_true(siphash24(&k, msg, 15) == 0xa129ca6149be45e5ULL);
    /* 1-3 is another function of the same key, and the key matters */
    assert_true(siphash13(&k, msg, 15) != siphash24(&k, msg, 15));
    struct sipkey r1, r2;
    sipkey_random(&r1);
    sipkey_random(&r2);
    assert_true(siphash13(&r1, "0xabc", 5) != siphash13(&r2, "0xabc", 5));
    assert_true(sip_process_key() == sip_process_key());
    assert_true(sip_str32("0xabc") == sip_str32("0xabc"));
}

struct order {
    size_t n;
    char ids[64][80];
};

static void record(void *arg, const char *id, uint32_t *value)
{
    struct order *o = arg;
    snprintf(o->ids[o->n++], sizeof(o->ids[0]), "%s", id);
}

/* The same ids land in different slots of two maps: the order a client could aim at is
 * unknowable (with 64 ids, equal orders by chance are out of the question). */
static void test_seeded_order(void **state)
{
    struct idmap *a = idmap_new(), *b = idmap_new();
    char id[80];
    for (unsigned i = 0; i < 64; i++) {
        id_of(id, sizeof(id), i);
        idmap_put(a, id, i);
        idmap_put(b, id, i);
    }
    static struct order oa, ob;
    idmap_each(a, record, &oa);
    idmap_each(b, record, &ob);
    assert_int_equal(oa.n, 64);
    assert_int_equal(ob.n, 64);
    assert_true(memcmp(oa.ids, ob.ids, sizeof(oa.ids)) != 0);
    idmap_free(a);
    idmap_free(b);
}

/* The _h calls with a hash made once (the fan-out's open pairs, issue 26) find, update and
 * delete the same entries as the plain calls, through growth and backward-shift deletes. */
static void test_hashed_once(void **state)
{
    struct idmap *m = idmap_new();
    char id[80];
    uint32_t v = 0;
    for (unsigned i = 0; i < 2000; i++) {
        id_of(id, sizeof(id), i);
        uint32_t h = idmap_hash(m, id);
        assert_int_equal(idmap_get_h(m, id, h, NULL), 0);
        assert_int_equal(idmap_put_h(m, id, h, i), 1);
        assert_int_equal(idmap_put_h(m, id, h, i + 1), 0); /* update */
        assert_int_equal(idmap_get(m, id, &v), 1);
        assert_int_equal(v, i + 1);
    }
    for (unsigned i = 0; i < 2000; i += 2) {
        id_of(id, sizeof(id), i);
        assert_int_equal(idmap_del_h(m, id, idmap_hash(m, id)), 1);
        assert_int_equal(idmap_del_h(m, id, idmap_hash(m, id)), 0);
    }
    assert_int_equal(idmap_count(m), 1000);
    for (unsigned i = 0; i < 2000; i++) {
        id_of(id, sizeof(id), i);
        assert_int_equal(idmap_get_h(m, id, idmap_hash(m, id), &v), i % 2);
        if (i % 2)
            assert_int_equal(v, i + 1);
    }
    idmap_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_del),
        cmocka_unit_test(test_grow_and_churn),
        cmocka_unit_test(test_each),
        cmocka_unit_test(test_long_ids),
        cmocka_unit_test(test_siphash_vectors),
        cmocka_unit_test(test_seeded_order),
        cmocka_unit_test(test_hashed_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
