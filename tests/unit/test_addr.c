/* test_addr.c - unit tests for protocol/addr.c: the SSRF address policy, address literals in
 * every resolver spelling (checked against the C library's inet_aton and getaddrinfo with
 * AI_NUMERICHOST, which never asks DNS), and webhook URL parsing.
 * runs on: the test process, one thread. */
#include "protocol/addr.c"

#include <netdb.h>
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/un.h>

#include <cmocka.h>

/* ---- policy ---------------------------------------------------------------------------- */

/* Reason for an address text parsed by inet_pton (independent of proto_host_literal). */
static int reason_of(const char *text)
{
    struct sockaddr_in in = {.sin_family = AF_INET};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};

    if (inet_pton(AF_INET, text, &in.sin_addr) == 1)
        return proto_addr_forbidden((struct sockaddr *)&in, sizeof(in));
    if (inet_pton(AF_INET6, text, &in6.sin6_addr) == 1)
        return proto_addr_forbidden((struct sockaddr *)&in6, sizeof(in6));
    fail_msg("bad test address %s", text);
    return -1;
}

static void test_forbidden_v4(void **state)
{
    static const struct { const char *addr; int want; } rows[] = {
        {"0.0.0.0", PROTO_ADDR_UNSPECIFIED}, {"0.255.255.255", PROTO_ADDR_UNSPECIFIED},
        {"1.0.0.0", PROTO_ADDR_OK}, {"1.1.1.1", PROTO_ADDR_OK}, {"8.8.8.8", PROTO_ADDR_OK},
        {"9.255.255.255", PROTO_ADDR_OK}, {"10.0.0.0", PROTO_ADDR_PRIVATE},
        {"10.255.255.255", PROTO_ADDR_PRIVATE}, {"11.0.0.0", PROTO_ADDR_OK},
        {"100.63.255.255", PROTO_ADDR_OK}, {"100.64.0.0", PROTO_ADDR_CGNAT},
        {"100.127.255.255", PROTO_ADDR_CGNAT}, {"100.128.0.0", PROTO_ADDR_OK},
        {"126.255.255.255", PROTO_ADDR_OK}, {"127.0.0.0", PROTO_ADDR_LOOPBACK},
        {"127.0.0.1", PROTO_ADDR_LOOPBACK}, {"127.255.255.255", PROTO_ADDR_LOOPBACK},
        {"128.0.0.0", PROTO_ADDR_OK}, {"169.253.255.255", PROTO_ADDR_OK},
        {"169.254.0.0", PROTO_ADDR_LINK_LOCAL}, {"169.254.169.254", PROTO_ADDR_LINK_LOCAL},
        {"169.254.255.255", PROTO_ADDR_LINK_LOCAL}, {"169.255.0.0", PROTO_ADDR_OK},
        {"172.15.255.255", PROTO_ADDR_OK}, {"172.16.0.0", PROTO_ADDR_PRIVATE},
        {"172.31.255.255", PROTO_ADDR_PRIVATE}, {"172.32.0.0", PROTO_ADDR_OK},
        {"191.255.255.255", PROTO_ADDR_OK}, {"192.0.0.0", PROTO_ADDR_RESERVED},
        {"192.0.0.8", PROTO_ADDR_RESERVED}, {"192.0.0.170", PROTO_ADDR_RESERVED},
        {"192.0.0.255", PROTO_ADDR_RESERVED}, {"192.0.1.1", PROTO_ADDR_OK},
        {"192.0.2.0", PROTO_ADDR_DOCUMENTATION}, {"192.0.2.255", PROTO_ADDR_DOCUMENTATION},
        {"192.0.3.0", PROTO_ADDR_OK}, {"192.88.98.255", PROTO_ADDR_OK},
        {"192.88.99.1", PROTO_ADDR_RESERVED}, {"192.88.100.0", PROTO_ADDR_OK},
        {"192.167.255.255", PROTO_ADDR_OK}, {"192.168.0.0", PROTO_ADDR_PRIVATE},
        {"192.168.1.1", PROTO_ADDR_PRIVATE}, {"192.168.255.255", PROTO_ADDR_PRIVATE},
        {"192.169.0.0", PROTO_ADDR_OK}, {"198.17.255.255", PROTO_ADDR_OK},
        {"198.18.0.0", PROTO_ADDR_BENCHMARK}, {"198.19.255.255", PROTO_ADDR_BENCHMARK},
        {"198.20.0.0", PROTO_ADDR_OK}, {"198.51.99.255", PROTO_ADDR_OK},
        {"198.51.100.7", PROTO_ADDR_DOCUMENTATION}, {"198.51.101.0", PROTO_ADDR_OK},
        {"203.0.112.255", PROTO_ADDR_OK}, {"203.0.113.9", PROTO_ADDR_DOCUMENTATION},
        {"203.0.114.0", PROTO_ADDR_OK}, {"223.255.255.255", PROTO_ADDR_OK},
        {"224.0.0.0", PROTO_ADDR_MULTICAST}, {"224.0.0.251", PROTO_ADDR_MULTICAST},
        {"239.255.255.255", PROTO_ADDR_MULTICAST}, {"240.0.0.0", PROTO_ADDR_RESERVED},
        {"255.255.255.254", PROTO_ADDR_RESERVED}, {"255.255.255.255", PROTO_ADDR_BROADCAST},
        {"93.184.216.34", PROTO_ADDR_OK}, {"140.82.112.3", PROTO_ADDR_OK},
    };
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (reason_of(rows[i].addr) != rows[i].want)
            fail_msg("%s: got %s want %s", rows[i].addr, proto_addr_reason(reason_of(rows[i].addr)),
                     proto_addr_reason(rows[i].want));
}

