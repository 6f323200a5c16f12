/* test_relay_store_keys.c - unit tests for store/keys.c: key names, the partition of a request
 * id and the partition hash tags (docs/partitions.md). The partition values are fixed: the
 * function must give the same answer in every version, or requests move between partitions.
 * No Redis. runs on: the test process. */
#include "store/cluster_slot.h"
#include "store/keys.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static unsigned part(const char *id, unsigned n)
{
    return key_partition(id, strlen(id), n);
}

static void test_build(void **state)
{
    char k[KEY_MAX];
    assert_int_equal(key_build(k, sizeof(k), "{sr}", "events", NULL, NULL), 11);
    assert_string_equal(k, "{sr}:events");
    key_build(k, sizeof(k), "{sr}", "req", "0xab", NULL);
    assert_string_equal(k, "{sr}:req:0xab");
    key_build(k, sizeof(k), "{sr:p2}", "order", "wh_1", "0xab");
    assert_string_equal(k, "{sr:p2}:order:wh_1:0xab");
    char small[8];
    assert_int_equal(key_build(small, sizeof(small), "{sr}", "events", NULL, NULL), 7);
    assert_string_equal(small, "{sr}:ev");
}

static void test_partition(void **state)
{
    static const char h64[] = "0xabababababababababababababababababababababababababababababababab";
    static const char z64[] = "0x0000000000000000000000000000000000000000000000000000000000000000";
    /* one partition: everything in 0, whatever the id */
    assert_int_equal(part(h64, 1), 0);
    assert_int_equal(part("a", 0), 0);
    /* CRC16-XMODEM (the cluster's hash) mod N: fixed values, never to change */
    assert_int_equal(cluster_crc16("123456789", 9), 0x31C3);
    assert_int_equal(part("123456789", 3), 0x31C3 % 3);
    assert_int_equal(part(h64, 3), 2);  /* crc 0x7439 */
    assert_int_equal(part(z64, 3), 0);  /* crc 0x43FB */
    assert_int_equal(part("req-1", 3), 1);
    assert_int_equal(part(h64, 12), 5);
    assert_int_equal(part(z64, 64), 59);
    assert_int_equal(part("req-1", 64), 34);
    /* the id's bytes as they are: case matters (ids are stored case-sensitively) */
    assert_int_not_equal(part("0xAB", 64), part("0xab", 64));
    /* every partition is reachable: 1,000 ids over 3 partitions land in each */
    unsigned seen[3] = {0};
    char id[80];
    for (int i = 0; i < 1000; i++) {
        snprintf(id, sizeof(id), "0x%064x", i);
        seen[key_partition(id, strlen(id), 3)]++;
    }
    for (int k = 0; k < 3; k++)
        assert_true(seen[k] > 250);
}

static void test_tags(void **state)
{
    char t[KEY_TAG_MAX];
    /* one partition: today's tag, so every key name stays what it was */
    assert_int_equal(key_part_tag(t, sizeof(t), "statusrelay", 0, 1), 13);
    assert_string_equal(t, "{statusrelay}");
    key_part_tag(t, sizeof(t), "statusrelay", 0, 0);
    assert_string_equal(t, "{statusrelay}");
    key_part_tag(t, sizeof(t), "statusrelay", 0, 3);
    assert_string_equal(t, "{statusrelay:p0}");
    key_part_tag(t, sizeof(t), "statusrelay", 2, 3);
    assert_string_equal(t, "{statusrelay:p2}");
    key_part_tag(t, sizeof(t), "sr", 63, 64);
    assert_string_equal(t, "{sr:p63}");
    /* each partition is its own slot, none the deployment's */
    char k0[KEY_MAX], k1[KEY_MAX], kd[KEY_MAX];
    key_part_tag(t, sizeof(t), "statusrelay", 0, 3);
    key_build(k0, sizeof(k0), t, "events", NULL, NULL);
    key_part_tag(t, sizeof(t), "statusrelay", 1, 3);
    key_build(k1, sizeof(k1), t, "events", NULL, NULL);
    key_build(kd, sizeof(kd), "{statusrelay}", "whs", NULL, NULL);
    assert_int_not_equal(cluster_key_slot(k0, strlen(k0)), cluster_key_slot(k1, strlen(k1)));
    assert_int_not_equal(cluster_key_slot(k0, strlen(k0)), cluster_key_slot(kd, strlen(kd)));
    /* the longest prefix config accepts (150) fits a tag of the highest partition */
    char prefix[151];
    memset(prefix, 'x', 150);
    prefix[150] = '\0';
    assert_int_equal(key_part_tag(t, sizeof(t), prefix, 63, 64), 150 + 6);
}

/* The master (0..m-1) of slot when m masters share the slot space as redis-cli --cluster
 * create splits it (a running float cursor, lround). */
