/* test_relay_store_slot.c - unit tests for store/cluster_slot.c (the pure half of Redis
 * Cluster routing): CRC16 and key slots against the Redis Cluster spec's vectors and hash-tag
 * rules, the routing key of every command shape the store sends, CLUSTER SLOTS replies built
 * by hand (Redis 7 shape, empty host, malformed), MOVED/ASK parsing, the redis-cluster:// URL
 * and splitting a hiredis-formatted command back into argv. No Redis. runs on: the test
 * process. */
#include "store/command.h"
#include "store/cluster_slot.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static unsigned slot(const char *k)
{
    return cluster_key_slot(k, strlen(k));
}

static void test_crc_and_slots(void **state)
{
    assert_int_equal(cluster_crc16("123456789", 9), 0x31C3);
    assert_int_equal(slot("foo"), 12182);
    assert_int_equal(slot("bar"), 5061);
    assert_int_equal(slot("{user1000}.following"), slot("{user1000}.followers"));
    assert_int_equal(slot("{user1000}.following"), slot("user1000"));
    /* only the first {...}; an empty tag hashes the whole key */
    assert_int_equal(slot("foo{bar}{zap}"), slot("bar"));
    assert_int_equal(slot("foo{}{bar}"), cluster_key_slot("foo{}{bar}", 10));
    assert_int_not_equal(slot("foo{}{bar}"), slot("bar"));
    assert_int_equal(slot("foo{{bar}}zap"), slot("{bar"));
    assert_int_equal(slot("foo{bar"), cluster_crc16("foo{bar", 7) & 16383);
    /* the deployment's keys share one slot */
    assert_int_equal(slot("{statusrelay}:events"), slot("{statusrelay}:wh:ep"));
    assert_int_equal(slot("{statusrelay}:x"), slot("statusrelay"));
    assert_int_equal(cluster_key_slot("", 0), 0);
}

static const char *key_of(int argc, const char *const *argv)
{
    size_t lens[16], kl = 0;
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    static char out[64];
    const char *k = cluster_cmd_key(argc, argv, lens, &kl);
    if (k == NULL)
        return "-";
    snprintf(out, sizeof(out), "%.*s", (int)kl, k);
    return out;
}

#define KEY(...) key_of(sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *), \
                        (const char *const[]){__VA_ARGS__})

static void test_cmd_key(void **state)
{
    assert_string_equal(KEY("HMGET", "{p}:r:1", "rec"), "{p}:r:1");
    assert_string_equal(KEY("evalsha", "abc", "2", "{p}:a", "{p}:b", "x"), "{p}:a");
    assert_string_equal(KEY("EVAL", "return 1", "0"), "-");
    assert_string_equal(KEY("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS",
                            "{p}:events", ">"),
                        "{p}:events");
    assert_string_equal(KEY("XREAD", "COUNT", "5", "STREAMS", "{p}:ev", "0-0"), "{p}:ev");
    assert_string_equal(KEY("XREAD", "COUNT", "5"), "-");
    assert_string_equal(KEY("XGROUP", "CREATE", "{p}:ev", "g", "0", "MKSTREAM"), "{p}:ev");
    assert_string_equal(KEY("XINFO", "STREAM", "{p}:ev"), "{p}:ev");
    assert_string_equal(KEY("XAUTOCLAIM", "{p}:ev", "g", "c", "0", "0"), "{p}:ev");
    assert_string_equal(KEY("PING"), "-");
    assert_string_equal(KEY("cluster", "slots"), "-");
    assert_string_equal(KEY("CONFIG", "GET", "x"), "-");
    assert_string_equal(KEY("ZCARD", "{p}:z"), "{p}:z");
}

/* reply builders */
struct pool {
    redisReply nodes[64];
    redisReply *arrs[64][8];
    size_t nn, na;
};

static redisReply *node(struct pool *p, int type)
{
    redisReply *r = &p->nodes[p->nn++];
    memset(r, 0, sizeof(*r));
    r->type = type;
    return r;
}

static redisReply *s_(struct pool *p, const char *s)
{
    redisReply *r = node(p, REDIS_REPLY_STRING);
    r->str = (char *)s;
    r->len = strlen(s);
    return r;
}

static redisReply *i_(struct pool *p, long long v)
{
    redisReply *r = node(p, REDIS_REPLY_INTEGER);
    r->integer = v;
    return r;
}

static redisReply *a_(struct pool *p, size_t n, ...)
{
    redisReply *r = node(p, REDIS_REPLY_ARRAY);
    r->element = p->arrs[p->na++];
    r->elements = n;
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        r->element[i] = va_arg(ap, redisReply *);
    va_end(ap);
    return r;
}