static void test_forbidden_v6(void **state)
{
    static const struct { const char *addr; int want; } rows[] = {
        {"::", PROTO_ADDR_UNSPECIFIED}, {"::1", PROTO_ADDR_LOOPBACK},
        {"::2", PROTO_ADDR_UNSPECIFIED},                    /* compat, embeds 0.0.0.2 */
        {"::ffff:127.0.0.1", PROTO_ADDR_LOOPBACK}, {"::ffff:7f00:1", PROTO_ADDR_LOOPBACK},
        {"::ffff:10.1.2.3", PROTO_ADDR_PRIVATE}, {"::ffff:169.254.169.254", PROTO_ADDR_LINK_LOCAL},
        {"::ffff:0.0.0.0", PROTO_ADDR_UNSPECIFIED}, {"::ffff:100.64.1.1", PROTO_ADDR_CGNAT},
        {"::ffff:255.255.255.255", PROTO_ADDR_BROADCAST}, {"::ffff:8.8.8.8", PROTO_ADDR_OK},
        {"::127.0.0.1", PROTO_ADDR_LOOPBACK}, {"::8.8.8.8", PROTO_ADDR_RESERVED},
        {"::ffff:0:7f00:1", PROTO_ADDR_RESERVED},           /* SIIT translated, ::/8 */
        {"64:ff9b::127.0.0.1", PROTO_ADDR_LOOPBACK}, {"64:ff9b::10.0.0.1", PROTO_ADDR_PRIVATE},
        {"64:ff9b::8.8.8.8", PROTO_ADDR_OK}, {"64:ff9b:1::1", PROTO_ADDR_RESERVED},
        {"64:ff9b:1:ffff::8.8.8.8", PROTO_ADDR_RESERVED},
        {"2002:7f00:1::", PROTO_ADDR_LOOPBACK}, {"2002:a00:1::1", PROTO_ADDR_PRIVATE},
        {"2002:a9fe:a9fe::1", PROTO_ADDR_LINK_LOCAL}, {"2002:c0a8:101::1", PROTO_ADDR_PRIVATE},
        {"2002::1", PROTO_ADDR_UNSPECIFIED}, {"2002:808:808::1", PROTO_ADDR_OK},
        {"fe80::1", PROTO_ADDR_LINK_LOCAL}, {"febf:ffff::1", PROTO_ADDR_LINK_LOCAL},
        {"fec0::1", PROTO_ADDR_PRIVATE}, {"feff::1", PROTO_ADDR_PRIVATE},
        {"fc00::1", PROTO_ADDR_PRIVATE}, {"fd12:3456:789a::1", PROTO_ADDR_PRIVATE},
        {"fbff::1", PROTO_ADDR_RESERVED}, {"ff02::1", PROTO_ADDR_MULTICAST},
        {"ff05::1:3", PROTO_ADDR_MULTICAST}, {"ff0e::1", PROTO_ADDR_MULTICAST},
        {"2001:db8::1", PROTO_ADDR_DOCUMENTATION}, {"2001:db8:ffff::1", PROTO_ADDR_DOCUMENTATION},
        {"3fff::1", PROTO_ADDR_DOCUMENTATION}, {"3fff:fff::1", PROTO_ADDR_DOCUMENTATION},
        {"3fff:1000::1", PROTO_ADDR_OK}, {"2001:2::1", PROTO_ADDR_BENCHMARK},
        {"2001:2:0:ffff::1", PROTO_ADDR_BENCHMARK}, {"2001:2:1::1", PROTO_ADDR_RESERVED},
        {"2001::1", PROTO_ADDR_RESERVED}, {"2001:0:4136:e378::1", PROTO_ADDR_RESERVED},
        {"2001:1::1", PROTO_ADDR_RESERVED}, {"2001:10::1", PROTO_ADDR_RESERVED},
        {"2001:1ff::1", PROTO_ADDR_RESERVED}, {"2001:200::1", PROTO_ADDR_OK},
        {"2001:4860:4860::8888", PROTO_ADDR_OK}, {"2606:4700:4700::1111", PROTO_ADDR_OK},
        {"2a00:1450:4001:800::200e", PROTO_ADDR_OK}, {"2000::1", PROTO_ADDR_OK},
        {"3ffe::1", PROTO_ADDR_OK}, {"1fff::1", PROTO_ADDR_RESERVED},
        {"100::1", PROTO_ADDR_RESERVED}, {"4000::1", PROTO_ADDR_RESERVED},
        {"5f00::1", PROTO_ADDR_RESERVED}, {"e000::1", PROTO_ADDR_RESERVED},
    };
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (reason_of(rows[i].addr) != rows[i].want)
            fail_msg("%s: got %s want %s", rows[i].addr, proto_addr_reason(reason_of(rows[i].addr)),
                     proto_addr_reason(rows[i].want));
}

