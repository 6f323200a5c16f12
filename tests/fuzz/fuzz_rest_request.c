/* fuzz_rest_request.c - libFuzzer target for protocol/rest_req.c: the REST port's request
 * parsing beyond evhttp's own (the gate's head reader and chunked decoder, the path split and
 * route match, the limit and after query values).
 *
 * The input is a raw request stream: a head, then its body. Properties: never crashes; a
 * parsed head's fields point inside the head and follow the rules of rest_req.h (one length,
 * not with chunked, token names); the chunked decoder gives the same body and the same end
 * whether fed whole or byte by byte, and never more body than input; a path splits into
 * segments no longer than itself, and a matching route's "{}" indexes are in range; limit is
 * def or within 1..max; a stream id re-printed parses to the same numbers.
 * runs on: the fuzzer's thread. */
#include "tests/fuzz/fuzz_check.h"
#include "protocol/proto.h"
#include "protocol/rest_req.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The patterns of relay/api/routes.c (kept in step by hand: the table lives in relay/). */
static const char *const patterns[] = {
    "/healthz", "/readyz", "/metrics", "/v1/requests", "/v1/requests/{}", "/v1/events",
    "/intents/status/v3", "/intents/status", "/v1/ingest/upstream", "/v1/chains",
    "/v1/webhooks", "/v1/webhooks/{}", "/v1/webhooks/{}/rotate-secret",
    "/v1/webhooks/{}/reveal-secret", "/v1/webhooks/{}/test", "/v1/webhooks/{}/deliveries",
    "/v1/replay", "/",
};

/* Decode body with pieces of at most stepsz bytes; returns the final code. */
static int decode(const char *in, size_t len, size_t stepsz, char *out, size_t *olen,
                  size_t *consumed)
{
    struct proto_rest_chunked c = {0};
    size_t off = 0, o = 0;
    int rc = 0;
    while (off < len && rc == 0) {
        size_t win = len - off < stepsz ? len - off : stepsz, w = 0;
        do {
            size_t used = 0, dlen = 0;
            const char *d = NULL;
            rc = proto_rest_chunked_step(&c, in + off + w, win - w, &used, &d, &dlen);
            FUZZ_CHECK(used <= win - w);
            FUZZ_CHECK(dlen == 0 || (d >= in + off + w && d + dlen <= in + off + w + used));
            memcpy(out + o, d != NULL ? d : "", dlen);
            o += dlen;
            w += used;
            if (rc == 0 && used == 0 && w < win)
                FUZZ_CHECK(0); /* no progress on available input */
        } while (rc == 0 && w < win);
        off += w;
    }
    *olen = o;
    *consumed = off;
    return rc;
}

static void check_chunked(const char *in, size_t len)
{
    char *a = malloc(len + 1), *b = malloc(len + 1);
    size_t la, lb, ca, cb;
    int ra = decode(in, len, len > 0 ? len : 1, a, &la, &ca);
    int rb = decode(in, len, 1, b, &lb, &cb);
    FUZZ_CHECK(ra == 0 || ra == 1 || ra == PROTO_EVALUE || ra == PROTO_ETOOLONG);
    FUZZ_CHECK(la <= len);
    if (ra == 1 || rb == 1) { /* a finished body is the same however it arrived */
        FUZZ_CHECK(ra == rb && la == lb && ca == cb && memcmp(a, b, la) == 0);
    } else if (ra == 0 && rb == 0) {
        FUZZ_CHECK(la == lb && memcmp(a, b, la) == 0);
    }
    free(a);
    free(b);
}

