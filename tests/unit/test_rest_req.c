/* test_rest_req.c - unit tests for protocol/rest_req.c: the request head reader of the REST
 * gate, the chunked decoder (whole and byte by byte), the path split and route match, and the
 * limit / after query values (after=2^64-1 does not wrap, one more is refused).
 * runs on: the test process, one thread. */
#include "protocol/rest_req.c"
#include "protocol/addr.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

static void test_head_end(void **state)
{
    static const struct {
        const char *in;
        long want;
    } rows[] = {
        {"GET / HTTP/1.1\r\n\r\n", 18},
        {"GET / HTTP/1.1\n\n", 16},
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY", 27},
        {"GET / HTTP/1.1\r\nHost: a\r\n", 0},
        {"GET / HTTP/1.1\r\nHost: a\r\n\r", 0},
        {"\r\nGET / HTTP/1.1\r\n\r\n", PROTO_EVALUE},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        assert_int_equal(proto_rest_head_end(rows[i].in, strlen(rows[i].in), 16384), rows[i].want);
    char big[64];
    memset(big, 'a', sizeof(big));
    assert_int_equal(proto_rest_head_end(big, sizeof(big), 32), PROTO_ETOOLONG);
    assert_int_equal(proto_rest_head_end(big, 20, 32), 0);
}

static void test_head_parse(void **state)
{
    static struct proto_rest_head h;
    static const struct {
        const char *in;
        int want;
        int64_t cl;
        int chunked;
    } rows[] = {
        {"POST /v1/webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n", 0, 12, 0},
        {"POST /v1/webhooks HTTP/1.1\r\ncontent-length:   9437184  \r\n\r\n", 0, 9437184, 0},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", 0, -1, 1},
        {"GET /healthz HTTP/1.0\n\n", 0, -1, 0},
        {"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", PROTO_EVALUE, 0, 0},
        {"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", PROTO_EVALUE, 0, 0},
        {"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", PROTO_EVALUE, 0, 0},
        {"GET / HTTP/1.1\r\nContent-Length: 99999999999999999\r\n\r\n", PROTO_EVALUE, 0, 0},
        {"GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", PROTO_EVALUE, 0, 0},
        {"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", PROTO_EVALUE,
         0, 0},
        {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", PROTO_EVALUE, 0, 0},
        {"GET / HTTP/1.1\r\nNo colon\r\n\r\n", PROTO_EVALUE, 0, 0},
        {"GET / HTTP/2.0\r\n\r\n", PROTO_EVALUE, 0, 0},
        {"GET  / HTTP/1.1\r\n\r\n", PROTO_EVALUE, 0, 0},
        {"G(T / HTTP/1.1\r\n\r\n", PROTO_EVALUE, 0, 0},
        {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", PROTO_EVALUE, 0, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int rc = proto_rest_head_parse(rows[i].in, strlen(rows[i].in), &h);
        if (rc != rows[i].want)
            fail_msg("row %zu: rc %d want %d", i, rc, rows[i].want);
        if (rc == 0) {
            assert_int_equal(h.content_length, rows[i].cl);
            assert_int_equal(h.chunked, rows[i].chunked);
        }
    }
    const char *in = "PATCH /v1/webhooks/a%2Fb?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
                     "Authorization: Bearer abc \r\nExpect: 100-continue\r\n\r\n";
    assert_int_equal(proto_rest_head_parse(in, strlen(in), &h), 0);
    assert_int_equal(h.method_len, 5);
    assert_memory_equal(h.target, "/v1/webhooks/a%2Fb?x=1", h.target_len);
    assert_int_equal(h.minor, 1);
    assert_int_equal(h.expect_continue, 1);
    const struct proto_rest_hdr *a = proto_rest_head_find(&h, "authorization");
    assert_non_null(a);
    assert_int_equal(a->value_len, 10); /* trailing space trimmed */
    assert_memory_equal(in + a->off, "Authorization:", 14);
    assert_null(proto_rest_head_find(&h, "Origin"));

    /* more header lines than kept: all checked, the first PROTO_REST_HDR_MAX kept */
    char many[8192] = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < 150; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "X-H%d: %d\r\n", i, i);
    strcat(many, "Content-Length: 5\r\n\r\n");
    assert_int_equal(proto_rest_head_parse(many, strlen(many), &h), 0);
    assert_int_equal(h.nhdr, PROTO_REST_HDR_MAX);
    assert_int_equal(h.more, 1);
    assert_int_equal(h.content_length, 5); /* seen although not kept */
}

/* Decode in, fed in pieces of step bytes; returns the step's final code and the body. */
static int decode(const char *in, size_t len, size_t stepsz, char *out, size_t *outlen,
                  size_t *consumed)
{
    struct proto_rest_chunked c = {0};
    size_t off = 0, o = 0, avail = 0;
    int rc = 0;
    while (off < len) {
        avail = len - off < stepsz ? len - off : stepsz;
        size_t used = 0, dlen = 0;
        const char *d;
        /* feed the same window until the decoder took all of it */
        size_t w = 0;
        do {
            rc = proto_rest_chunked_step(&c, in + off + w, avail - w, &used, &d, &dlen);
            memcpy(out + o, d != NULL ? d : "", dlen);
            o += dlen;
            w += used;
        } while (rc == 0 && w < avail);
        off += w;
        if (rc != 0)
            break;
    }
    *outlen = o;
    *consumed = off;
    return rc;
}

static void test_chunked(void **state)
{
    static const struct {
        const char *in;
        int want;
        const char *body;
    } rows[] = {
        {"5\r\nhello\r\n0\r\n\r\n", 1, "hello"},
        {"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n", 1, "hello world"},
        {"A\nabcdefghij\n0\n\n", 1, "abcdefghij"},
        {"0\r\n\r\n", 1, ""},
        {"5\r\nhel", 0, "hel"},
        {"x\r\n", PROTO_EVALUE, ""},
        {"\r\n", PROTO_EVALUE, ""},
        {"5\r\nhelloX\r\n", PROTO_EVALUE, "hello"},
        {"FFFFFFFFFFFFFFFFFF\r\n", PROTO_ETOOLONG, ""},
    };
    char out[128];
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        for (size_t stepsz = 1; stepsz <= 64; stepsz += 63) {
            size_t olen = 0, used = 0;
            int rc = decode(rows[i].in, strlen(rows[i].in), stepsz, out, &olen, &used);
            if (rc != rows[i].want)
                fail_msg("row %zu step %zu: rc %d want %d", i, stepsz, rc, rows[i].want);
            assert_int_equal(olen, strlen(rows[i].body));
            assert_memory_equal(out, rows[i].body, olen);
            if (rc == 1)
                assert_int_equal(used, strlen(rows[i].in));
        }
    /* bytes after the body belong to the next request */
    const char *two = "1\r\na\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n";
    size_t olen, used;
    assert_int_equal(decode(two, strlen(two), 64, out, &olen, &used), 1);
    assert_int_equal(used, 11);
}

static void test_path_route(void **state)
{
    struct proto_rest_seg segs[PROTO_REST_SEGS_MAX];
    char buf[256];
    const char *p = "/v1/webhooks/a%2Fb%00c%zz%4/test/";
    int n = proto_rest_path_split(p, strlen(p), buf, sizeof(buf), segs, PROTO_REST_SEGS_MAX);
    assert_int_equal(n, 4);
    assert_int_equal(segs[2].len, 10);
    assert_memory_equal(segs[2].s, "a/b\0c%zz%4", 10);
    int params[2] = {-1, -1};
    assert_int_equal(proto_rest_route_match("/v1/webhooks/{}/test", segs, n, params, 2), 1);
    assert_int_equal(params[0], 2);
    assert_int_equal(proto_rest_route_match("/v1/webhooks/{}", segs, n, NULL, 2), 0);
    assert_int_equal(proto_rest_route_match("/v1/webhooks/{}/test/{}", segs, n, NULL, 2), 0);
    assert_int_equal(proto_rest_path_split("", 0, buf, sizeof(buf), segs, 8), 0);
    assert_int_equal(proto_rest_route_match("/", segs, 0, NULL, 0), 1);
    assert_int_equal(proto_rest_path_split("x/y", 3, buf, sizeof(buf), segs, 8), -1);
    assert_int_equal(proto_rest_path_split("/a/b/c/d/e/f/g/h/i", 18, buf, sizeof(buf), segs, 8),
                     -1);
    n = proto_rest_path_split("/v1//x", 6, buf, sizeof(buf), segs, 8);
    assert_int_equal(n, 3);
    assert_int_equal(proto_rest_route_match("/v1/{}/x", segs, n, NULL, 2), 0); /* empty {} */
    n = proto_rest_path_split("/%41%4", 6, buf, sizeof(buf), segs, 8);
    assert_int_equal(n, 1);
    assert_memory_equal(segs[0].s, "A%4", 3);
}

static void test_query_values(void **state)
{
    int v;
    assert_int_equal(proto_rest_limit(NULL, 50, 500, &v), 0);
    assert_int_equal(v, 50);
    assert_int_equal(proto_rest_limit("7", 50, 500, &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(proto_rest_limit("007", 50, 500, &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(proto_rest_limit("100000", 50, 500, &v), 0);
    assert_int_equal(v, 500);
    static const char *bad[] = {"0", "-1", "+1", "1x", " 1", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(proto_rest_limit(bad[i], 50, 500, &v), PROTO_EVALUE);

    uint64_t ms, seq;
    int has;
    assert_int_equal(proto_rest_stream_id("18446744073709551615", &ms, &seq, &has), 0);
    assert_true(ms == UINT64_MAX && !has);
    assert_int_equal(proto_rest_stream_id("18446744073709551616", &ms, &seq, &has), PROTO_EVALUE);
    assert_int_equal(proto_rest_stream_id("1-18446744073709551616", &ms, &seq, &has),
                     PROTO_EVALUE);
    assert_int_equal(proto_rest_stream_id("1700000000000-3", &ms, &seq, &has), 0);
    assert_true(ms == 1700000000000ULL && seq == 3 && has);
    static const char *bad_ids[] = {"", "-", "1-", "-1", "1-2-3", "a", "1 ", "$"};
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++)
        assert_int_equal(proto_rest_stream_id(bad_ids[i], &ms, &seq, &has), PROTO_EVALUE);
}

static void test_localhost_names(void **state)
{
    static const struct {
        const char *host;
        int want;
    } rows[] = {
        {"localhost", 1},     {"LOCALHOST", 1},  {"localhost.", 1},   {"a.localhost", 1},
        {"a.b.LocalHost..", 1}, {"xlocalhost", 0}, {"localhost.com", 0}, {"localhos", 0},
        {"", 0},              {".", 0},          {"example.com", 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (proto_host_is_localhost(rows[i].host) != rows[i].want)
            fail_msg("%s: want %d", rows[i].host, rows[i].want);
    assert_int_equal(proto_listen_is_loopback("127.0.0.1.example.com:8080"), 0);
    assert_int_equal(proto_listen_is_loopback("LocalHost:8080"), 1);
    assert_int_equal(proto_listen_is_loopback("a.localhost:8080"), 0); /* a name: resolved */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_end),    cmocka_unit_test(test_head_parse),
        cmocka_unit_test(test_chunked),     cmocka_unit_test(test_path_route),
        cmocka_unit_test(test_query_values), cmocka_unit_test(test_localhost_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