static void test_forbidden_family(void **state)
{
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x08080808)};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    struct sockaddr_storage ss;
    int i;

    assert_int_equal(proto_addr_forbidden(NULL, 16), PROTO_ADDR_FAMILY);
    assert_int_equal(proto_addr_forbidden((struct sockaddr *)&un, sizeof(un)), PROTO_ADDR_FAMILY);
    assert_int_equal(proto_addr_forbidden((struct sockaddr *)&in, sizeof(in)), PROTO_ADDR_OK);
    assert_int_equal(proto_addr_forbidden((struct sockaddr *)&in, sizeof(in) - 1),
                     PROTO_ADDR_FAMILY);
    inet_pton(AF_INET6, "2001:4860:4860::8888", &in6.sin6_addr);
    assert_int_equal(proto_addr_forbidden((struct sockaddr *)&in6, sizeof(in6)), PROTO_ADDR_OK);
    assert_int_equal(proto_addr_forbidden((struct sockaddr *)&in6, sizeof(in6) - 1),
                     PROTO_ADDR_FAMILY);
    memset(&ss, 0, sizeof(ss));
    memcpy(&ss, &in, sizeof(in));
    assert_int_equal(proto_addr_forbidden((struct sockaddr *)&ss, sizeof(ss)), PROTO_ADDR_OK);
    for (i = -1; i <= PROTO_ADDR_FAMILY + 1; i++)
        assert_non_null(proto_addr_reason(i));
    assert_string_equal(proto_addr_reason(PROTO_ADDR_OK), "allowed");
    assert_string_equal(proto_addr_reason(PROTO_ADDR_LOOPBACK), "loopback");
    assert_string_equal(proto_addr_reason(PROTO_ADDR_LINK_LOCAL), "link_local");
    assert_string_equal(proto_addr_reason(PROTO_ADDR_FAMILY), "family");
    assert_string_equal(proto_addr_reason(99), "unknown");
}

/* ---- literals -------------------------------------------------------------------------- */

/* Canonical text of a literal, "" when not a literal. */
static void literal_text(const char *host, char *out, size_t outsz)
{
    struct sockaddr_storage ss;

    out[0] = '\0';
    if (!proto_host_literal(host, &ss))
        return;
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)outsz);
    else
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, (socklen_t)outsz);
}

/* What glibc's getaddrinfo makes of host without DNS; "" when it is not numeric. */
static void gai_text(const char *host, char *out, size_t outsz)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST, .ai_family = AF_UNSPEC}, *res;

    out[0] = '\0';
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return;
    if (res->ai_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out,
                  (socklen_t)outsz);
    else if (res->ai_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr, out,
                  (socklen_t)outsz);
    freeaddrinfo(res);
}