static void test_map_parse(void **state)
{
    static struct pool p;
    static struct cluster_map m;
    memset(&p, 0, sizeof(p));
    /* Redis 7: [start, end, [ip, port, id, {meta}], replica...]; the middle range on a node
     * announcing an empty host (= the node that answered) */
    redisReply *r = a_(&p, 3,
                       a_(&p, 4, i_(&p, 0), i_(&p, 5460),
                          a_(&p, 3, s_(&p, "127.0.0.1"), i_(&p, 7001), s_(&p, "id1")),
                          a_(&p, 3, s_(&p, "127.0.0.1"), i_(&p, 7004), s_(&p, "id4"))),
                       a_(&p, 3, i_(&p, 5461), i_(&p, 10922),
                          a_(&p, 3, s_(&p, ""), i_(&p, 7002), s_(&p, "id2"))),
                       a_(&p, 3, i_(&p, 10923), i_(&p, 16383),
                          a_(&p, 3, s_(&p, "127.0.0.1"), i_(&p, 7003), s_(&p, "id3"))));
    assert_int_equal(cluster_map_parse(&m, r, "10.0.0.9"), 16384);
    assert_int_equal(m.nmasters, 3);
    assert_string_equal(m.masters[m.owner[0]].host, "127.0.0.1");
    assert_int_equal(m.masters[m.owner[5460]].port, 7001);
    assert_string_equal(m.masters[m.owner[5461]].host, "10.0.0.9");
    assert_int_equal(m.masters[m.owner[12182]].port, 7003);

    /* a node with two ranges is one master; uncovered slots have no owner */
    memset(&p, 0, sizeof(p));
    r = a_(&p, 2, a_(&p, 3, i_(&p, 0), i_(&p, 9), a_(&p, 2, s_(&p, "h"), i_(&p, 1))),
           a_(&p, 3, i_(&p, 20), i_(&p, 29), a_(&p, 2, s_(&p, "h"), i_(&p, 1))));
    assert_int_equal(cluster_map_parse(&m, r, "x"), 20);
    assert_int_equal(m.nmasters, 1);
    assert_int_equal(m.owner[15], CLUSTER_NO_NODE);

    /* malformed: slot out of range, missing node, an error reply */
    memset(&p, 0, sizeof(p));
    r = a_(&p, 1, a_(&p, 3, i_(&p, 0), i_(&p, 16384), a_(&p, 2, s_(&p, "h"), i_(&p, 1))));
    assert_int_equal(cluster_map_parse(&m, r, "x"), -1);
    r = a_(&p, 1, a_(&p, 2, i_(&p, 0), i_(&p, 5)));
    assert_int_equal(cluster_map_parse(&m, r, "x"), -1);
    r = node(&p, REDIS_REPLY_ERROR);
    assert_int_equal(cluster_map_parse(&m, r, "x"), -1);
    assert_int_equal(cluster_map_parse(&m, a_(&p, 0), "x"), 0);
}

static void test_redirect(void **state)
{
    unsigned s = 0;
    struct cluster_addr a;
    const char *e = "MOVED 3999 127.0.0.1:6381";
    assert_int_equal(cluster_redirect_parse(e, strlen(e), &s, &a), 1);
    assert_int_equal(s, 3999);
    assert_string_equal(a.host, "127.0.0.1");
    assert_int_equal(a.port, 6381);
    e = "ASK 12182 [::1]:7002";
    assert_int_equal(cluster_redirect_parse(e, strlen(e), &s, &a), 2);
    assert_string_equal(a.host, "::1");
    assert_int_equal(a.port, 7002);
    e = "MOVED 99999 h:1";
    assert_int_equal(cluster_redirect_parse(e, strlen(e), &s, &a), 0);
    e = "MOVED 1 h";
    assert_int_equal(cluster_redirect_parse(e, strlen(e), &s, &a), 0);
    e = "NOSCRIPT No matching script";
    assert_int_equal(cluster_redirect_parse(e, strlen(e), &s, &a), 0);
}

