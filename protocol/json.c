/* json.c - protocol/'s strict JSON reader and the JSON writer primitives (json.h).
 *
 * Reader. protocol/ parses with its own strict reader instead of jansson's json_loadb:
 * under allocation failure jansson 2.14 silently drops bytes from strings and numbers (its
 * token buffer ignores a failed grow) and reports other failures as syntax errors, so it can
 * neither keep the "PROTO_ENOMEM, never a wrong record" promise nor tell OOM from bad input.
 * The reader makes two passes over the bytes: pass 1 validates and counts (no allocation),
 * pass 2 fills one arena allocation with the tree. It is RFC 8259 strict: UTF-8 validated
 * (no overlongs, surrogates or > U+10FFFF), escapes checked (lone surrogates and \u0000
 * rejected, so C strings never hide a NUL), no trailing bytes, nesting at most
 * PROTO_MAX_DEPTH, and duplicate object keys are rejected (JSON.stringify never emits them;
 * accepting them would let two readers of one signed body see different values). Integers
 * beyond int64 parse (and fail with PROTO_ERANGE where a number is read); reals are kept only
 * as "a real" (every number we read is an integer: reals are PROTO_ETYPE). Every node also
 * records where its text lies in the input (raw, rawlen), so a value kept as JSON text (a
 * non-string "details", reorg metadata) is copied from the validated bytes, minus the
 * whitespace between tokens (pjson_compact), never re-serialised.
 *
 * Writer. The encoders of event.c are hand-written (no jansson tree per event) on top of one
 * growing buffer. Strings are escaped per RFC 8259 (quote, backslash, control characters);
 * bytes that are not valid UTF-8 become \ufffd so the output is always valid JSON even for
 * hand-built events (normalised events only hold valid UTF-8). utf8_seq below is the one
 * UTF-8 rule of protocol/: the reader, proto_utf8_valid and the escaper all use it.
 * runs on: any thread (pure). */
#include "protocol/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reader ------------------------------------------------------------------------------ */

struct jslot { /* duplicate-key table entry: node index + 1 of a member (0 = empty) */
    uint32_t obj;
    uint32_t node;
};

struct jparser {
    const unsigned char *p, *start, *end;
    int build; /* 0: validate and count; 1: fill the arena */
    int depth;
    size_t nnodes, nstr, nmembers; /* pass 1: totals; pass 2: cursors (nodes, string bytes) */
    struct pjson *nodes;
    char *strs;
    struct jslot *slots;
    size_t slotmask;
    const char *err; /* static message of the first syntax error */
    size_t errpos;
};

static int jerr(struct jparser *P, const char *msg)
{
    if (P->err == NULL) {
        P->err = msg;
        P->errpos = (size_t)(P->p - P->start);
    }
    return -1;
}

static void skip_ws(struct jparser *P)
{
    while (P->p < P->end && (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r'))
        P->p++;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid (RFC 3629). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 ||
            (c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f))
            return 0;
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80 ||
            (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
            return 0;
        return 4;
    }
    return 0;
}

int proto_utf8_valid(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0, k; i < len; i += k)
        if ((k = utf8_seq(u + i, len - i)) == 0)
            return 0;
    return 1;
}