static void test_host_literal_table(void **state)
{
    static const struct { const char *host, *want; } rows[] = {
        /* The spellings DESIGN.md pins. */
        {"127.1", "127.0.0.1"}, {"2130706433", "127.0.0.1"}, {"0x7f000001", "127.0.0.1"},
        {"0177.0.0.1", "127.0.0.1"}, {"0.0.0.0", "0.0.0.0"}, {"[::1]", "::1"},
        {"[::ffff:127.0.0.1]", "::ffff:127.0.0.1"},
        /* More inet_aton forms. */
        {"0X7F000001", "127.0.0.1"}, {"0x7F.1", "127.0.0.1"}, {"0x7f.0x0.0x0.0x1", "127.0.0.1"},
        {"00000177.0.0.1", "127.0.0.1"}, {"0", "0.0.0.0"}, {"00", "0.0.0.0"},
        {"127.0.1", "127.0.0.1"}, {"127.65535", "127.0.255.255"}, {"1.16777215", "1.255.255.255"},
        {"1.2.65535", "1.2.255.255"}, {"4294967295", "255.255.255.255"},
        {"0xffffffff", "255.255.255.255"}, {"037777777777", "255.255.255.255"},
        {"0x0000000000000000007f.1", "127.0.0.1"}, {"169.254.43518", "169.254.169.254"},
        {"0251.0376.0251.0376", "169.254.169.254"}, {"1.2.3.4", "1.2.3.4"},
        {"010.010.010.010", "8.8.8.8"}, {"0x8.0x8.0x8.0x8", "8.8.8.8"},
        /* Not IPv4 literals. */
        {"4294967296", ""}, {"0x100000000", ""}, {"040000000000", ""}, {"256.0.0.1", ""},
        {"1.16777216", ""}, {"1.2.65536", ""}, {"1.2.3.256", ""}, {"1.2.3.4.5", ""},
        {"1.2.3.4.", ""}, {".1.2.3", ""}, {"1..2", ""}, {"08", ""}, {"09.1.1.1", ""},
        {"0x", ""}, {"0x.1", ""}, {"0xg", ""}, {"0x7g", ""}, {"1e3", ""}, {"+1", ""},
        {"-1", ""}, {" 1.2.3.4", ""}, {"1.2.3.4 ", ""}, {"1.2.3.4\t", ""}, {"", ""},
        {"localhost", ""}, {"example.com", ""}, {"127.0.0.1.nip.io", ""}, {"a.1", ""},
        {"99999999999999999999999", ""}, {"0x00000000000000000000100000000", ""},
        /* IPv6. */
        {"::1", "::1"}, {"::", "::"}, {"[::]", "::"}, {"::ffff:127.0.0.1", "::ffff:127.0.0.1"},
        {"::ffff:7f00:1", "::ffff:127.0.0.1"}, {"1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"},
        {"FE80::1", "fe80::1"}, {"fe80::1%eth0", "fe80::1"}, {"[fe80::1%25eth0]", "fe80::1"},
        {"fe80::1%", ""}, {"[::1", ""}, {"::1]", ""}, {"[]", ""}, {"[", ""},
        {"[127.0.0.1]", ""}, {"[[::1]]", ""}, {"::ffff:0177.0.0.1", ""},
        {"::ffff:127.1", ""}, {"1:2:3:4:5:6:7:8:9", ""}, {":::1", ""}, {"::1::", ""},
        {"[::1]:80", ""}, {"::g", ""},
    };
    char got[64], libc[64];
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        literal_text(rows[i].host, got, sizeof(got));
        if (strcmp(got, rows[i].want) != 0)
            fail_msg("\"%s\": got \"%s\" want \"%s\"", rows[i].host, got, rows[i].want);
        /* getaddrinfo agrees wherever it can answer without an interface or DNS. */
        if (rows[i].host[0] != '[' && strchr(rows[i].host, '%') == NULL) {
            gai_text(rows[i].host, libc, sizeof(libc));
            if (strcmp(got, libc) != 0)
                fail_msg("\"%s\": ours \"%s\", getaddrinfo \"%s\"", rows[i].host, got, libc);
        }
    }
    assert_int_equal(proto_host_literal(NULL, NULL), 0);
    assert_int_equal(proto_host_literal("127.1", NULL), 1);
}

/* Differential: random strings over the characters that matter, ours vs inet_aton (which,
 * on a string without whitespace, accepts exactly what getaddrinfo takes as IPv4). */
static void test_host_literal_vs_inet_aton(void **state)
{
    static const char alpha[] = "0123456789.xX7fFaAg0.1.";
    uint64_t x = 0x2545f4914f6cdd1dull;
    char s[24];
    long i, agree = 0, literals = 0;

    for (i = 0; i < 300000; i++) {
        struct in_addr ref;
        struct sockaddr_storage ss;
        int n, k, want, got;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        n = 1 + (int)(x % 20);
        for (k = 0; k < n; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            s[k] = alpha[x % (sizeof(alpha) - 1)];
        }
        s[n] = '\0';
        want = inet_aton(s, &ref) != 0;
        got = proto_host_literal(s, &ss) && ss.ss_family == AF_INET;
        if (want != got)
            fail_msg("\"%s\": inet_aton %d, ours %d", s, want, got);
        if (want && ((struct sockaddr_in *)&ss)->sin_addr.s_addr != ref.s_addr)
            fail_msg("\"%s\": different address", s);
        agree++;
        literals += want;
    }
    print_message("inet_aton differential: %ld strings, %ld literals\n", agree, literals);
    assert_true(literals > 1000);
}

/* ---- URLs ------------------------------------------------------------------------------ */

