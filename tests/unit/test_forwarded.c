/* test_forwarded.c - unit tests for protocol/forwarded.c: the trusted proxy list (addresses,
 * CIDRs, IPv4 and IPv6, bad entries), matching, address keys, and the client address of
 * X-Forwarded-For and Forwarded values (the rightmost untrusted element; spoofed left parts
 * ignored; malformed values).
 * runs on: the test process, one thread. */
#include "protocol/forwarded.c"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

static struct proto_cidr_list trusted;

static void set_trusted(const char *s)
{
    const char *why = NULL;
    if (proto_cidr_list_parse(s, &trusted, &why) != 0)
        fail_msg("trusted list %s refused: %s", s, why);
}

static void test_list_parse(void **state)
{
    static const char *const good[] = {
        "", "  ", "127.0.0.1", "10.0.0.0/8", " 10.0.0.0/8 , 192.168.1.1 ", "::1",
        "2001:db8::/32", "fe80::/10,127.0.0.0/8", "::ffff:10.0.0.0/104", "0.0.0.0/0", "::/0",
        "10.1.2.3/8", /* host bits past the prefix: masked */
    };
    static const char *const bad[] = {
        ",", "127.0.0.1,", ",127.0.0.1", "127.0.0.1,,::1", "localhost", "10.0.0.0/33",
        "::/129", "10.0.0.0/", "10.0.0.0/x", "10.0.0.0/8/8", "1.2.3", "1.2.3.4.5",
        "[::1]", "::1%lo", "::ffff:10.0.0.0/90", "1.2.3.4:80", "10.0.0.0/-1", "256.1.1.1",
    };
    struct proto_cidr_list l;
    const char *why;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (proto_cidr_list_parse(good[i], &l, &why) != 0)
            fail_msg("%s refused: %s", good[i], why);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        if (proto_cidr_list_parse(bad[i], &l, &why) == 0)
            fail_msg("%s accepted", bad[i]);
        assert_non_null(why);
        assert_true(why[0] != '\0');
    }
    char many[64 * 12 + 32] = "";
    for (int i = 0; i < 65; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s10.0.0.%d", i ? "," : "",
                 i);
    assert_int_equal(proto_cidr_list_parse(many, &l, &why), -1);
    assert_int_equal(proto_cidr_list_parse(NULL, &l, &why), 0);
    assert_int_equal(l.n, 0);
}

static int matches(const char *list, const char *addr)
{
    struct proto_ip ip;
    set_trusted(list);
    if (proto_ip_parse(addr, strlen(addr), &ip) != 0)
        fail_msg("bad test address %s", addr);
    return proto_cidr_list_match(&trusted, &ip);
}

static void test_match(void **state)
{
    assert_true(matches("127.0.0.1", "127.0.0.1"));
    assert_false(matches("127.0.0.1", "127.0.0.2"));
    assert_true(matches("10.0.0.0/8", "10.255.1.2"));
    assert_false(matches("10.0.0.0/8", "11.0.0.1"));
    assert_true(matches("10.1.2.3/8", "10.9.9.9"));
    assert_true(matches("172.16.0.0/12", "172.31.255.255"));
    assert_false(matches("172.16.0.0/12", "172.32.0.0"));
    assert_true(matches("0.0.0.0/0", "8.8.8.8"));
    assert_false(matches("0.0.0.0/0", "2001:db8::1"));
    assert_true(matches("2001:db8::/32", "2001:db8:ffff::1"));
    assert_false(matches("2001:db8::/32", "2001:db9::1"));
    assert_true(matches("::1", "::1"));
    assert_true(matches("::ffff:10.0.0.0/104", "10.3.4.5")); /* mapped spelling = IPv4 */
    assert_true(matches("10.0.0.1", "::ffff:10.0.0.1"));
    assert_true(matches("fe80::/10", "febf::1"));
    assert_false(matches("fe80::/10", "fec0::1"));
    assert_true(matches("2001:db8::1/127", "2001:db8::0"));
}