static unsigned master_of(unsigned slot, unsigned m)
{
    double per = (double)CLUSTER_SLOTS / m, cursor = 0;
    long first = 0;
    for (unsigned i = 0; i < m; i++) {
        long last = lround(cursor + per - 1);
        if (last > CLUSTER_SLOTS - 1 || i == m - 1)
            last = CLUSTER_SLOTS - 1;
        if ((long)slot >= first && (long)slot <= last)
            return i;
        first = last + 1;
        cursor += per;
    }
    return m - 1;
}

static unsigned tag_slot(const char *prefix, unsigned k, unsigned n)
{
    char t[KEY_TAG_MAX];
    size_t l = key_spread_tag(t, sizeof(t), prefix, k, n);
    return cluster_key_slot(t, l);
}

/* A pseudo-random prefix of 2..24 characters (a fixed sequence: the test is deterministic). */
static void some_prefix(char *p, unsigned i)
{
    static const char cs[] = "abcdefghijklmnopqrstuvwxyz0123456789_-.:ABCXYZ";
    uint64_t r = 0x9E3779B97F4A7C15ULL * (i + 1);
    unsigned len = 2 + (unsigned)(r >> 59) % 23;
    for (unsigned j = 0; j < len; j++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        p[j] = cs[(r >> 33) % (sizeof(cs) - 1)];
    }
    p[len] = '\0';
}

static void test_spread_tags(void **state)
{
    char t[KEY_TAG_MAX];
    /* one partition: the deployment tag, as in every scheme */
    key_spread_tag(t, sizeof(t), "statusrelay", 0, 1);
    assert_string_equal(t, "{statusrelay}");
    /* fixed values: the tags of a deployment must never change */
    key_spread_tag(t, sizeof(t), "statusrelay", 0, 3);
    assert_string_equal(t, "{statusrelay:p0.0}");
    key_spread_tag(t, sizeof(t), "statusrelay", 1, 3);
    assert_string_equal(t, "{statusrelay:p1.2}");
    key_spread_tag(t, sizeof(t), "statusrelay", 2, 3);
    assert_string_equal(t, "{statusrelay:p2.1}");
    key_spread_tag(t, sizeof(t), "sr", 5, 6);
    assert_string_equal(t, "{sr:p5.42}");
    key_spread_tag(t, sizeof(t), "sr", 62, 64);
    assert_string_equal(t, "{sr:p62.22}");
    assert_int_equal(tag_slot("statusrelay", 0, 3), 2389);
    assert_int_equal(tag_slot("statusrelay", 1, 3), 7719);
    assert_int_equal(tag_slot("statusrelay", 2, 3), 14100);
    /* the scheme switch: plain is key_part_tag */
    key_tag_of_scheme(t, sizeof(t), KEY_TAGS_PLAIN, "sr", 2, 3);
    assert_string_equal(t, "{sr:p2}");
    key_tag_of_scheme(t, sizeof(t), KEY_TAGS_SPREAD, "sr", 5, 6);
    assert_string_equal(t, "{sr:p5.42}");
    /* N partitions on N masters split as redis-cli does: partition k on master k, for 1,000
     * prefixes and N = 2..16 (the plain tags: at most 4 masters), each slot in the middle half
     * of its range */
    char prefix[32];
    for (unsigned i = 0; i < 1000; i++) {
        some_prefix(prefix, i);
        for (unsigned n = 2; n <= 16; n++)
            for (unsigned k = 0; k < n; k++) {
                unsigned slot = tag_slot(prefix, k, n);
                assert_int_equal(master_of(slot, n), k);
                assert_true(slot >= (4 * k + 1) * CLUSTER_SLOTS / (4 * n));
                assert_true(slot < (4 * k + 3) * CLUSTER_SLOTS / (4 * n));
            }
    }
    /* every N up to the maximum, on N masters and on every M dividing N (N / M each) */
    for (unsigned i = 0; i < 20; i++) {
        some_prefix(prefix, 5000 + i);
        for (unsigned n = 17; n <= KEY_MAX_PARTITIONS; n++) {
            for (unsigned k = 0; k < n; k++) {
                unsigned slot = tag_slot(prefix, k, n);
                assert_int_equal(master_of(slot, n), k);
                for (unsigned m = 2; m < n; m++)
                    if (n % m == 0)
                        assert_int_equal(master_of(slot, m), k / (n / m));
            }
        }
    }
    /* the longest prefix config accepts (150) fits, for every partition of the maximum */
    char longest[151];
    memset(longest, 'x', 150);
    longest[150] = '\0';
    for (unsigned k = 0; k < KEY_MAX_PARTITIONS; k++) {
        size_t l = key_spread_tag(t, sizeof(t), longest, k, KEY_MAX_PARTITIONS);
        assert_true(l < sizeof(t) - 1);
        assert_int_equal(t[l - 1], '}');
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build),
        cmocka_unit_test(test_partition),
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_spread_tags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