static void test_url_ok(void **state)
{
    static const struct {
        const char *url, *host, *target, *canon;
        int https, family, port;
    } rows[] = {
        {"https://example.com", "example.com", "/", "https://example.com/", 1, 0, 443},
        {"https://example.com/", "example.com", "/", "https://example.com/", 1, 0, 443},
        {"HTTPS://Example.COM/Hook", "example.com", "/Hook", "https://example.com/Hook", 1, 0,
         443},
        {"http://example.com:8080/hook?x=1&y=%20", "example.com", "/hook?x=1&y=%20",
         "http://example.com:8080/hook?x=1&y=%20", 0, 0, 8080},
        {"https://example.com?x", "example.com", "/?x", "https://example.com/?x", 1, 0, 443},
        {"http://example.com:080", "example.com", "/", "http://example.com:80/", 0, 0, 80},
        {"https://a.b.c.example.com./x", "a.b.c.example.com.", "/x",
         "https://a.b.c.example.com./x", 1, 0, 443},
        {"https://xn--bcher-kva.example/", "xn--bcher-kva.example", "/",
         "https://xn--bcher-kva.example/", 1, 0, 443},
        {"http://my_host-1.internal:1/", "my_host-1.internal", "/", "http://my_host-1.internal:1/",
         0, 0, 1},
        {"http://h:65535/a/b/../c;p=1/@x:y!$&'()*+,=~", "h", "/a/b/../c;p=1/@x:y!$&'()*+,=~",
         "http://h:65535/a/b/../c;p=1/@x:y!$&'()*+,=~", 0, 0, 65535},
        {"http://1.2.3.4.example/", "1.2.3.4.example", "/", "http://1.2.3.4.example/", 0, 0, 80},
        {"http://127.1/", "127.0.0.1", "/", "http://127.0.0.1/", 0, AF_INET, 80},
        {"http://2130706433/", "127.0.0.1", "/", "http://127.0.0.1/", 0, AF_INET, 80},
        {"http://0x7f000001:9000/x", "127.0.0.1", "/x", "http://127.0.0.1:9000/x", 0, AF_INET,
         9000},
        {"http://0177.0.0.1/", "127.0.0.1", "/", "http://127.0.0.1/", 0, AF_INET, 80},
        {"http://0.0.0.0/", "0.0.0.0", "/", "http://0.0.0.0/", 0, AF_INET, 80},
        {"https://8.8.8.8/", "8.8.8.8", "/", "https://8.8.8.8/", 1, AF_INET, 443},
        {"http://[::1]/", "::1", "/", "http://[::1]/", 0, AF_INET6, 80},
        {"http://[::1]:8080/x", "::1", "/x", "http://[::1]:8080/x", 0, AF_INET6, 8080},
        {"http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1", "/", "http://[::ffff:127.0.0.1]/", 0,
         AF_INET6, 80},
        {"https://[2001:4860:4860:0:0:0:0:8888]/", "2001:4860:4860::8888", "/",
         "https://[2001:4860:4860::8888]/", 1, AF_INET6, 443},
    };
    char canon[PROTO_URL_MAX + 33];
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct proto_url u, u2;
        struct proto_err err = {0};
        int rc = proto_url_parse(rows[i].url, &u, &err);
        if (rc != 0)
            fail_msg("%s: %d %s %s", rows[i].url, rc, err.field, err.msg);
        assert_string_equal(u.host, rows[i].host);
        assert_string_equal(u.target, rows[i].target);
        assert_int_equal(u.https, rows[i].https);
        assert_int_equal(u.family, rows[i].family);
        assert_int_equal(u.port, rows[i].port);
        if (u.family == AF_INET)
            assert_int_equal(ntohs(((struct sockaddr_in *)&u.addr)->sin_port), rows[i].port);
        if (u.family == AF_INET6)
            assert_int_equal(ntohs(((struct sockaddr_in6 *)&u.addr)->sin6_port), rows[i].port);
        assert_int_equal(proto_url_format(&u, canon, sizeof(canon)), 0);
        assert_string_equal(canon, rows[i].canon);
        assert_int_equal(proto_url_parse(canon, &u2, NULL), 0);     /* canonical is a fixpoint */
        assert_string_equal(u2.host, u.host);
        assert_string_equal(u2.target, u.target);
        assert_int_equal(u2.port, u.port);
        assert_int_equal(u2.family, u.family);
    }
}