static int hex4(const unsigned char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

/* The escape at P->p (on the backslash) as a code point into *cp, P->p past it; a \\u
 * surrogate pair makes one code point. Returns 0, or jerr's -1. */
static int parse_escape(struct jparser *P, unsigned *cp)
{
    if (P->end - P->p < 2)
        return jerr(P, "unterminated string");
    unsigned e = P->p[1];
    P->p += 2;
    switch (e) {
    case '"': case '\\': case '/': *cp = e; return 0;
    case 'b': *cp = '\b'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'u':
        break;
    default:
        return jerr(P, "bad escape");
    }
    if (P->end - P->p < 4 || hex4(P->p, cp) != 0)
        return jerr(P, "bad \\u escape");
    P->p += 4;
    if (*cp >= 0xdc00 && *cp <= 0xdfff)
        return jerr(P, "lone low surrogate");
    if (*cp >= 0xd800 && *cp <= 0xdbff) {
        unsigned lo;
        if (P->end - P->p < 6 || P->p[0] != '\\' || P->p[1] != 'u' ||
            hex4(P->p + 2, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
            return jerr(P, "lone high surrogate");
        P->p += 6;
        *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    if (*cp == 0)
        return jerr(P, "\\u0000 in string");
    return 0;
}

/* Code point cp (< 0x110000) as UTF-8 into u; returns its length (1..4). */
static size_t utf8_put(unsigned cp, unsigned char u[4])
{
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        u[0] = (unsigned char)(0xc0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        u[0] = (unsigned char)(0xe0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        u[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    u[0] = (unsigned char)(0xf0 | cp >> 18);
    u[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    u[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    u[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string at P->p (on the opening quote). Pass 2 decodes it into the arena. */
static int parse_string(struct jparser *P, const char **out, uint32_t *outlen)
{
    char *dst = P->build ? P->strs + P->nstr : NULL;
    size_t n = 0;
    P->p++;
    for (;;) {
        /* fast path: a run of plain ASCII copied at once */
        const unsigned char *run = P->p;
        while (P->p < P->end && *P->p >= 0x20 && *P->p < 0x80 && *P->p != '"' && *P->p != '\\')
            P->p++;
        if (P->p != run) {
            if (dst != NULL)
                memcpy(dst + n, run, (size_t)(P->p - run));
            n += (size_t)(P->p - run);
        }
        if (P->p >= P->end)
            return jerr(P, "unterminated string");
        unsigned c = *P->p;
        if (c == '"') {
            P->p++;
            break;
        }
        if (c < 0x20)
            return jerr(P, "control character in string");
        if (c == '\\') {
            unsigned cp;
            unsigned char u[4];
            if (parse_escape(P, &cp) != 0)
                return -1;
            size_t k = utf8_put(cp, u);
            if (dst != NULL)
                memcpy(dst + n, u, k);
            n += k;
            continue;
        }
        size_t k = c < 0x80 ? 1 : utf8_seq(P->p, (size_t)(P->end - P->p));
        if (k == 0)
            return jerr(P, "invalid UTF-8");
        if (dst != NULL)
            memcpy(dst + n, P->p, k);
        n += k;
        P->p += k;
    }
    if (dst != NULL) {
        dst[n] = '\0';
        *out = dst;
        *outlen = (uint32_t)n;
    }
    P->nstr += n + 1;
    return 0;
}

static int parse_number(struct jparser *P, struct pjson *v)
{
    const unsigned char *s = P->p;
    int neg = 0, is_int = 1, big = 0;
    uint64_t mag = 0;
    if (s < P->end && *s == '-') {
        neg = 1;
        s++;
    }
    if (s >= P->end || *s < '0' || *s > '9')
        return jerr(P, "bad number");
    if (*s == '0') {
        s++;
    } else {
        while (s < P->end && *s >= '0' && *s <= '9') {
            unsigned d = *s++ - '0';
            if (mag > (UINT64_MAX - d) / 10)
                big = 1;
            else
                mag = mag * 10 + d;
        }
    }
    if (s < P->end && *s == '.') {
        is_int = 0;
        s++;
        if (s >= P->end || *s < '0' || *s > '9')
            return jerr(P, "bad number");
        while (s < P->end && *s >= '0' && *s <= '9')
            s++;
    }
    if (s < P->end && (*s == 'e' || *s == 'E')) {
        is_int = 0;
        s++;
        if (s < P->end && (*s == '+' || *s == '-'))
            s++;
        if (s >= P->end || *s < '0' || *s > '9')
            return jerr(P, "bad number");
        while (s < P->end && *s >= '0' && *s <= '9')
            s++;
    }
    P->p = s;
    if (v == NULL)
        return 0;
    if (!is_int) {
        v->type = PJSON_REAL;
        return 0;
    }
    v->type = PJSON_INT;
    if (big || mag > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX)) {
        v->big = 1;
        v->u.i = neg ? INT64_MIN : INT64_MAX;
    } else {
        v->u.i = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    }
    return 0;
}

static int parse_literal(struct jparser *P, const char *word, size_t n)
{
    if ((size_t)(P->end - P->p) < n || memcmp(P->p, word, n) != 0)
        return jerr(P, "invalid literal");
    P->p += n;
    return 0;
}

/* Next node of pass 2 (NULL in pass 1, which only counts). */
static struct pjson *new_node(struct jparser *P)
{
    struct pjson *v = P->build ? &P->nodes[P->nnodes] : NULL;
    P->nnodes++;
    if (v != NULL)
        memset(v, 0, sizeof(*v));
    return v;
}

static uint32_t key_hash(uint32_t obj, const char *k, size_t n)
{
    uint32_t h = 2166136261u ^ (obj * 2654435761u);
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)k[i]) * 16777619u;
    return h;
}

/* Insert member m of object obj; -1 when the object already has that key. */
static int key_insert(struct jparser *P, struct pjson *obj, struct pjson *m)
{
    uint32_t oi = (uint32_t)(obj - P->nodes), mi = (uint32_t)(m - P->nodes);
    for (size_t i = key_hash(oi, m->key, m->klen) & P->slotmask;; i = (i + 1) & P->slotmask) {
        struct jslot *s = &P->slots[i];
        if (s->node == 0) {
            s->obj = oi;
            s->node = mi + 1;
            return 0;
        }
        const struct pjson *o = &P->nodes[s->node - 1];
        if (s->obj == oi && o->klen == m->klen && memcmp(o->key, m->key, m->klen) == 0)
            return -1;
    }
}

static int parse_value(struct jparser *P, struct pjson *v);

static int parse_container(struct jparser *P, struct pjson *v, int is_obj)
{
    unsigned char close = is_obj ? '}' : ']';
    struct pjson *last = NULL;
    uint32_t n = 0;
    if (++P->depth > PROTO_MAX_DEPTH)
        return jerr(P, "nesting too deep");
    if (v != NULL) {
        v->type = is_obj ? PJSON_OBJ : PJSON_ARR;
        v->u.kids.first = NULL;
    }
    P->p++;
    skip_ws(P);
    if (P->p < P->end && *P->p == close) {
        P->p++;
        P->depth--;
        return 0;
    }
    for (;;) {
        const char *key = NULL;
        uint32_t klen = 0;
        if (is_obj) {
            if (P->p >= P->end || *P->p != '"')
                return jerr(P, "expected a string key");
            if (parse_string(P, &key, &klen) != 0)
                return -1;
            skip_ws(P);
            if (P->p >= P->end || *P->p != ':')
                return jerr(P, "expected ':'");
            P->p++;
            skip_ws(P);
            P->nmembers++;
        }
        struct pjson *c = new_node(P);
        if (parse_value(P, c) != 0)
            return -1;
        if (c != NULL) {
            c->key = key;
            c->klen = klen;
            if (is_obj && key_insert(P, v, c) != 0)
                return jerr(P, "duplicate key");
            if (last == NULL)
                v->u.kids.first = c;
            else
                last->next = c;
            last = c;
        }
        n++;
        skip_ws(P);
        if (P->p < P->end && *P->p == ',') {
            P->p++;
            skip_ws(P);
            continue;
        }
        if (P->p < P->end && *P->p == close) {
            P->p++;
            break;
        }
        return jerr(P, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    if (v != NULL)
        v->u.kids.n = n;
    P->depth--;
    return 0;
}

static int parse_one(struct jparser *P, struct pjson *v)
{
    if (P->p >= P->end)
        return jerr(P, "unexpected end of input");
    switch (*P->p) {
    case '{': return parse_container(P, v, 1);
    case '[': return parse_container(P, v, 0);
    case '"':
        if (v != NULL)
            v->type = PJSON_STR;
        return parse_string(P, v ? &v->u.str.s : NULL, v ? &v->u.str.n : NULL);
    case 't':
        if (v != NULL)
            v->type = PJSON_TRUE;
        return parse_literal(P, "true", 4);
    case 'f':
        if (v != NULL)
            v->type = PJSON_FALSE;
        return parse_literal(P, "false", 5);
    case 'n':
        if (v != NULL)
            v->type = PJSON_NULL;
        return parse_literal(P, "null", 4);
    default:
        if (*P->p == '-' || (*P->p >= '0' && *P->p <= '9'))
            return parse_number(P, v);
        return jerr(P, "unexpected character");
    }
}

/* A value of any type; pass 2 also records its text span. */
static int parse_value(struct jparser *P, struct pjson *v)
{
    const unsigned char *start = P->p;
    if (parse_one(P, v) != 0)
        return -1;
    if (v != NULL) {
        v->raw = (const char *)start;
        v->rawlen = (uint32_t)(P->p - start);
    }
    return 0;
}

static int parse_doc(struct jparser *P)
{
    struct pjson *root = new_node(P);
    skip_ws(P);
    if (parse_value(P, root) != 0)
        return -1;
    skip_ws(P);
    if (P->p != P->end)
        return jerr(P, "trailing characters");
    return 0;
}

static int fail_json(struct proto_err *err, const struct jparser *P)
{
    char msg[128];
    snprintf(msg, sizeof(msg), "invalid JSON at byte %zu: %s", P->errpos, P->err);
    return proto_fail(err, PROTO_EJSON, "", msg);
}

int pjson_parse(const char *buf, size_t len, struct pjson_doc *doc, struct proto_err *err)
{
    return pjson_parse_max(buf, len, PROTO_MAX_INPUT, doc, err);
}

/* Pass 1 validates and sizes, pass 2 fills one allocation (freed with pjson_free). */
int pjson_parse_max(const char *buf, size_t len, size_t max, struct pjson_doc *doc,
                    struct proto_err *err)
{
    doc->mem = NULL;
    doc->root = NULL;
    if (len > max || len > UINT32_MAX)
        return proto_fail(err, PROTO_ETOOLONG, "",
                          max == PROTO_MAX_INPUT ? "message over PROTO_MAX_INPUT bytes"
                                                 : "document over its size bound");
    if (buf == NULL)
        len = 0;
    struct jparser P = {0};
    P.start = P.p = (const unsigned char *)(buf != NULL ? buf : "");
    P.end = P.start + len;
    if (parse_doc(&P) != 0)
        return fail_json(err, &P);

    size_t nodes = P.nnodes, nstr = P.nstr, nslots = 0;
    if (P.nmembers > 0)
        for (nslots = 8; nslots < P.nmembers * 2; nslots *= 2)
            ;
    size_t nodebytes = nodes * sizeof(struct pjson), slotbytes = nslots * sizeof(struct jslot);
    char *mem = malloc(nodebytes + slotbytes + nstr);
    if (mem == NULL)
        return proto_fail(err, PROTO_ENOMEM, "", "out of memory");
    memset(mem + nodebytes, 0, slotbytes);
    struct jparser Q = {0};
    Q.start = Q.p = P.start;
    Q.end = P.end;
    Q.build = 1;
    Q.nodes = (struct pjson *)(void *)mem;
    Q.slots = (struct jslot *)(void *)(mem + nodebytes);
    Q.slotmask = nslots - 1;
    Q.strs = mem + nodebytes + slotbytes;
    if (parse_doc(&Q) != 0) { /* only a duplicate key can fail here */
        free(mem);
        return fail_json(err, &Q);
    }
    doc->mem = mem;
    doc->root = Q.nodes;
    return 0;
}

void pjson_free(struct pjson_doc *doc)
{
    free(doc->mem);
    doc->mem = NULL;
    doc->root = NULL;
}

const struct pjson *pjson_get(const struct pjson *obj, const char *key)
{
    if (obj == NULL || obj->type != PJSON_OBJ)
        return NULL;
    size_t n = strlen(key);
    for (const struct pjson *c = obj->u.kids.first; c != NULL; c = c->next)
        if (c->klen == n && memcmp(c->key, key, n) == 0)
            return c;
    return NULL;
}

/* The JSON text of v without whitespace between tokens (the reader validated it, so only
 * strings need care). Writes at most cap bytes to out (NULL: none, no NUL added) and returns
 * the full length. */
size_t pjson_compact(const struct pjson *v, char *out, size_t cap)
{
    size_t n = 0;
    int in_str = 0;
    for (uint32_t i = 0; i < v->rawlen; i++) {
        char ch = v->raw[i];
        if (!in_str && (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'))
            continue;
        if (ch == '"')
            in_str = !in_str;
        else if (ch == '\\' && in_str && i + 1 < v->rawlen) {
            if (out != NULL && n < cap)
                out[n] = ch;
            n++;
            ch = v->raw[++i]; /* the escaped character, never a closing quote */
        }
        if (out != NULL && n < cap)
            out[n] = ch;
        n++;
    }
    return n;
}

/* Nesting depth of valid JSON text: 0 for a scalar, 1 for [] or {"a":1}, ... */
int pjson_text_depth(const char *s, size_t n)
{
    int d = 0, max = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = 0;
        } else if (ch == '"') {
            in_str = 1;
        } else if (ch == '[' || ch == '{') {
            if (++d > max)
                max = d;
        } else if (ch == ']' || ch == '}') {
            d--;
        }
    }
    return max;
}

int pjson_depth(const struct pjson *v)
{
    return pjson_text_depth(v->raw, v->rawlen);
}

/* ---- writer ------------------------------------------------------------------------------ */

static int pjson_buf_reserve(struct pjson_buf *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (extra < b->cap - b->len) /* cap - len > extra: room for extra and the NUL */
        return 0;
    size_t cap = b->cap != 0 ? b->cap : 1024;
    while (cap - b->len <= extra) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return -1;
        }
        cap *= 2;
    }
    char *np = realloc(b->p, cap);
    if (np == NULL) {
        b->oom = 1;
        return -1;
    }
    b->p = np;
    b->cap = cap;
    return 0;
}

void pjson_put_raw(struct pjson_buf *b, const char *s, size_t n)
{
    if (pjson_buf_reserve(b, n) != 0)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

size_t pjson_fmt_u64(char *buf, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

void pjson_put_i64(struct pjson_buf *b, int64_t v)
{
    char buf[21];
    size_t n = 0;
    uint64_t u = (uint64_t)v;
    if (v < 0) {
        buf[n++] = '-';
        u = 0 - u;
    }
    n += pjson_fmt_u64(buf + n, u);
    pjson_put_raw(b, buf, n);
}

void pjson_put_u64(struct pjson_buf *b, uint64_t v)
{
    char buf[20];
    pjson_put_raw(b, buf, pjson_fmt_u64(buf, v));
}

void pjson_put_strn(struct pjson_buf *b, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    /* worst case 6 output bytes per input byte (\u00XX); reserve once */
    if (n > (SIZE_MAX - 2) / 6 || pjson_buf_reserve(b, n * 6 + 2) != 0) {
        b->oom = 1;
        return;
    }
    char *o = b->p + b->len;
    *o++ = '"';
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            *o++ = (char)c;
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = utf8_seq(s + i, n - i);
            if (k == 0) {
                memcpy(o, "\\ufffd", 6); /* invalid byte: replacement character */
                o += 6;
                i++;
            } else {
                memcpy(o, s + i, k);
                o += k;
                i += k;
            }
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
        i++;
    }
    *o++ = '"';
    b->len = (size_t)(o - b->p);
}

void pjson_put_str(struct pjson_buf *b, const char *s)
{
    if (s == NULL)
        PJSON_PUT_LIT(b, "null");
    else
        pjson_put_strn(b, s, strlen(s));
}

void pjson_put_value(struct pjson_buf *b, const struct pjson *v)
{
    if (v == NULL) {
        PJSON_PUT_LIT(b, "null");
        return;
    }
    size_t n = pjson_compact(v, NULL, 0);
    if (pjson_buf_reserve(b, n) != 0)
        return;
    pjson_compact(v, b->p + b->len, n);
    b->len += n;
}

char *pjson_buf_finish(struct pjson_buf *b, size_t *len)
{
    if (pjson_buf_reserve(b, 0) != 0) {
        free(b->p);
        if (len != NULL)
            *len = 0;
        return NULL;
    }
    b->p[b->len] = '\0';
    if (len != NULL)
        *len = b->len;
    return b->p;
}