static void test_key(void **state)
{
    struct proto_ip ip;
    char k[PROTO_IP_KEY_MAX];
    assert_int_equal(proto_ip_parse("192.0.2.7", 9, &ip), 0);
    proto_ip_key(&ip, k, sizeof(k));
    assert_string_equal(k, "192.0.2.7");
    assert_int_equal(proto_ip_parse("2001:db8:1:2:3:4:5:6", 20, &ip), 0);
    proto_ip_key(&ip, k, sizeof(k));
    assert_string_equal(k, "2001:db8:1:2::/64");
    assert_int_equal(proto_ip_parse("::ffff:1.2.3.4", 14, &ip), 0);
    proto_ip_key(&ip, k, sizeof(k));
    assert_string_equal(k, "1.2.3.4");
    assert_int_equal(proto_ip_parse("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 39, &ip), 0);
    proto_ip_key(&ip, k, sizeof(k));
    assert_string_equal(k, "ffff:ffff:ffff:ffff::/64");
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:127.0.0.2", &s6.sin6_addr);
    assert_int_equal(proto_ip_from_sockaddr((struct sockaddr *)&s6, &ip), 0);
    assert_int_equal(ip.family, AF_INET);
    proto_ip_format(&ip, k, sizeof(k));
    assert_string_equal(k, "127.0.0.2");
    struct sockaddr sx = {.sa_family = AF_UNIX};
    assert_int_equal(proto_ip_from_sockaddr(&sx, &ip), -1);
}

/* The client of (xff, fwd) with trusted "127.0.0.1, 10.0.0.0/8, ::1": want an address text,
 * "" for PROTO_FWD_NONE, "BAD" for PROTO_FWD_BAD. */
static void expect(const char *xff, const char *fwd, const char *want)
{
    struct proto_ip ip;
    char got[64];
    set_trusted("127.0.0.1, 10.0.0.0/8, ::1");
    enum proto_fwd_result r = proto_forwarded_client(xff, xff ? strlen(xff) : 0, fwd,
                                                     fwd ? strlen(fwd) : 0, &trusted, &ip);
    if (r == PROTO_FWD_BAD)
        snprintf(got, sizeof(got), "BAD");
    else if (r == PROTO_FWD_NONE)
        got[0] = '\0';
    else
        proto_ip_format(&ip, got, sizeof(got));
    if (strcmp(got, want) != 0)
        fail_msg("xff=%s fwd=%s: got '%s', want '%s'", xff ? xff : "-", fwd ? fwd : "-", got,
                 want);
}

static void test_xff(void **state)
{
    expect(NULL, NULL, "");
    expect("", "", "");
    expect(" , ", NULL, "");
    expect("203.0.113.9", NULL, "203.0.113.9");
    expect(" 203.0.113.9 ", NULL, "203.0.113.9");
    /* nginx's $proxy_add_x_forwarded_for: the client's own value, then the real peer */
    expect("6.6.6.6, 203.0.113.9", NULL, "203.0.113.9");
    expect("6.6.6.6,203.0.113.9,10.1.1.1", NULL, "203.0.113.9"); /* a second proxy */
    expect("garbage, 203.0.113.9", NULL, "203.0.113.9"); /* the client's part is not read */
    expect("203.0.113.9, 10.0.0.2, 127.0.0.1", NULL, "203.0.113.9");
    expect("10.0.0.3, 127.0.0.1", NULL, "10.0.0.3"); /* all trusted: the leftmost */
    expect("127.0.0.1", NULL, "127.0.0.1");
    expect("2001:db8::5", NULL, "2001:db8::5");
    expect("[2001:db8::5]:4711, ::1", NULL, "2001:db8::5");
    expect("203.0.113.9:1234", NULL, "203.0.113.9");
    expect("::ffff:203.0.113.9", NULL, "203.0.113.9");
    expect("203.0.113.9, garbage", NULL, "BAD");
    expect("unknown", NULL, "BAD");
    expect("203.0.113.9:", NULL, "BAD");
    expect("203.0.113.9:x", NULL, "BAD");
    expect("[2001:db8::5", NULL, "BAD");
    expect("[2001:db8::5]x", NULL, "BAD");
    expect("[1.2.3.4]", NULL, "BAD");
    expect("2001:db8::5%eth0", NULL, "BAD");
    expect("1.2.3.4, , 5.6.7.8", NULL, "5.6.7.8");
    expect("\"5.6.7.8\"", NULL, "BAD"); /* no quotes in X-Forwarded-For */
    expect("\", 5.6.7.8", NULL, "5.6.7.8"); /* a stray quote on the client's side */
    /* X-Forwarded-For wins over Forwarded when it has an element */
    expect("5.6.7.8", "for=9.9.9.9", "5.6.7.8");
    expect(" ", "for=9.9.9.9", "9.9.9.9");
}

static void test_forwarded(void **state)
{
    expect(NULL, "for=192.0.2.60", "192.0.2.60");
    expect(NULL, "For=\"[2001:db8:cafe::17]:4711\"", "2001:db8:cafe::17");
    expect(NULL, "for=192.0.2.43, for=198.51.100.17", "198.51.100.17");
    expect(NULL, "for=192.0.2.43;proto=https;by=10.0.0.1, for=10.9.9.9", "192.0.2.43");
    expect(NULL, "proto=https; for=\"192.0.2.43:47011\" ;host=x", "192.0.2.43");
    expect(NULL, "for=\"_gazonk\"", "BAD");
    expect(NULL, "for=unknown", "BAD");
    expect(NULL, "for=\"unterminated", "BAD");
    expect(NULL, "for=\"a,b\", for=192.0.2.1", "192.0.2.1"); /* a comma inside quotes */
    expect(NULL, "for=\"[2001:db8::1]\", for=\"[::1]:80\"", "2001:db8::1");
    expect(NULL, "proto=http", "");           /* no for= at all */
    expect(NULL, "for=", "BAD");
    expect(NULL, "for=1.2.3.4\"x\"", "BAD");
    expect(NULL, "junk, for=192.0.2.1", "192.0.2.1");
    expect(NULL, "for=192.0.2.1;junk", "192.0.2.1"); /* pairs after for= are not read */
    expect(NULL, "for=\"\\[::2]\"", "::2"); /* quoted-pair */
}

static void test_long(void **state)
{
    /* a long client-written left part: only the rightmost elements count */
    size_t n = 20000;
    char *s = malloc(n + 64);
    memset(s, ',', n);
    memcpy(s + n, " 203.0.113.9", 13);
    expect(s, NULL, "203.0.113.9");
    for (size_t i = 0; i < n; i += 2)
        memcpy(s + i, "x,", 2);
    expect(s, NULL, "203.0.113.9");
    memset(s, 'x', n); /* one huge element to the left of the last comma-free 8 KiB */
    memcpy(s + n, ",1.2.3.4", 9);
    expect(s, NULL, "1.2.3.4");
    memset(s, 'y', n + 8);
    s[n + 8] = '\0';
    expect(s, NULL, "BAD");
    char *f = malloc(n + 1);
    memset(f, ' ', n);
    memcpy(f, "for=1.2.3.4", 11);
    f[n] = '\0';
    expect(NULL, f, "BAD"); /* Forwarded longer than 8 KiB: not read */
    free(f);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_parse), cmocka_unit_test(test_match),
        cmocka_unit_test(test_key),        cmocka_unit_test(test_xff),
        cmocka_unit_test(test_forwarded),  cmocka_unit_test(test_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