static void test_url_rejected(void **state)
{
    static const struct { const char *url; int want; const char *field; } rows[] = {
        {"", PROTO_EVALUE, "url"},
        {"ftp://example.com/", PROTO_EVALUE, "url.scheme"},
        {"file:///etc/passwd", PROTO_EVALUE, "url.scheme"},
        {"gopher://127.0.0.1:6379/_INFO", PROTO_EVALUE, "url.scheme"},
        {"javascript:alert(1)", PROTO_EVALUE, "url.scheme"},
        {"http:/example.com/", PROTO_EVALUE, "url.scheme"},
        {"https:example.com", PROTO_EVALUE, "url.scheme"},
        {"//example.com/", PROTO_EVALUE, "url.scheme"},
        {"httpx://example.com/", PROTO_EVALUE, "url.scheme"},
        {"http://user@example.com/", PROTO_EVALUE, "url.host"},
        {"http://user:pass@example.com/", PROTO_EVALUE, "url.host"},
        {"http://example.com@127.0.0.1/", PROTO_EVALUE, "url.host"},
        {"http://@example.com/", PROTO_EVALUE, "url.host"},
        {"http://evil.com\\@127.0.0.1/", PROTO_EVALUE, "url"},
        {"http://example.com\\x", PROTO_EVALUE, "url"},
        {"http://exa mple.com/", PROTO_EVALUE, "url"},
        {"http://example.com/\t", PROTO_EVALUE, "url"},
        {"http://example.com/\r\nX-Injected: 1", PROTO_EVALUE, "url"},
        {" http://example.com/", PROTO_EVALUE, "url"},
        {"http://ex\xc3\xa4mple.com/", PROTO_EVALUE, "url"},
        {"http://example.com/#frag", PROTO_EVALUE, "url.path"},
        {"http://example.com#", PROTO_EVALUE, "url.path"},
        {"http://example.com:0/", PROTO_EVALUE, "url.port"},
        {"http://example.com:65536/", PROTO_EVALUE, "url.port"},
        {"http://example.com:123456/", PROTO_EVALUE, "url.port"},
        {"http://example.com:/", PROTO_EVALUE, "url.port"},
        {"http://example.com:-1/", PROTO_EVALUE, "url.port"},
        {"http://example.com:80a/", PROTO_EVALUE, "url.port"},
        {"http://example.com:0x50/", PROTO_EVALUE, "url.port"},
        {"http://a:b:c/", PROTO_EVALUE, "url.port"},
        {"http://::1/", PROTO_EVALUE, "url.host"},
        {"http://[::1/", PROTO_EVALUE, "url.host"},
        {"http://[::1]x/", PROTO_EVALUE, "url.host"},
        {"http://[::1]:/", PROTO_EVALUE, "url.port"},
        {"http://[fe80::1%25eth0]/", PROTO_EVALUE, "url.host"},
        {"http://[127.0.0.1]/", PROTO_EVALUE, "url.host"},
        {"http://[]/", PROTO_EVALUE, "url.host"},
        {"http://[v1.fe]/", PROTO_EVALUE, "url.host"},
        {"http://[::1]]/", PROTO_EVALUE, "url.host"},
        {"http:///path", PROTO_EVALUE, "url.host"},
        {"http://", PROTO_EVALUE, "url.host"},
        {"http://:80/", PROTO_EVALUE, "url.host"},
        {"http://?x", PROTO_EVALUE, "url.host"},
        {"http://1.2.3.4.5/", PROTO_EVALUE, "url.host"},
        {"http://127.0.0.1./", PROTO_EVALUE, "url.host"},
        {"http://256.0.0.1/", PROTO_EVALUE, "url.host"},
        {"http://0x100000000/", PROTO_EVALUE, "url.host"},
        {"http://4294967296/", PROTO_EVALUE, "url.host"},
        {"http://foo.0x10/", PROTO_EVALUE, "url.host"},
        {"http://foo.0x/", PROTO_EVALUE, "url.host"},
        {"http://foo.123/", PROTO_EVALUE, "url.host"},
        {"http://foo.123./", PROTO_EVALUE, "url.host"},
        {"http://08.0.0.1/", PROTO_EVALUE, "url.host"},
        {"http://a..b/", PROTO_EVALUE, "url.host"},
        {"http://.a/", PROTO_EVALUE, "url.host"},
        {"http://a../", PROTO_EVALUE, "url.host"},
        {"http://./", PROTO_EVALUE, "url.host"},
        {"http://ex%61mple.com/", PROTO_EVALUE, "url.host"},
        {"http://%31%32%37.0.0.1/", PROTO_EVALUE, "url.host"},
        {"http://exa!mple.com/", PROTO_EVALUE, "url.host"},
        {"http://a/%zz", PROTO_EVALUE, "url.path"},
        {"http://a/%4", PROTO_EVALUE, "url.path"},
        {"http://a/%", PROTO_EVALUE, "url.path"},
        {"http://a/{x}", PROTO_EVALUE, "url.path"},
        {"http://a/x|y", PROTO_EVALUE, "url.path"},
        {"http://a/[x]", PROTO_EVALUE, "url.path"},
        {"http://a/\"x\"", PROTO_EVALUE, "url.path"},
        {"http://a/<x>", PROTO_EVALUE, "url.path"},
        {"http://a/x^y", PROTO_EVALUE, "url.path"},
        {"http://a/x`y", PROTO_EVALUE, "url.path"},
    };
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct proto_url u;
        struct proto_err err = {0};
        int rc = proto_url_parse(rows[i].url, &u, &err);
        if (rc != rows[i].want || err.code != rc || strcmp(err.field, rows[i].field) != 0)
            fail_msg("\"%s\": got %d (%s: %s), want %d %s", rows[i].url, rc, err.field, err.msg,
                     rows[i].want, rows[i].field);
        assert_true(err.msg[0] != '\0');
    }
    {
        struct proto_url u;
        assert_int_equal(proto_url_parse(NULL, &u, NULL), PROTO_EVALUE);
        assert_int_equal(proto_url_parse("http://a/", NULL, NULL), PROTO_EVALUE);
    }
}