static void test_url(void **state)
{
    struct cluster_url u;
    const char *why;
    assert_int_equal(cluster_url_parse(&u, "redis-cluster://127.0.0.1:7001", &why), 0);
    assert_int_equal(u.nseeds, 1);
    assert_null(u.password);
    cluster_url_cleanup(&u);
    assert_int_equal(
        cluster_url_parse(&u, "redis-cluster://me:p@ss@a:1,b:2,[::1]:3/0", &why), 0);
    assert_int_equal(u.nseeds, 3);
    assert_string_equal(u.user, "me");
    assert_string_equal(u.password, "p@ss");
    assert_string_equal(u.seeds[2].host, "::1");
    assert_int_equal(u.seeds[1].port, 2);
    cluster_url_cleanup(&u);
    assert_int_equal(cluster_url_parse(&u, "redis-cluster://me:p%40ss@a:1", &why), 0);
    assert_string_equal(u.password, "p@ss");
    cluster_url_cleanup(&u);
    assert_int_equal(cluster_url_parse(&u, "redis-cluster://:secret@a:1/", &why), 0);
    assert_null(u.user);
    assert_string_equal(u.password, "secret");
    cluster_url_cleanup(&u);

    assert_int_equal(cluster_url_parse(&u, "redis-cluster://a:1/2", &why), -1);
    assert_non_null(strstr(why, "db must be 0"));
    assert_int_equal(cluster_url_parse(&u, "redis-cluster://a", &why), -1);
    assert_non_null(strstr(why, "host:port"));
    assert_int_equal(cluster_url_parse(&u, "redis-cluster://", &why), -1);
    assert_int_equal(cluster_url_parse(&u, "redis-cluster://a:1,,b:2", &why), -1);
    assert_int_equal(cluster_url_parse(&u, "redis-cluster://a:1?tls=1", &why), -1);
    assert_int_equal(cluster_url_parse(&u, "redis://a:1", &why), -1);
}

/* issue 22: what the parser used to take silently or explain wrongly */
static void test_url_quirks(void **state)
{
    static const struct {
        const char *url, *why; /* why: a piece of the reason */
    } bad[] = {
        /* an unencoded '/' (or '?') in the password: the seeds were cut at it */
        {"redis-cluster://me:pa/ss@a:1,b:2", "percent-encoded (%2F, %3F)"},
        {"redis-cluster://:123/456@a:1", "percent-encoded"},
        {"redis-cluster://me:pa?ss@a:1", "percent-encoded"},
        {"redis-cluster://a:1/0@b:2", "percent-encoded"},
        /* %00 used to cut the password at the NUL */
        {"redis-cluster://me:sec%00ret@a:1", "%00"},
        {"redis-cluster://:%00@a:1", "%00"},
        {"redis-cluster://m%00e:secret@a:1", "%00"},
        /* empty entries in the node list: a trailing one was dropped silently */
        {"redis-cluster://a:1,b:2,", "trailing comma"},
        {"redis-cluster://a:1,", "trailing comma"},
        {"redis-cluster://,a:1", "leading, doubled or trailing comma"},
        {"redis-cluster://a:1,,b:2", "doubled"},
        {"redis-cluster://me:pw@a:1,/0", "comma"},
    };
    struct cluster_url u;
    const char *why;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        if (cluster_url_parse(&u, bad[i].url, &why) != -1)
            fail_msg("%s: accepted", bad[i].url);
        if (why == NULL || strstr(why, bad[i].why) == NULL)
            fail_msg("%s: reason \"%s\" lacks \"%s\"", bad[i].url, why ? why : "(null)",
                     bad[i].why);
        assert_null(u.user);
        assert_null(u.password);
    }
    /* encoded, they are fine */
    assert_int_equal(cluster_url_parse(&u, "redis-cluster://me:pa%2Fss%3F@a:1,b:2/0", &why), 0);
    assert_string_equal(u.password, "pa/ss?");
    assert_int_equal(u.nseeds, 2);
    cluster_url_cleanup(&u);
    assert_int_equal(cluster_url_parse(&u, "redis-cluster://me:%01x@a:1", &why), 0);
    assert_int_equal(u.password[0], 1); /* other bytes stay as given */
    cluster_url_cleanup(&u);
}

static void test_resp_split(void **state)
{
    char **argv;
    size_t *lens;
    char *buf = NULL;
    int len = redisFormatCommand(&buf, "HMGET %s rec %b", "{p}:r:1", "a\0b", (size_t)3);
    int argc = cluster_resp_split(buf, (size_t)len, &argv, &lens);
    assert_int_equal(argc, 4);
    assert_string_equal(argv[0], "HMGET");
    assert_string_equal(argv[1], "{p}:r:1");
    assert_int_equal(lens[3], 3);
    assert_memory_equal(argv[3], "a\0b", 3);
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    free(argv);
    free(lens);
    /* truncated and trailing garbage are refused */
    assert_int_equal(cluster_resp_split(buf, (size_t)len - 1, &argv, &lens), -1);
    redisFreeCommand(buf);
    assert_int_equal(cluster_resp_split("*1\r\n$3\r\nabc\r\nX", 14, &argv, &lens), -1);
    assert_int_equal(cluster_resp_split("*0\r\n", 4, &argv, &lens), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc_and_slots), cmocka_unit_test(test_cmd_key),
        cmocka_unit_test(test_map_parse),     cmocka_unit_test(test_redirect),
        cmocka_unit_test(test_url),           cmocka_unit_test(test_url_quirks),           cmocka_unit_test(test_resp_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