static void check_path(const char *t, size_t n)
{
    const char *q = memchr(t, '?', n);
    size_t plen = q != NULL ? (size_t)(q - t) : n;
    char *buf = malloc(plen + 1);
    struct proto_rest_seg segs[PROTO_REST_SEGS_MAX];
    int ns = proto_rest_path_split(t, plen, buf, plen + 1, segs, PROTO_REST_SEGS_MAX);
    FUZZ_CHECK(ns >= -1 && ns <= PROTO_REST_SEGS_MAX);
    size_t total = 0;
    for (int i = 0; i < ns; i++) {
        FUZZ_CHECK(segs[i].s >= buf && segs[i].s + segs[i].len <= buf + plen + 1);
        total += segs[i].len;
    }
    FUZZ_CHECK(total <= plen);
    for (size_t k = 0; ns >= 0 && k < sizeof(patterns) / sizeof(patterns[0]); k++) {
        int params[2] = {-1, -1};
        if (proto_rest_route_match(patterns[k], segs, ns, params, 2)) {
            for (int i = 0; i < 2; i++)
                FUZZ_CHECK(params[i] >= -1 && params[i] < ns && (params[i] < 0 || segs[params[i]].len));
        }
    }
    free(buf);
    if (q != NULL) { /* the query text as a value of limit and after */
        size_t vl = n - plen - 1;
        char *v = malloc(vl + 1);
        memcpy(v, q + 1, vl);
        v[vl] = '\0';
        int lim;
        if (proto_rest_limit(v, 50, 500, &lim) == 0)
            FUZZ_CHECK(lim == 50 || (lim >= 1 && lim <= 500));
        uint64_t ms, seq, ms2, seq2;
        int has, has2;
        if (proto_rest_stream_id(v, &ms, &seq, &has) == 0) {
            char again[48];
            if (has)
                snprintf(again, sizeof(again), "%llu-%llu", (unsigned long long)ms,
                         (unsigned long long)seq);
            else
                snprintf(again, sizeof(again), "%llu", (unsigned long long)ms);
            FUZZ_CHECK(proto_rest_stream_id(again, &ms2, &seq2, &has2) == 0);
            FUZZ_CHECK(ms == ms2 && seq == seq2 && has == has2);
        }
        free(v);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct proto_rest_head h;
    const char *in = (const char *)data;
    long e = proto_rest_head_end(in, size, PROTO_REST_HEAD_MAX);
    FUZZ_CHECK(e == 0 || e == PROTO_EVALUE || e == PROTO_ETOOLONG || (e > 0 && (size_t)e <= size));
    if (e <= 0) {
        check_chunked(in, size);
        check_path(in, size);
        return 0;
    }
    int rc = proto_rest_head_parse(in, (size_t)e, &h);
    FUZZ_CHECK(rc == 0 || rc == PROTO_EVALUE || rc == PROTO_ETOOLONG);
    if (rc == 0) {
        FUZZ_CHECK(h.method_len > 0 && h.target_len > 0 && h.line_len <= (size_t)e);
        FUZZ_CHECK(h.target >= in && h.target + h.target_len <= in + e);
        FUZZ_CHECK(!(h.chunked && h.content_length >= 0));
        FUZZ_CHECK(h.content_length >= -1 && h.content_length <= PROTO_MAX_CHAIN_ID);
        FUZZ_CHECK(h.nhdr <= PROTO_REST_HDR_MAX);
        for (size_t i = 0; i < h.nhdr; i++) {
            FUZZ_CHECK(h.hdr[i].name_len > 0 && h.hdr[i].off + h.hdr[i].len <= (size_t)e);
            FUZZ_CHECK(h.hdr[i].name == in + h.hdr[i].off);
            FUZZ_CHECK(h.hdr[i].value >= h.hdr[i].name + h.hdr[i].name_len + 1);
            FUZZ_CHECK(h.hdr[i].value + h.hdr[i].value_len <= in + h.hdr[i].off + h.hdr[i].len);
            FUZZ_CHECK(proto_rest_head_find(&h, "x") == NULL || h.nhdr > 0);
        }
        check_path(h.target, h.target_len);
    }
    check_chunked(in + e, size - (size_t)e);
    return 0;
}