static void test_url_bounds(void **state)
{
    char url[PROTO_URL_MAX + 64], label[80];
    struct proto_url u;
    struct proto_err err;
    size_t n;

    /* Exactly 2048 bytes passes, 2049 is too long. */
    n = (size_t)snprintf(url, sizeof(url), "https://example.com/");
    memset(url + n, 'a', PROTO_URL_MAX - n);
    url[PROTO_URL_MAX] = '\0';
    assert_int_equal(proto_url_parse(url, &u, &err), 0);
    assert_int_equal(strlen(u.target), PROTO_URL_MAX - strlen("https://example.com"));
    url[PROTO_URL_MAX] = 'a';
    url[PROTO_URL_MAX + 1] = '\0';
    assert_int_equal(proto_url_parse(url, &u, &err), PROTO_ETOOLONG);
    assert_string_equal(err.field, "url");
    /* "http://h?" + query: the "/" added to the target still fits. */
    n = (size_t)snprintf(url, sizeof(url), "http://h?");
    memset(url + n, 'q', PROTO_URL_MAX - n);
    url[PROTO_URL_MAX] = '\0';
    assert_int_equal(proto_url_parse(url, &u, &err), 0);
    assert_int_equal(u.target[0], '/');
    assert_int_equal(strlen(u.target), PROTO_URL_MAX - strlen("http://h") + 1);

    /* Labels of 63 pass, 64 fail; names of 253 (+ final dot) pass, 254 fail. */
    memset(label, 'a', 63);
    label[63] = '\0';
    snprintf(url, sizeof(url), "https://%s.example/", label);
    assert_int_equal(proto_url_parse(url, &u, &err), 0);
    snprintf(url, sizeof(url), "https://%sa.example/", label);
    assert_int_equal(proto_url_parse(url, &u, &err), PROTO_EVALUE);
    assert_string_equal(err.field, "url.host");
    snprintf(url, sizeof(url), "https://%s.%s.%s.%.61s/", label, label, label, label);
    assert_int_equal(proto_url_parse(url, &u, &err), 0);
    assert_int_equal(strlen(u.host), 253);
    snprintf(url, sizeof(url), "https://%s.%s.%s.%.61s./", label, label, label, label);
    assert_int_equal(proto_url_parse(url, &u, &err), 0);
    snprintf(url, sizeof(url), "https://%s.%s.%s.%.62s/", label, label, label, label);
    assert_int_equal(proto_url_parse(url, &u, &err), PROTO_ETOOLONG);
    snprintf(url, sizeof(url), "https://%s.%s.%s.%.63s/", label, label, label, label);
    assert_int_equal(proto_url_parse(url, &u, &err), PROTO_ETOOLONG);
    assert_string_equal(err.field, "url.host");
    {   /* proto_url_format reports a short buffer */
        char small[8];
        assert_int_equal(proto_url_parse("https://example.com/", &u, NULL), 0);
        assert_int_equal(proto_url_format(&u, small, sizeof(small)), PROTO_ETOOLONG);
    }
}

/* The SSRF spellings DESIGN.md pins, end to end: URL -> literal -> forbidden. */
static void test_url_ssrf_spellings(void **state)
{
    static const struct { const char *url; int want; } rows[] = {
        {"http://127.1/", PROTO_ADDR_LOOPBACK},
        {"http://2130706433/", PROTO_ADDR_LOOPBACK},
        {"http://0x7f000001/", PROTO_ADDR_LOOPBACK},
        {"http://0177.0.0.1/", PROTO_ADDR_LOOPBACK},
        {"http://0.0.0.0/", PROTO_ADDR_UNSPECIFIED},
        {"http://0/", PROTO_ADDR_UNSPECIFIED},
        {"http://[::1]/", PROTO_ADDR_LOOPBACK},
        {"http://[::ffff:127.0.0.1]/", PROTO_ADDR_LOOPBACK},
        {"http://[::ffff:7f00:1]/", PROTO_ADDR_LOOPBACK},
        {"http://[0:0:0:0:0:ffff:127.0.0.1]/", PROTO_ADDR_LOOPBACK},
        {"http://[64:ff9b::7f00:1]/", PROTO_ADDR_LOOPBACK},
        {"http://[2002:7f00:1::]/", PROTO_ADDR_LOOPBACK},
        {"http://[::]/", PROTO_ADDR_UNSPECIFIED},
        {"http://10.0.0.1/", PROTO_ADDR_PRIVATE},
        {"http://012.1/", PROTO_ADDR_PRIVATE},
        {"http://169.254.169.254/latest/meta-data/", PROTO_ADDR_LINK_LOCAL},
        {"http://0xa9fea9fe/", PROTO_ADDR_LINK_LOCAL},
        {"http://2852039166/", PROTO_ADDR_LINK_LOCAL},
        {"http://[fe80::1]/", PROTO_ADDR_LINK_LOCAL},
        {"http://[fd00::1]/", PROTO_ADDR_PRIVATE},
        {"http://[ff02::1]/", PROTO_ADDR_MULTICAST},
        {"http://100.64.0.1/", PROTO_ADDR_CGNAT},
        {"http://255.255.255.255/", PROTO_ADDR_BROADCAST},
        {"http://8.8.8.8/", PROTO_ADDR_OK},
        {"http://134744072/", PROTO_ADDR_OK},
        {"http://[2606:4700:4700::1111]/", PROTO_ADDR_OK},
    };
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct proto_url u;
        int r;
        assert_int_equal(proto_url_parse(rows[i].url, &u, NULL), 0);
        assert_int_not_equal(u.family, 0);
        r = proto_addr_forbidden((struct sockaddr *)&u.addr, sizeof(u.addr));
        if (r != rows[i].want)
            fail_msg("%s: got %s want %s", rows[i].url, proto_addr_reason(r),
                     proto_addr_reason(rows[i].want));
    }
}

