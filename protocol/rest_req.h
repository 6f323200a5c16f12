/* rest_req.h - the REST port's own request parsing, pure: the HTTP/1.x request head as the
 * connection gate (relay/api/gate.c) reads it before evhttp does, the chunked body decoder,
 * the path split with percent-decoding and the route pattern match (relay/api/server.c), and
 * the query values with a numeric meaning (limit, after). No I/O, no clock, no allocation
 * unless said. runs on: any thread (no shared state).
 *
 * Rules of the head reader (stricter than evhttp where smuggling could hide, the same
 * elsewhere): lines end in LF or CRLF; the head ends at the first empty line; the request line
 * is "METHOD SP target SP HTTP/1.x"; each header line is "name: value" with a token name (no
 * obs-fold continuation lines); at most one Content-Length (decimal digits, at most 2^53-1);
 * Transfer-Encoding, when present, is exactly "chunked" (any case) and excludes Content-Length.
 * Anything else is PROTO_EVALUE and the gate closes the connection. */
#ifndef PROTOCOL_REST_REQ_H
#define PROTOCOL_REST_REQ_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_REST_HEAD_MAX 16384 /* bytes of a request head (evhttp's header limit too) */
#define PROTO_REST_HDR_MAX 100    /* header lines per request */
#define PROTO_REST_SEGS_MAX 8     /* path segments a route can have */

struct proto_rest_hdr {
    const char *name, *value; /* into the parsed buffer, not NUL-terminated */
    size_t name_len, value_len;
    size_t off, len; /* the whole line, its terminator included */
};

struct proto_rest_head {
    const char *method, *target; /* into the parsed buffer */
    size_t method_len, target_len;
    size_t line_len;         /* the request line, its terminator included */
    int minor;               /* HTTP/1.<minor> */
    int64_t content_length;  /* -1: none given */
    int chunked;             /* Transfer-Encoding: chunked */
    int expect_continue;     /* Expect: 100-continue */
    size_t nhdr;
    struct proto_rest_hdr hdr[PROTO_REST_HDR_MAX]; /* the first ones */
    int more;                /* more header lines than hdr holds (checked, not kept) */
};

/* Length of the head at the start of buf[0..len) (through its empty line), 0 when no empty
 * line yet, PROTO_ETOOLONG when none within max bytes. */
long proto_rest_head_end(const char *buf, size_t len, size_t max);

/* Parse a whole head (buf[0..len), as proto_rest_head_end measured it) into h, whose pointers
 * point into buf. Every header line is checked; the first PROTO_REST_HDR_MAX are kept (h->more
 * says there were more). Returns 0 or PROTO_EVALUE (malformed, see the rules above). */
int proto_rest_head_parse(const char *buf, size_t len, struct proto_rest_head *h);

/* The first header named name (any case), or NULL. */
const struct proto_rest_hdr *proto_rest_head_find(const struct proto_rest_head *h,
                                                  const char *name);

/* Chunked transfer coding (RFC 9112 7.1): sizes in hex with optional extensions, data, CRLF (or
 * LF), a zero size, trailer lines, an empty line. Zero-initialise before the first step. */
struct proto_rest_chunked {
    int state;
    uint64_t left; /* bytes left in the current chunk or line bound */
    size_t line;   /* bytes of the current size or trailer line */
    int digits;    /* hex digits of the current size line */
    size_t trailer; /* trailer bytes so far */
};

/* Step over in[0..len): consumes (*used) bytes, at most up to the end of one data span, which
 * *data / *dlen point at (inside in; *dlen 0 when the step held none). Returns 1 when the
 * body ended (the bytes after *used belong to the next request), 0 when more input is needed
 * or more remains in in, PROTO_EVALUE when malformed, PROTO_ETOOLONG when a size line exceeds
 * 1 KiB, a size 2^53 or the trailers 8 KiB. */
int proto_rest_chunked_step(struct proto_rest_chunked *c, const char *in, size_t len,
                            size_t *used, const char **data, size_t *dlen);

/* One path segment, percent-decoded (a decoded segment may hold NUL: len is the truth). */
struct proto_rest_seg {
    const char *s; /* into the caller's buffer */
    size_t len;
};

/* Split path[0..plen) ("/v1/requests/x" -> "v1", "requests", "x"; one trailing slash ignored,
 * "" is "/") and percent-decode each segment the way evhttp_uridecode(s, 0, ...) does (%XX
 * with two hex digits; anything else, '+' included, stays as it is) into buf (at least plen
 * bytes). Returns the segment count, or -1 for a path no route can match (not absolute, more
 * than max segments). */
int proto_rest_path_split(const char *path, size_t plen, char *buf, size_t bufsz,
                          struct proto_rest_seg *segs, int max);

/* Does pattern ("/v1/webhooks/{}/test"; "{}" matches one non-empty segment) match the
 * segments? When it does and params is not NULL, params[i] is the index of the i-th "{}"
 * segment (at most maxp). Returns 1 or 0. */
int proto_rest_route_match(const char *pattern, const struct proto_rest_seg *segs, int nsegs,
                           int *params, int maxp);

/* The "limit" query value: NULL or "" -> def; decimal digits 1..2^63-1, above max -> max.
 * Returns 0 or PROTO_EVALUE (sign, zero, trailing text, no digits, out of range). */
int proto_rest_limit(const char *s, int def, int max, int *out);

/* The "after" query value of GET /v1/events as a stream id: "<ms>" or "<ms>-<seq>", each
 * 0..2^64-1 in decimal digits. has_seq says whether "-<seq>" was given. Returns 0 or
 * PROTO_EVALUE (out of range included: never wraps). */
int proto_rest_stream_id(const char *s, uint64_t *ms, uint64_t *seq, int *has_seq);

#endif
