/* proto.h - error codes, size limits and shared validators of the pure protocol layer.
 *
 * protocol/ is pure: no sockets, files, clocks, threads, globals or logging. Callers pass
 * timestamps, secrets and random bytes in. Every decoder is table-tested and fuzzed.
 * runs on: any thread (no shared state). */
#ifndef PROTO_PROTO_H
#define PROTO_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* Return codes: 0 is success, negative is a typed rejection. */
enum {
    PROTO_OK = 0,
    PROTO_ENOMEM = -1,    /* allocation failed */
    PROTO_EJSON = -2,     /* not JSON: truncated, invalid UTF-8, NUL bytes, too deep */
    PROTO_ETYPE = -3,     /* a field has the wrong JSON type */
    PROTO_EMISSING = -4,  /* a required field is absent */
    PROTO_ERANGE = -5,    /* a number is out of its allowed range */
    PROTO_ETOOLONG = -6,  /* input, string or list over its bound */
    PROTO_EVALUE = -7,    /* a value is malformed (bad id characters, bad timestamp text) */
    PROTO_EEVENT = -8,    /* a well-formed message about an event we do not handle */
    PROTO_ESIG = -9,      /* signature missing or does not verify */
    PROTO_ESTALE = -10,   /* signature timestamp outside the tolerance window */
};

/* Bounds. Hashes are opaque strings (EVM hex, Solana base58, TON hex, ...). */
#define PROTO_MAX_INPUT (1024 * 1024)  /* bytes of one message/body */
#define PROTO_MAX_ID 128               /* request id length */
#define PROTO_MAX_HASH 128             /* one tx hash */
#define PROTO_MAX_HASHES 64            /* entries in one hash list */
#define PROTO_MAX_STR 4096             /* details, reasons, referrer, addresses */
#define PROTO_MAX_STATUS 64            /* status / reason enum value length */
#define PROTO_MAX_CHAIN_ID 9007199254740991LL /* 2^53-1: safe in every JSON reader */
/* Added: nesting depth accepted by the protocol JSON reader (upstream messages nest < 15),
 * and the largest timestamp / seq accepted (ms; the same 2^53-1 bound as chain ids). */
#define PROTO_MAX_DEPTH 128
#define PROTO_MAX_TS PROTO_MAX_CHAIN_ID

/* A typed rejection: code plus the field it concerns (JSON path like "data.updatedAt") and
 * a short human message. Fixed buffers: no allocation on the error path. */
struct proto_err {
    int code;
    char field[64];
    char msg[128];
};

/* Human name of a code ("json", "type", "missing", ...), for metrics and logs. */
const char *proto_strerror(int code);

/* Set err (may be NULL) and return code. */
int proto_fail(struct proto_err *err, int code, const char *field, const char *msg);

/* A request id: 1..PROTO_MAX_ID chars of [A-Za-z0-9_:.-] (upstream uses 0x + 64 hex).
 * Returns 1 if valid. */
int proto_request_id_valid(const char *s, size_t len);
/* 1 when s[0..len) is valid UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF) - the one check the JSON reader and the string escaper (json.c) apply too, so
 * text that passes it is text jansson and every JSON reader of ours accept. */
int proto_utf8_valid(const char *s, size_t len);
/* A tx hash: 1..PROTO_MAX_HASH printable ASCII chars without space, quote or backslash. */
int proto_hash_valid(const char *s, size_t len);

/* The value of one hex digit (either case), or -1. */
int proto_hex_digit(int c);

/* A Redis stream id "<ms>" or "<ms>-<seq>" (decimal digits only, each part at most
 * 18446744073709551615 = 2^64 - 1 as in Redis): 0 and *ms, *seq set (seq 0 when absent), or
 * -1 (out of range included). The one reader of stream ids: cursors, lastEventId, after. */
int proto_stream_id_parse(const char *s, uint64_t *ms, uint64_t *seq);

#endif