/* The one loopback rule for listen addresses (admin token, dashboard broad subscriptions). */
static void test_listen_loopback(void **state)
{
    (void)state;
    static const struct {
        const char *listen;
        int loopback;
    } rows[] = {
        {"127.0.0.1:8080", 1},          {"127.1.2.3:1", 1},
        {"localhost:8080", 1},          {"[::1]:8080", 1},
        {"[0:0:0:0:0:0:0:1]:8080", 1},  {"[::ffff:127.0.0.1]:80", 1},
        {"127.1:8080", 1},              {"2130706433:80", 1},
        {"0.0.0.0:8080", 0},            {"[::]:8080", 0},
        {"10.0.0.1:8080", 0},           {"127.0.0.1.example.com:8080", 0},
        {"localhost.example.com:80", 0}, {"example.com:80", 0},
        {"127.0.0.1", 0},               {":8080", 0},
        {"::1:8080", 0},                {"[::1]8080", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (proto_listen_is_loopback(rows[i].listen) != rows[i].loopback)
            fail_msg("%s: expected %d", rows[i].listen, rows[i].loopback);
    assert_int_equal(proto_listen_is_loopback(NULL), 0);
}

/* Host headers: loopback in any spelling (with or without a port), listed names (any case,
 * any port), nothing else - rebinding names, look-alikes and garbage included. */
static void test_host_names_relay(void **state)
{
    (void)state;
#define ALLOWED "relay.example.com, Dash.Example.org,,"
    static const struct {
        const char *host, *allowed;
        int ok;
    } rows[] = {
        {"127.0.0.1:8080", NULL, 1},         {"127.0.0.1", NULL, 1},
        {"localhost", NULL, 1},              {"localhost:9", NULL, 1},
        {"[::1]:8080", NULL, 1},             {"[::1]", NULL, 1},
        {"127.1", NULL, 1},                  {"0x7f000001:80", NULL, 1},
        {"2130706433", NULL, 1},             {"[::ffff:127.0.0.1]:1", NULL, 1},
        {"rebind.attacker.example:8080", NULL, 0},
        {"127.0.0.1.example.com", NULL, 0},  {"localhost.", NULL, 1},
        {"a.localhost", NULL, 0},            {"10.0.0.1:80", NULL, 0},
        {"", NULL, 0},                       {":80", NULL, 0},
        {"relay.example.com", ALLOWED, 1},   {"relay.example.com:443", ALLOWED, 1},
        {"RELAY.example.COM", ALLOWED, 1},   {"dash.example.org:8081", ALLOWED, 1},
        {"relay.example.co", ALLOWED, 0},    {"relay.example.com.evil", ALLOWED, 0},
        {"example.com", ALLOWED, 0},         {"relay.example.com", "", 0},
        {"127.0.0.1:1", ALLOWED, 1},
        /* issue 22: only uri-host[:port] */
        {"127.0.0.1:27413@evil", NULL, 0},   {"127.0.0.1:27413@evil", ALLOWED, 0},
        {"relay.example.com:443@evil", ALLOWED, 0}, {"user@127.0.0.1", NULL, 0},
        {"localhost:http", NULL, 0},         {"127.0.0.1:80x", NULL, 0},
        {"127.0.0.1:", NULL, 0},             {"127.0.0.1:65536", NULL, 0},
        {"127.0.0.1:65535", NULL, 1},        {"127.0.0.1:123456", NULL, 0},
        {"relay.example.com:x", ALLOWED, 0}, {"relay.example.com:", ALLOWED, 0},
        {"127.0.0.1:8080,evil.example", NULL, 0}, {"127.0.0.1, 127.0.0.1", NULL, 0},
        {"relay.example.com,evil", ALLOWED, 0},   {"127.0.0.1 ", NULL, 0},
        {" localhost", NULL, 0},             {"local host", NULL, 0},
        {"[::1]:80x", NULL, 0},              {"[::1]x", NULL, 0},
        {"[::1]:", NULL, 0},                 {"[]:80", NULL, 0},
        {"[::1", NULL, 0},                   {"127.0.0.1:8080:80", NULL, 0},
        {"127.0.0.1\t", NULL, 0},            {"127.0.0.1/x", NULL, 0},
        {"relay.example.com.", ALLOWED, 0},  {"dash-1_x~.example.org", "dash-1_x~.example.org", 1},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (proto_host_names_relay(rows[i].host, rows[i].allowed) != rows[i].ok)
            fail_msg("%s (allowed %s): expected %d", rows[i].host,
                     rows[i].allowed ? rows[i].allowed : "-", rows[i].ok);
    assert_int_equal(proto_host_names_relay(NULL, ALLOWED), 0);
#undef ALLOWED
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forbidden_v4),
        cmocka_unit_test(test_forbidden_v6),
        cmocka_unit_test(test_forbidden_family),
        cmocka_unit_test(test_host_literal_table),
        cmocka_unit_test(test_host_literal_vs_inet_aton),
        cmocka_unit_test(test_url_ok),
        cmocka_unit_test(test_url_rejected),
        cmocka_unit_test(test_url_bounds),
        cmocka_unit_test(test_url_ssrf_spellings),
        cmocka_unit_test(test_listen_loopback),
        cmocka_unit_test(test_host_names_relay),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
