/* json.h - protocol/'s one strict JSON reader and its JSON writer primitives (internal to
 * protocol/: normalize.c, requests_v3.c, record.c and event.c use it; nothing outside
 * protocol/ needs it, relay/ may include it for pjson_buf and its string escaper).
 *
 * Reader: pjson_parse turns bytes into a read-only tree held in one allocation. It is RFC 8259
 * strict (see json.c): invalid UTF-8, \u0000, lone surrogates, control characters in strings,
 * duplicate object keys, trailing bytes and nesting deeper than PROTO_MAX_DEPTH are refused
 * with PROTO_EJSON and "invalid JSON at byte N: <reason>". Integers beyond int64 parse (big is
 * set); reals are only "a real". Every node keeps where its text lies in the input (raw,
 * rawlen), so a value kept as JSON text is copied from validated bytes (pjson_compact).
 *
 * Writer: struct pjson_buf grows one malloc'd text; an allocation failure is sticky (every
 * later write is a no-op and pjson_buf_finish returns NULL), so encoders write without
 * checking each step. pjson_put_strn is THE string escaper of protocol/, and the UTF-8 rule
 * it applies is proto_utf8_valid's (proto.h): one validator, one escaper.
 * runs on: any thread (pure; no shared state). */
#ifndef PROTO_JSON_H
#define PROTO_JSON_H

#include "protocol/proto.h"

#include <stddef.h>
#include <stdint.h>

/* ---- reader ------------------------------------------------------------------------------ */

enum pjson_type {
    PJSON_NULL,
    PJSON_FALSE,
    PJSON_TRUE,
    PJSON_INT,
    PJSON_REAL,
    PJSON_STR,
    PJSON_ARR,
    PJSON_OBJ
};

/* One parsed value. Callers walk the tree (kids.first, next), so the body is public; every
 * pointer points into the document's arena or into the parsed input (raw), so a tree lives
 * as long as both its pjson_doc and the input bytes. */
struct pjson {
    unsigned char type; /* enum pjson_type */
    unsigned char big;  /* PJSON_INT whose magnitude does not fit int64 (i is clamped) */
    uint32_t klen;      /* member key length (members of an object) */
    const char *key;    /* member key, NUL-terminated; NULL outside objects */
    struct pjson *next; /* next sibling in the parent container */
    const char *raw;    /* the value's JSON text in the input (not NUL-terminated) */
    uint32_t rawlen;
    union {
        int64_t i;                                       /* PJSON_INT */
        struct { const char *s; uint32_t n; } str;       /* PJSON_STR, NUL-terminated */
        struct { struct pjson *first; uint32_t n; } kids; /* PJSON_ARR, PJSON_OBJ */
    } u;
};

/* A parsed document: root and the one allocation that holds nodes and decoded strings. */
struct pjson_doc {
    void *mem;
    struct pjson *root;
};

/* Parse buf[0..len) (buf may be NULL when len is 0) into *doc. Returns 0, PROTO_ETOOLONG
 * (len > PROTO_MAX_INPUT), PROTO_EJSON (err->msg "invalid JSON at byte N: reason") or
 * PROTO_ENOMEM, with err (may be NULL) filled. On failure *doc is empty; on success the caller
 * calls pjson_free, and keeps buf alive while it reads raw text. */
int pjson_parse(const char *buf, size_t len, struct pjson_doc *doc, struct proto_err *err);

/* pjson_parse with another size bound than PROTO_MAX_INPUT (the upstream's chain list is
 * larger than one message: facts.h); PROTO_ETOOLONG over max. */
int pjson_parse_max(const char *buf, size_t len, size_t max, struct pjson_doc *doc,
                    struct proto_err *err);

/* Free the document's arena (NULL-safe on an empty doc); *doc becomes empty. */
void pjson_free(struct pjson_doc *doc);

/* The member key of obj, or NULL when obj is NULL, not an object or has no such key. */
const struct pjson *pjson_get(const struct pjson *obj, const char *key);

/* The JSON text of v without whitespace between tokens. Writes at most cap bytes to out
 * (NULL: none; no NUL added) and returns the full length. */
size_t pjson_compact(const struct pjson *v, char *out, size_t cap);

/* Nesting depth of valid JSON text s[0..n): 0 for a scalar, 1 for [] or {"a":1}, ... */
int pjson_text_depth(const char *s, size_t n);

/* pjson_text_depth of v's own text. */
int pjson_depth(const struct pjson *v);

/* ---- writer ------------------------------------------------------------------------------ */

/* A growing text; start from {0}. Embedded by callers, hence the public body. */
struct pjson_buf {
    char *p;
    size_t len, cap;
    int oom; /* sticky: once set, every write is a no-op and the result is NULL */
};

/* Append n bytes verbatim (JSON text the caller vouches for). */
void pjson_put_raw(struct pjson_buf *b, const char *s, size_t n);

/* Append a string literal verbatim. */
#define PJSON_PUT_LIT(b, s) pjson_put_raw((b), (s), sizeof(s) - 1)

/* Append an integer in decimal. */
void pjson_put_i64(struct pjson_buf *b, int64_t v);
void pjson_put_u64(struct pjson_buf *b, uint64_t v);

/* Append s[0..n) as a JSON string (RFC 8259): quote, backslash and control characters
 * escaped (\b \f \n \r \t, else \u00XX, so a NUL byte becomes \u0000); valid UTF-8 copied;
 * each byte that does not start a valid UTF-8 sequence (proto_utf8_valid's rule) becomes
 * \ufffd, so the output is valid JSON for any input bytes. */
void pjson_put_strn(struct pjson_buf *b, const char *s, size_t n);

/* pjson_put_strn of a C string; NULL writes null. */
void pjson_put_str(struct pjson_buf *b, const char *s);

/* Append the compact JSON text of a parsed value (pjson_compact); NULL writes null. */
void pjson_put_value(struct pjson_buf *b, const struct pjson *v);

/* Finish: NUL-terminate and hand over the malloc'd text (caller frees; *len, may be NULL,
 * gets its length), or free it and return NULL (*len = 0) after an allocation failure. */
char *pjson_buf_finish(struct pjson_buf *b, size_t *len);

/* Decimal digits of v into buf (at least 20 bytes; no NUL added). Returns the length. */
size_t pjson_fmt_u64(char *buf, uint64_t v);

#endif
