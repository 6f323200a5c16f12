/* normalize.c - every upstream source into struct status_event, and the storage record back.
 *
 * JSON reader. protocol/ parses with its own strict reader instead of jansson's json_loadb:
 * under allocation failure jansson 2.14 silently drops bytes from strings and numbers (its
 * token buffer ignores a failed grow) and reports other failures as syntax errors, so it can
 * neither keep the "PROTO_ENOMEM, never a wrong record" promise nor tell OOM from bad input.
 * The reader here makes two passes over the bytes: pass 1 validates and counts (no
 * allocation), pass 2 fills one arena allocation with the tree. It is RFC 8259 strict:
 * UTF-8 validated (no overlongs, surrogates or > U+10FFFF), escapes checked (lone surrogates
 * and \u0000 rejected, so C strings never hide a NUL), no trailing bytes, nesting at most
 * PROTO_MAX_DEPTH, and duplicate object keys are rejected (JSON.stringify never emits them;
 * accepting them would let two readers of one signed body see different values). Integers
 * beyond int64 parse (and fail with PROTO_ERANGE where a number is read); reals are kept only
 * as "a real" (every number we read is an integer: reals are PROTO_ETYPE). Unknown fields are
 * ignored. Every node also records where its text lies in the input (raw, rawlen), so a value
 * kept as JSON text (a non-string "details", reorg metadata) is copied from the validated
 * bytes, minus the whitespace between tokens (json_compact), never re-serialised.
 *
 * Normalisation rules (upstream-protocol.md): required are requestId (or the caller's id),
 * status, updatedAt; everything else is optional, and a field that is present must be valid.
 * Chain ids are JSON integers 1..PROTO_MAX_CHAIN_ID (absent/null -> 0, unknown); timestamps
 * are integer ms 1..PROTO_MAX_TS. status / failReason / refundFailReason are tokens of 1..64
 * printable ASCII chars without space, quote or backslash; unknown values are kept verbatim and
 * flagged. Absent, null and "" reasons become "N/A". Hashes are validated by proto_hash_valid,
 * at most PROTO_MAX_HASHES per list, duplicates dropped (first occurrence kept). details may be
 * any JSON value: a string stays a string, any other type is kept as its compact JSON text
 * (PROTO_HAS_DETAILS_JSON); details longer than PROTO_MAX_STR is cut at a UTF-8 boundary and
 * flagged (a cut JSON text becomes a plain string); other strings over their bound are
 * PROTO_ETOOLONG. /requests/v3 items may add reorg details (ev->reorg) and
 * PROTO_F_UNCONFIRMED_DEPOSIT (requests_item).
 * runs on: any thread (pure). */
#include "protocol/normalize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON reader ------------------------------------------------------------------------- */

enum jtype { J_NULL, J_FALSE, J_TRUE, J_INT, J_REAL, J_STR, J_ARR, J_OBJ };

struct jv {
    unsigned char type;
    unsigned char big; /* J_INT whose magnitude does not fit int64 */
    uint32_t klen;     /* member key length (members of an object) */
    const char *key;   /* member key, NUL-terminated; NULL outside objects */
    struct jv *next;   /* next sibling in the parent container */
    const char *raw;   /* the value's JSON text in the input (not NUL-terminated) */
    uint32_t rawlen;
    union {
        int64_t i;                                     /* J_INT */
        struct { const char *s; uint32_t n; } str;      /* J_STR, NUL-terminated */
        struct { struct jv *first; uint32_t n; } kids; /* J_ARR, J_OBJ */
    } u;
};

struct jslot { /* duplicate-key table entry: node index + 1 of a member (0 = empty) */
    uint32_t obj;
    uint32_t node;
};

struct jparser {
    const unsigned char *p, *start, *end;
    int build; /* 0: validate and count; 1: fill the arena */
    int depth;
    size_t nnodes, nstr, nmembers; /* pass 1: totals; pass 2: cursors (nodes, string bytes) */
    struct jv *nodes;
    char *strs;
    struct jslot *slots;
    size_t slotmask;
    const char *err; /* static message of the first syntax error */
    size_t errpos;
};

struct jdoc {
    void *mem; /* the arena: nodes, slots, strings */
    struct jv *root;
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
            if (P->end - P->p < 2)
                return jerr(P, "unterminated string");
            unsigned e = P->p[1], cp;
            P->p += 2;
            switch (e) {
            case '"': case '\\': case '/': cp = e; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                if (P->end - P->p < 4 || hex4(P->p, &cp) != 0)
                    return jerr(P, "bad \\u escape");
                P->p += 4;
                if (cp >= 0xdc00 && cp <= 0xdfff)
                    return jerr(P, "lone low surrogate");
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    unsigned lo;
                    if (P->end - P->p < 6 || P->p[0] != '\\' || P->p[1] != 'u' ||
                        hex4(P->p + 2, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
                        return jerr(P, "lone high surrogate");
                    P->p += 6;
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                if (cp == 0)
                    return jerr(P, "\\u0000 in string");
                break;
            default:
                return jerr(P, "bad escape");
            }
            unsigned char u[4];
            size_t k;
            if (cp < 0x80) {
                u[0] = (unsigned char)cp;
                k = 1;
            } else if (cp < 0x800) {
                u[0] = (unsigned char)(0xc0 | cp >> 6);
                u[1] = (unsigned char)(0x80 | (cp & 0x3f));
                k = 2;
            } else if (cp < 0x10000) {
                u[0] = (unsigned char)(0xe0 | cp >> 12);
                u[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
                u[2] = (unsigned char)(0x80 | (cp & 0x3f));
                k = 3;
            } else {
                u[0] = (unsigned char)(0xf0 | cp >> 18);
                u[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
                u[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
                u[3] = (unsigned char)(0x80 | (cp & 0x3f));
                k = 4;
            }
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

static int parse_number(struct jparser *P, struct jv *v)
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
        v->type = J_REAL;
        return 0;
    }
    v->type = J_INT;
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
static struct jv *new_node(struct jparser *P)
{
    struct jv *v = P->build ? &P->nodes[P->nnodes] : NULL;
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
static int key_insert(struct jparser *P, struct jv *obj, struct jv *m)
{
    uint32_t oi = (uint32_t)(obj - P->nodes), mi = (uint32_t)(m - P->nodes);
    for (size_t i = key_hash(oi, m->key, m->klen) & P->slotmask;; i = (i + 1) & P->slotmask) {
        struct jslot *s = &P->slots[i];
        if (s->node == 0) {
            s->obj = oi;
            s->node = mi + 1;
            return 0;
        }
        const struct jv *o = &P->nodes[s->node - 1];
        if (s->obj == oi && o->klen == m->klen && memcmp(o->key, m->key, m->klen) == 0)
            return -1;
    }
}

static int parse_value(struct jparser *P, struct jv *v);

static int parse_container(struct jparser *P, struct jv *v, int is_obj)
{
    unsigned char close = is_obj ? '}' : ']';
    struct jv *last = NULL;
    uint32_t n = 0;
    if (++P->depth > PROTO_MAX_DEPTH)
        return jerr(P, "nesting too deep");
    if (v != NULL) {
        v->type = is_obj ? J_OBJ : J_ARR;
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
        struct jv *c = new_node(P);
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

static int parse_one(struct jparser *P, struct jv *v)
{
    if (P->p >= P->end)
        return jerr(P, "unexpected end of input");
    switch (*P->p) {
    case '{': return parse_container(P, v, 1);
    case '[': return parse_container(P, v, 0);
    case '"':
        if (v != NULL)
            v->type = J_STR;
        return parse_string(P, v ? &v->u.str.s : NULL, v ? &v->u.str.n : NULL);
    case 't':
        if (v != NULL)
            v->type = J_TRUE;
        return parse_literal(P, "true", 4);
    case 'f':
        if (v != NULL)
            v->type = J_FALSE;
        return parse_literal(P, "false", 5);
    case 'n':
        if (v != NULL)
            v->type = J_NULL;
        return parse_literal(P, "null", 4);
    default:
        if (*P->p == '-' || (*P->p >= '0' && *P->p <= '9'))
            return parse_number(P, v);
        return jerr(P, "unexpected character");
    }
}

/* A value of any type; pass 2 also records its text span. */
static int parse_value(struct jparser *P, struct jv *v)
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
    struct jv *root = new_node(P);
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

/* Parse buf into doc (one allocation, freed with jdoc_free). Returns 0, PROTO_ETOOLONG,
 * PROTO_EJSON or PROTO_ENOMEM. */
static int jdoc_parse(const char *buf, size_t len, struct jdoc *doc, struct proto_err *err)
{
    doc->mem = NULL;
    doc->root = NULL;
    if (len > PROTO_MAX_INPUT)
        return proto_fail(err, PROTO_ETOOLONG, "", "message over PROTO_MAX_INPUT bytes");
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
    size_t nodebytes = nodes * sizeof(struct jv), slotbytes = nslots * sizeof(struct jslot);
    char *mem = malloc(nodebytes + slotbytes + nstr);
    if (mem == NULL)
        return proto_fail(err, PROTO_ENOMEM, "", "out of memory");
    memset(mem + nodebytes, 0, slotbytes);
    struct jparser Q = {0};
    Q.start = Q.p = P.start;
    Q.end = P.end;
    Q.build = 1;
    Q.nodes = (struct jv *)(void *)mem;
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

static void jdoc_free(struct jdoc *doc)
{
    free(doc->mem);
    doc->mem = NULL;
    doc->root = NULL;
}

static const struct jv *jget(const struct jv *obj, const char *key)
{
    if (obj == NULL || obj->type != J_OBJ)
        return NULL;
    size_t n = strlen(key);
    for (const struct jv *c = obj->u.kids.first; c != NULL; c = c->next)
        if (c->klen == n && memcmp(c->key, key, n) == 0)
            return c;
    return NULL;
}

/* The JSON text of v without whitespace between tokens (the reader validated it, so only
 * strings need care). Writes at most cap bytes to out (NULL: none, no NUL added) and returns
 * the full length. */
static size_t json_compact(const struct jv *v, char *out, size_t cap)
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
static int text_depth(const char *s, size_t n)
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

static int json_depth(const struct jv *v)
{
    return text_depth(v->raw, v->rawlen);
}

/* ---- field readers ----------------------------------------------------------------------- */

struct nctx {
    struct proto_err *err;
    const char *pfx; /* JSON path of the object being read, "" or "data." ... */
    int record;      /* decoding our own storage record: exact values, no defaults or flags */
};

static int nfail(const struct nctx *c, int code, const char *key, const char *msg)
{
    char field[64];
    snprintf(field, sizeof(field), "%s%s", c->pfx, key);
    return proto_fail(c->err, code, field, msg);
}

static char *mdup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Presence of an optional value: absent, JSON null, or a value. */
enum { F_ABSENT = 0, F_NULL, F_VALUE };

static int presence(const struct jv *v)
{
    return v == NULL ? F_ABSENT : v->type == J_NULL ? F_NULL : F_VALUE;
}

/* An integer field in [min, max]. Sets *pres; a required field must be a value. */
static int rd_int(const struct nctx *c, const struct jv *obj, const char *key, int required,
                  int64_t min, int64_t max, int64_t *out, int *pres)
{
    const struct jv *v = jget(obj, key);
    *pres = presence(v);
    if (*pres != F_VALUE) {
        if (!required)
            return 0;
        return *pres == F_ABSENT ? nfail(c, PROTO_EMISSING, key, "required")
                                 : nfail(c, PROTO_ETYPE, key, "null, expected an integer");
    }
    if (v->type != J_INT)
        return nfail(c, PROTO_ETYPE, key, "expected an integer");
    if (v->big || v->u.i < min || v->u.i > max)
        return nfail(c, PROTO_ERANGE, key, "integer out of range");
    *out = v->u.i;
    return 0;
}

/* A string field (or null/absent when optional); *s borrowed from the document. */
static int rd_str(const struct nctx *c, const struct jv *obj, const char *key, int required,
                  const struct jv **s, int *pres)
{
    const struct jv *v = jget(obj, key);
    *s = NULL;
    *pres = presence(v);
    if (*pres != F_VALUE) {
        if (!required)
            return 0;
        return *pres == F_ABSENT ? nfail(c, PROTO_EMISSING, key, "required")
                                 : nfail(c, PROTO_ETYPE, key, "null, expected a string");
    }
    if (v->type != J_STR)
        return nfail(c, PROTO_ETYPE, key, "expected a string");
    *s = v;
    return 0;
}

/* Records list every key, nullable ones too. */
static int need_key(const struct nctx *c, const struct jv *obj, const char *key)
{
    return c->record && jget(obj, key) == NULL ? nfail(c, PROTO_EMISSING, key, "required") : 0;
}

/* An enum-like token (status, reasons, deposit type): 1..PROTO_MAX_STATUS printable ASCII. */
static int check_token(const struct nctx *c, const char *key, const struct jv *s)
{
    if (s->u.str.n == 0)
        return nfail(c, PROTO_EVALUE, key, "empty");
    if (s->u.str.n > PROTO_MAX_STATUS)
        return nfail(c, PROTO_ETOOLONG, key, "longer than PROTO_MAX_STATUS");
    for (uint32_t i = 0; i < s->u.str.n; i++) {
        unsigned char ch = (unsigned char)s->u.str.s[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '"' || ch == '\\')
            return nfail(c, PROTO_EVALUE, key, "not a printable ASCII token");
    }
    return 0;
}

static int copy_str(const struct nctx *c, const char *key, const struct jv *s, char **out)
{
    if ((*out = mdup(s->u.str.s, s->u.str.n)) == NULL)
        return nfail(c, PROTO_ENOMEM, key, "out of memory");
    return 0;
}

/* An optional free-text string (referrer, addresses) of at most PROTO_MAX_STR bytes. */
static int rd_text(const struct nctx *c, const struct jv *obj, const char *key, int required,
                   char **out, int *pres)
{
    const struct jv *s;
    int rc = rd_str(c, obj, key, required, &s, pres);
    if (rc != 0 || *pres != F_VALUE)
        return rc;
    if (s->u.str.n > PROTO_MAX_STR)
        return nfail(c, PROTO_ETOOLONG, key, "longer than PROTO_MAX_STR");
    return copy_str(c, key, s, out);
}

static int valid_request_id(const struct nctx *c, const char *key, const char *s, size_t n)
{
    if (n > PROTO_MAX_ID)
        return nfail(c, PROTO_ETOOLONG, key, "request id longer than PROTO_MAX_ID");
    if (!proto_request_id_valid(s, n))
        return nfail(c, PROTO_EVALUE, key, "request id: 1..128 chars of [A-Za-z0-9_:.-]");
    return 0;
}

static int valid_hash(const struct nctx *c, const char *key, const struct jv *s)
{
    if (s->u.str.n > PROTO_MAX_HASH)
        return nfail(c, PROTO_ETOOLONG, key, "hash longer than PROTO_MAX_HASH");
    if (!proto_hash_valid(s->u.str.s, s->u.str.n))
        return nfail(c, PROTO_EVALUE, key, "hash: printable ASCII without space/quote/backslash");
    return 0;
}

/* Collects hashes in order, dropping duplicates; PROTO_MAX_HASHES at most. */
struct hashlist {
    const struct jv *h[PROTO_MAX_HASHES];
    size_t n;
};

static int hashlist_add(const struct nctx *c, const char *key, struct hashlist *hl,
                        const struct jv *s)
{
    int rc = valid_hash(c, key, s);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < hl->n; i++)
        if (hl->h[i]->u.str.n == s->u.str.n &&
            memcmp(hl->h[i]->u.str.s, s->u.str.s, s->u.str.n) == 0)
            return 0;
    if (hl->n == PROTO_MAX_HASHES)
        return nfail(c, PROTO_ETOOLONG, key, "more than PROTO_MAX_HASHES hashes");
    hl->h[hl->n++] = s;
    return 0;
}

static int hashlist_store(const struct nctx *c, const char *key, const struct hashlist *hl,
                          struct proto_strv *sv)
{
    if (hl->n == 0)
        return 0;
    if ((sv->v = calloc(hl->n, sizeof(*sv->v))) == NULL)
        return nfail(c, PROTO_ENOMEM, key, "out of memory");
    for (; sv->n < hl->n; sv->n++) {
        int rc = copy_str(c, key, hl->h[sv->n], &sv->v[sv->n]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* "inTxHashes" / "txHashes": an array of hash strings. */
static int rd_hashes(const struct nctx *c, const struct jv *obj, const char *key, int required,
                     struct proto_strv *sv, int *pres)
{
    const struct jv *a = jget(obj, key);
    struct hashlist hl;
    *pres = presence(a);
    if (*pres != F_VALUE) {
        if (required || (*pres == F_NULL && c->record))
            return nfail(c, *pres == F_ABSENT ? PROTO_EMISSING : PROTO_ETYPE, key,
                         "expected an array of hashes");
        *pres = F_ABSENT; /* null lists add nothing: treated as absent */
        return 0;
    }
    if (a->type != J_ARR)
        return nfail(c, PROTO_ETYPE, key, "expected an array");
    if (a->u.kids.n > PROTO_MAX_HASHES)
        return nfail(c, PROTO_ETOOLONG, key, "more than PROTO_MAX_HASHES hashes");
    hl.n = 0;
    for (const struct jv *h = a->u.kids.first; h != NULL; h = h->next) {
        if (h->type != J_STR)
            return nfail(c, PROTO_ETYPE, key, "expected an array of strings");
        int rc = hashlist_add(c, key, &hl, h);
        if (rc != 0)
            return rc;
    }
    return hashlist_store(c, key, &hl, sv);
}

/* failReason / refundFailReason. Upstream: absent/null/"" -> "N/A". Record: null -> NULL. */
static int rd_reason(const struct nctx *c, const struct jv *obj, const char *key, char **out,
                     int *pres)
{
    const struct jv *s;
    int rc;
    if ((rc = need_key(c, obj, key)) != 0 || (rc = rd_str(c, obj, key, 0, &s, pres)) != 0)
        return rc;
    if (s != NULL && s->u.str.n == 0 && !c->record)
        s = NULL;
    if (s == NULL) {
        if (c->record)
            return 0;
        if ((*out = mdup("N/A", 3)) == NULL)
            return nfail(c, PROTO_ENOMEM, key, "out of memory");
        return 0;
    }
    if ((rc = check_token(c, key, s)) != 0)
        return rc;
    return copy_str(c, key, s, out);
}

static int rd_deposit(const struct nctx *c, const struct jv *obj, const char *key, int required,
                      struct proto_deposit **out, int *pres)
{
    const struct jv *d = jget(obj, key);
    *pres = presence(d);
    if (*pres != F_VALUE)
        return required && *pres == F_ABSENT ? nfail(c, PROTO_EMISSING, key, "required") : 0;
    if (d->type != J_OBJ)
        return nfail(c, PROTO_ETYPE, key, "expected an object or null");
    char pfx[64];
    snprintf(pfx, sizeof(pfx), "%s%s.", c->pfx, key);
    struct nctx dc = {c->err, pfx, c->record};
    struct proto_deposit *dep = calloc(1, sizeof(*dep));
    if (dep == NULL)
        return nfail(c, PROTO_ENOMEM, key, "out of memory");
    *out = dep; /* owned by the event from here: cleaned with it on failure */
    const struct jv *s;
    int p, rc;
    if ((rc = rd_text(&dc, d, "address", 0, &dep->address, &p)) != 0 ||
        (rc = rd_text(&dc, d, "depositor", 0, &dep->depositor, &p)) != 0)
        return rc;
    /* "depositAddressType" in webhook/websocket events, "type" in /requests/v3 */
    const char *tkey = jget(d, "depositAddressType") != NULL ? "depositAddressType" : "type";
    if ((rc = rd_str(&dc, d, tkey, 0, &s, &p)) != 0)
        return rc;
    if (s != NULL && ((rc = check_token(&dc, tkey, s)) != 0 ||
                      (rc = copy_str(&dc, tkey, s, &dep->type)) != 0))
        return rc;
    if ((rc = rd_str(&dc, d, "depositTxHash", 0, &s, &p)) != 0)
        return rc;
    if (s != NULL && ((rc = valid_hash(&dc, "depositTxHash", s)) != 0 ||
                      (rc = copy_str(&dc, "depositTxHash", s, &dep->deposit_tx_hash)) != 0))
        return rc;
    return 0;
}

/* details: any JSON value. A string is free text; any other type is kept as its compact
 * JSON text (PROTO_HAS_DETAILS_JSON), or as a plain string of that text when nested deeper
 * than PROTO_MAX_JSON_DEPTH. Upstream values over PROTO_MAX_STR are cut at a UTF-8 boundary
 * and flagged (a cut JSON text is kept as a plain string); a record's are refused. */
static int rd_details(const struct nctx *c, const struct jv *obj, struct status_event *ev,
                      int *pres)
{
    const struct jv *v = jget(obj, "details");
    int rc;
    if ((rc = need_key(c, obj, "details")) != 0)
        return rc;
    *pres = presence(v);
    if (*pres != F_VALUE)
        return 0;
    int json = v->type != J_STR;
    size_t n = json ? json_compact(v, NULL, 0) : v->u.str.n;
    if (n > PROTO_MAX_STR && c->record)
        return nfail(c, PROTO_ETOOLONG, "details", "longer than PROTO_MAX_STR");
    size_t keep = n > PROTO_MAX_STR ? PROTO_MAX_STR + 1 : n; /* + the byte after a cut */
    char *d = malloc(keep + 1);
    if (d == NULL)
        return nfail(c, PROTO_ENOMEM, "details", "out of memory");
    if (json)
        json_compact(v, d, keep);
    else
        memcpy(d, v->u.str.s, keep);
    if (n > PROTO_MAX_STR) {
        keep = PROTO_MAX_STR;
        while (keep > 0 && ((unsigned char)d[keep] & 0xc0) == 0x80)
            keep--;
        ev->flags |= PROTO_F_DETAILS_TRUNCATED;
        json = 0;
    }
    if (json && json_depth(v) > PROTO_MAX_JSON_DEPTH)
        json = 0;
    d[keep] = '\0';
    ev->details = d;
    if (json)
        ev->flags |= PROTO_HAS_DETAILS_JSON;
    return 0;
}

static int rd_status(const struct nctx *c, const struct jv *obj, struct status_event *ev)
{
    const struct jv *s;
    int p, rc;
    if ((rc = rd_str(c, obj, "status", 1, &s, &p)) != 0 ||
        (rc = check_token(c, "status", s)) != 0 ||
        (rc = copy_str(c, "status", s, &ev->status)) != 0)
        return rc;
    ev->st = proto_status_parse(ev->status);
    return 0;
}

/* Flags derived from values (upstream sources; a record carries its own). */
static void set_value_flags(struct status_event *ev)
{
    if (ev->st == PROTO_ST_OTHER)
        ev->flags |= PROTO_F_UNKNOWN_STATUS;
    if (!proto_fail_reason_known(ev->fail_reason))
        ev->flags |= PROTO_F_UNKNOWN_FAIL_REASON;
    if (!proto_refund_reason_known(ev->refund_fail_reason))
        ev->flags |= PROTO_F_UNKNOWN_REFUND_REASON;
}

/* The shared payload of websocket events, upstream webhooks, status v3 bodies and records.
 * request_id: the caller's id (status v3) or NULL to read "requestId". */
static int parse_payload(const struct nctx *c, const struct jv *d, const char *request_id,
                         struct status_event *ev)
{
    int rc, p, p2;
    int64_t v;
    const struct jv *s;
    int rec = c->record;
    int64_t chain_min = rec ? 0 : 1;

    if (request_id != NULL) {
        if ((rc = valid_request_id(c, "requestId", request_id, strlen(request_id))) != 0)
            return rc;
        if ((ev->request_id = mdup(request_id, strlen(request_id))) == NULL)
            return nfail(c, PROTO_ENOMEM, "requestId", "out of memory");
    } else if ((rc = rd_str(c, d, "requestId", 1, &s, &p)) != 0 ||
               (rc = valid_request_id(c, "requestId", s->u.str.s, s->u.str.n)) != 0 ||
               (rc = copy_str(c, "requestId", s, &ev->request_id)) != 0) {
        return rc;
    }
    if ((rc = rd_status(c, d, ev)) != 0 ||
        (rc = rd_int(c, d, "updatedAt", 1, 1, PROTO_MAX_TS, &ev->updated_at, &p)) != 0 ||
        (rc = rd_int(c, d, "originChainId", rec, chain_min, PROTO_MAX_CHAIN_ID,
                     &ev->origin_chain_id, &p)) != 0 ||
        (rc = rd_int(c, d, "destinationChainId", rec, chain_min, PROTO_MAX_CHAIN_ID,
                     &ev->destination_chain_id, &p)) != 0)
        return rc;
    if ((rc = rd_hashes(c, d, "inTxHashes", rec, &ev->in_tx_hashes, &p)) != 0)
        return rc;
    if (p == F_VALUE && !rec)
        ev->flags |= PROTO_HAS_IN_TXS;
    if ((rc = rd_hashes(c, d, "txHashes", rec, &ev->tx_hashes, &p)) != 0)
        return rc;
    if (p == F_VALUE && !rec)
        ev->flags |= PROTO_HAS_OUT_TXS;
    if ((rc = rd_reason(c, d, "failReason", &ev->fail_reason, &p)) != 0 ||
        (rc = rd_reason(c, d, "refundFailReason", &ev->refund_fail_reason, &p2)) != 0)
        return rc;
    if ((p != F_ABSENT || p2 != F_ABSENT) && !rec)
        ev->flags |= PROTO_HAS_REASONS;
    if ((rc = rd_details(c, d, ev, &p)) != 0)
        return rc;
    if (p != F_ABSENT && !rec)
        ev->flags |= PROTO_HAS_DETAILS;
    if ((rc = need_key(c, d, "referrer")) != 0 ||
        (rc = rd_text(c, d, "referrer", 0, &ev->referrer, &p)) != 0)
        return rc;
    if (p != F_ABSENT && !rec)
        ev->flags |= PROTO_HAS_REFERRER;
    if ((rc = rd_deposit(c, d, "depositAddress", rec, &ev->deposit, &p)) != 0)
        return rc;
    if (p != F_ABSENT && !rec)
        ev->flags |= PROTO_HAS_DEPOSIT;
    v = 0;
    if ((rc = rd_int(c, d, "quoteCreatedAt", rec, rec ? 0 : 1, PROTO_MAX_TS, &v, &p)) != 0)
        return rc;
    ev->quote_created_at = v;
    if (p != F_ABSENT && !rec)
        ev->flags |= PROTO_HAS_QUOTE_CREATED;
    if (!rec)
        set_value_flags(ev);
    return 0;
}

/* ---- entry points ------------------------------------------------------------------------ */

static const char event_name[] = "request.status.updated";

/* "event" of an event envelope: must be request.status.updated. */
static int check_event_name(const struct nctx *c, const struct jv *v, const char *key)
{
    if (v == NULL)
        return nfail(c, PROTO_EMISSING, key, "required");
    if (v->type != J_STR)
        return nfail(c, PROTO_ETYPE, key, "expected a string");
    if (v->u.str.n != sizeof(event_name) - 1 || memcmp(v->u.str.s, event_name, v->u.str.n) != 0)
        return nfail(c, PROTO_EEVENT, key, "not request.status.updated");
    return 0;
}

static int is_str(const struct jv *v, const char *s)
{
    return v != NULL && v->type == J_STR && v->u.str.n == strlen(s) &&
           memcmp(v->u.str.s, s, v->u.str.n) == 0;
}

/* Copy a control-frame string into a fixed buffer (truncated; "" when not a string). */
static void copy_ctl(char *dst, size_t size, const struct jv *v)
{
    dst[0] = '\0';
    if (v != NULL && v->type == J_STR)
        snprintf(dst, size, "%s", v->u.str.s);
}

static int ws_control(const struct jv *root, const struct jv *type, struct proto_ws_msg *msg)
{
    const struct jv *status = jget(root, "status"), *data = jget(root, "data");
    const struct jv *fid = jget(jget(data, "filters"), "id");
    struct proto_ws_msg m;
    memset(&m, 0, sizeof(m));
    m.kind = PROTO_WS_CONTROL;
    copy_ctl(m.ctl_status, sizeof(m.ctl_status), status);
    if (is_str(type, "connection") && is_str(status, "ready")) {
        m.kind = PROTO_WS_READY;
        copy_ctl(m.ctl_id, sizeof(m.ctl_id), jget(data, "id"));
    } else {
        if (is_str(type, "subscribe") && is_str(status, "success"))
            m.kind = PROTO_WS_SUB_ACK;
        else if (is_str(type, "unsubscribe") && is_str(status, "success"))
            m.kind = PROTO_WS_UNSUB_ACK;
        /* the echoed request id, only when it is a valid one */
        if (fid != NULL && fid->type == J_STR && proto_request_id_valid(fid->u.str.s, fid->u.str.n))
            memcpy(m.ctl_id, fid->u.str.s, fid->u.str.n + 1);
    }
    if (msg != NULL)
        *msg = m;
    return 0;
}

/* Common tail: published_at from an optional integer field. */
static int rd_published(const struct nctx *c, const struct jv *obj, const char *key,
                        struct status_event *ev)
{
    int p;
    return rd_int(c, obj, key, 0, 1, PROTO_MAX_TS, &ev->published_at, &p);
}

int proto_normalize_ws(const char *buf, size_t len, int64_t observed_at,
                       struct proto_ws_msg *msg, struct status_event *out,
                       struct proto_err *err)
{
    struct jdoc doc;
    struct nctx c = {err, "", 0};
    int rc, control = 0;
    status_event_init(out);
    if (msg != NULL)
        memset(msg, 0, sizeof(*msg)); /* kind = PROTO_WS_EVENT */
    if ((rc = jdoc_parse(buf, len, &doc, err)) != 0)
        return rc;
    const struct jv *root = doc.root, *data, *type;
    if (root->type != J_OBJ) {
        rc = nfail(&c, PROTO_ETYPE, "", "expected an object");
        goto out;
    }
    data = jget(root, "data");
    type = jget(root, "type");
    if (type != NULL && type->type != J_NULL && type->type != J_STR) {
        rc = nfail(&c, PROTO_ETYPE, "type", "expected a string");
        goto out;
    }
    /* acks carry data.event too: recognise control frames first (as the SDK does) */
    if (is_str(type, "connection") || is_str(type, "subscribe") || is_str(type, "unsubscribe")) {
        control = 1;
        rc = ws_control(root, type, msg);
        goto out;
    }
    out->source = PROTO_SRC_WS;
    out->observed_at = observed_at;
    if (jget(root, "event") != NULL) { /* envelope A */
        if ((rc = check_event_name(&c, jget(root, "event"), "event")) != 0)
            goto out;
        if (data == NULL || data->type != J_OBJ) {
            rc = nfail(&c, data == NULL ? PROTO_EMISSING : PROTO_ETYPE, "data",
                       "expected an object");
            goto out;
        }
        c.pfx = "data.";
        if ((rc = parse_payload(&c, data, NULL, out)) != 0)
            goto out;
        c.pfx = "";
        rc = rd_published(&c, root, "publishedAt", out);
    } else if (data != NULL && data->type == J_OBJ && jget(data, "event") != NULL) { /* B */
        const struct jv *inner = jget(data, "data");
        if ((rc = check_event_name(&c, jget(data, "event"), "data.event")) != 0)
            goto out;
        if (inner == NULL || inner->type != J_OBJ) {
            rc = nfail(&c, inner == NULL ? PROTO_EMISSING : PROTO_ETYPE, "data.data",
                       "expected an object");
            goto out;
        }
        c.pfx = "data.data.";
        if ((rc = parse_payload(&c, inner, NULL, out)) != 0)
            goto out;
        c.pfx = "";
        if (jget(root, "publishedAt") != NULL) {
            rc = rd_published(&c, root, "publishedAt", out);
        } else {
            c.pfx = "data.";
            rc = rd_published(&c, data, "publishedAt", out);
        }
    } else if (type != NULL && type->type == J_STR) {
        control = 1;
        rc = ws_control(root, type, msg); /* an undocumented control frame (error, nack...) */
    } else {
        rc = nfail(&c, PROTO_EMISSING, "event", "neither an event nor a control frame");
    }
out:
    if (rc != 0 || control)
        status_event_cleanup(out); /* control frames leave *out empty */
    jdoc_free(&doc);
    return rc;
}

int proto_normalize_status_v3(const char *buf, size_t len, const char *request_id,
                              int64_t observed_at, struct status_event *out,
                              struct proto_err *err)
{
    struct jdoc doc;
    struct nctx c = {err, "", 0};
    int rc;
    status_event_init(out);
    if (request_id == NULL)
        return proto_fail(err, PROTO_EMISSING, "requestId", "the caller must give the id");
    if ((rc = jdoc_parse(buf, len, &doc, err)) != 0)
        return rc;
    if (doc.root->type != J_OBJ) {
        rc = nfail(&c, PROTO_ETYPE, "", "expected an object");
    } else {
        out->source = PROTO_SRC_POLL;
        out->observed_at = observed_at;
        rc = parse_payload(&c, doc.root, request_id, out);
    }
    if (rc != 0)
        status_event_cleanup(out);
    jdoc_free(&doc);
    return rc;
}

int proto_normalize_webhook(const char *buf, size_t len, int64_t observed_at,
                            struct status_event *out, struct proto_err *err)
{
    struct jdoc doc;
    struct nctx c = {err, "", 0};
    int rc;
    status_event_init(out);
    if ((rc = jdoc_parse(buf, len, &doc, err)) != 0)
        return rc;
    const struct jv *root = doc.root, *data = jget(root, "data");
    if (root->type != J_OBJ) {
        rc = nfail(&c, PROTO_ETYPE, "", "expected an object");
        goto out;
    }
    if ((rc = check_event_name(&c, jget(root, "event"), "event")) != 0)
        goto out;
    if (data == NULL || data->type != J_OBJ) {
        rc = nfail(&c, data == NULL ? PROTO_EMISSING : PROTO_ETYPE, "data", "expected an object");
        goto out;
    }
    out->source = PROTO_SRC_WEBHOOK;
    out->observed_at = observed_at;
    c.pfx = "data.";
    if ((rc = parse_payload(&c, data, NULL, out)) != 0)
        goto out;
    c.pfx = "";
    rc = rd_published(&c, root, "timestamp", out);
out:
    if (rc != 0)
        status_event_cleanup(out);
    jdoc_free(&doc);
    return rc;
}

/* ---- /requests/v3 ------------------------------------------------------------------------ */

/* Follow a path of object keys; NULL if any step is missing or not an object. */
static const struct jv *jpath(const struct jv *v, const char *const *keys)
{
    for (; v != NULL && *keys != NULL; keys++)
        v = jget(v, *keys);
    return v;
}

/* A chain id at the end of a path, or 0 when absent or not a valid chain id (derived values
 * are best effort: the first valid candidate wins). */
static int64_t chain_at(const struct jv *v)
{
    if (v == NULL || v->type != J_INT || v->big || v->u.i < 1 || v->u.i > PROTO_MAX_CHAIN_ID)
        return 0;
    return v->u.i;
}

static int64_t route_chain(const struct jv *side, const char *first, const char *second)
{
    const char *const a[] = {first, "currency", "chainId", NULL};
    const char *const b[] = {second, "currency", "chainId", NULL};
    int64_t id = chain_at(jpath(side, a));
    return id != 0 ? id : chain_at(jpath(side, b));
}

/* data.inTxs / data.outTxs: hashes from each item's txHash, first valid chainId in *chain. */
static int rd_txs(const struct nctx *c, const struct jv *data, const char *key,
                  struct proto_strv *sv, int64_t *chain, int *pres)
{
    const struct jv *a = jget(data, key);
    struct hashlist hl;
    *pres = presence(a);
    if (*pres != F_VALUE)
        return 0;
    if (a->type != J_ARR)
        return nfail(c, PROTO_ETYPE, key, "expected an array");
    if (a->u.kids.n > PROTO_MAX_HASHES)
        return nfail(c, PROTO_ETOOLONG, key, "more than PROTO_MAX_HASHES transactions");
    hl.n = 0;
    for (const struct jv *t = a->u.kids.first; t != NULL; t = t->next) {
        const struct jv *h = jget(t, "txHash");
        int rc;
        if (t->type != J_OBJ)
            return nfail(c, PROTO_ETYPE, key, "expected an array of objects");
        if (presence(h) == F_VALUE && h->type != J_STR)
            return nfail(c, PROTO_ETYPE, key, "txHash: expected a string");
        if (presence(h) == F_VALUE && (rc = hashlist_add(c, key, &hl, h)) != 0)
            return rc;
        if (*chain == 0)
            *chain = chain_at(jget(t, "chainId"));
    }
    return hashlist_store(c, key, &hl, sv);
}

/* The compact JSON text of v, or null when v is NULL, at out + n (out NULL: count only).
 * Returns the new length. */
static size_t put_json(char *out, size_t n, const struct jv *v)
{
    if (v == NULL) {
        if (out != NULL)
            memcpy(out + n, "null", 4);
        return n + 4;
    }
    return n + json_compact(v, out != NULL ? out + n : NULL, SIZE_MAX);
}

static size_t put_lit(char *out, size_t n, const char *s)
{
    size_t k = strlen(s);
    if (out != NULL)
        memcpy(out + n, s, k);
    return n + k;
}

/* {"inTxs":[{"txHash","chainId","status"},...],"metadata":<reorg>|null} (event.h) into out
 * (NULL: count only); returns its length. inTxs may be NULL. */
static size_t reorg_text(const struct jv *in_txs, const struct jv *reorg, char *out)
{
    size_t n = put_lit(out, 0, "{\"inTxs\":[");
    for (const struct jv *t = in_txs != NULL ? in_txs->u.kids.first : NULL; t; t = t->next) {
        n = put_lit(out, n, t == in_txs->u.kids.first ? "{\"txHash\":" : ",{\"txHash\":");
        n = put_json(out, n, jget(t, "txHash"));
        n = put_lit(out, n, ",\"chainId\":");
        n = put_json(out, n, jget(t, "chainId"));
        n = put_lit(out, n, ",\"status\":");
        n = put_json(out, n, jget(t, "status"));
        n = put_lit(out, n, "}");
    }
    n = put_lit(out, n, "],\"metadata\":");
    n = put_json(out, n, reorg);
    return put_lit(out, n, "}");
}

/* Reorg details of a /requests/v3 item: set (with PROTO_HAS_REORG) when an inTx has a status
 * other than "success" (a deposit reorged out) or a "metadata":{"reorg":{...}} object is
 * present at the item's top level or under "data" (the top level wins). Best effort: nothing
 * here rejects the item, and details over PROTO_MAX_REORG bytes or nested deeper than
 * PROTO_MAX_JSON_DEPTH are dropped. */
static int rd_reorg(const struct nctx *c, const struct jv *it, const struct jv *data,
                    struct status_event *ev)
{
    const struct jv *in_txs = jget(data, "inTxs");
    const struct jv *reorg = jget(jget(it, "metadata"), "reorg");
    if (reorg == NULL || reorg->type != J_OBJ)
        reorg = jget(jget(data, "metadata"), "reorg");
    if (reorg != NULL && reorg->type != J_OBJ)
        reorg = NULL;
    if (in_txs != NULL && in_txs->type != J_ARR)
        in_txs = NULL;
    int found = reorg != NULL;
    for (const struct jv *t = in_txs != NULL ? in_txs->u.kids.first : NULL; t; t = t->next) {
        const struct jv *st = jget(t, "status");
        if (presence(st) == F_VALUE && !is_str(st, "success"))
            found = 1;
    }
    if (!found)
        return 0;
    size_t n = reorg_text(in_txs, reorg, NULL);
    if (n > PROTO_MAX_REORG)
        return 0;
    char *text = malloc(n + 1);
    if (text == NULL)
        return nfail(c, PROTO_ENOMEM, "metadata", "out of memory");
    reorg_text(in_txs, reorg, text);
    text[n] = '\0';
    if (text_depth(text, n) > PROTO_MAX_JSON_DEPTH) {
        free(text);
        return 0;
    }
    ev->reorg = text;
    ev->flags |= PROTO_HAS_REORG;
    return 0;
}

#define BITCOIN_CHAIN_ID 8253038 /* service-assigned (upstream-protocol.md) */

/* A mempool-only Bitcoin deposit: an inTx on the origin chain, none of them with a block
 * (absent, null or 0). */
static int deposit_unconfirmed(const struct jv *in_txs, int64_t origin)
{
    int seen = 0;
    if (in_txs == NULL || in_txs->type != J_ARR)
        return 0;
    for (const struct jv *t = in_txs->u.kids.first; t != NULL; t = t->next) {
        if (chain_at(jget(t, "chainId")) != origin)
            continue;
        const struct jv *b = jget(t, "block");
        if (presence(b) == F_VALUE && !(b->type == J_INT && b->u.i == 0 && !b->big))
            return 0;
        seen = 1;
    }
    return seen;
}

static int requests_item(const char *pfx, const struct jv *it, int64_t observed_at,
                         struct status_event *ev, struct proto_err *err)
{
    struct nctx c = {err, pfx, 0};
    const struct jv *s, *data;
    int p, p2, rc;
    int64_t in_chain = 0, out_chain = 0;
    char dpfx[64];

    ev->source = PROTO_SRC_REQUESTS;
    ev->observed_at = observed_at;
    if (it->type != J_OBJ)
        return nfail(&c, PROTO_ETYPE, "", "expected an object");
    if ((rc = rd_str(&c, it, "id", 1, &s, &p)) != 0 ||
        (rc = valid_request_id(&c, "id", s->u.str.s, s->u.str.n)) != 0 ||
        (rc = copy_str(&c, "id", s, &ev->request_id)) != 0 || (rc = rd_status(&c, it, ev)) != 0)
        return rc;
    if ((rc = rd_str(&c, it, "updatedAt", 1, &s, &p)) != 0)
        return rc;
    if (proto_iso8601_ms(s->u.str.s, &ev->updated_at) != 0)
        return nfail(&c, PROTO_EVALUE, "updatedAt", "not an ISO-8601 timestamp");
    if (ev->updated_at < 1 || ev->updated_at > PROTO_MAX_TS)
        return nfail(&c, PROTO_ERANGE, "updatedAt", "timestamp out of range");
    if ((rc = rd_str(&c, it, "createdAt", 0, &s, &p)) != 0)
        return rc;
    if (s != NULL) {
        if (proto_iso8601_ms(s->u.str.s, &ev->quote_created_at) != 0)
            return nfail(&c, PROTO_EVALUE, "createdAt", "not an ISO-8601 timestamp");
        if (ev->quote_created_at < 1 || ev->quote_created_at > PROTO_MAX_TS)
            return nfail(&c, PROTO_ERANGE, "createdAt", "timestamp out of range");
        ev->flags |= PROTO_HAS_QUOTE_CREATED;
    }
    if ((rc = rd_deposit(&c, it, "depositAddress", 0, &ev->deposit, &p)) != 0)
        return rc;
    if (p != F_ABSENT)
        ev->flags |= PROTO_HAS_DEPOSIT;

    data = jget(it, "data");
    if (presence(data) == F_VALUE && data->type != J_OBJ)
        return nfail(&c, PROTO_ETYPE, "data", "expected an object");
    if (presence(data) != F_VALUE)
        data = NULL;
    snprintf(dpfx, sizeof(dpfx), "%sdata.", pfx);
    struct nctx dc = {err, dpfx, 0};
    if ((rc = rd_reason(&dc, data, "failReason", &ev->fail_reason, &p)) != 0 ||
        (rc = rd_reason(&dc, data, "refundFailReason", &ev->refund_fail_reason, &p2)) != 0)
        return rc;
    if (p != F_ABSENT || p2 != F_ABSENT)
        ev->flags |= PROTO_HAS_REASONS;
    if ((rc = rd_text(&dc, data, "referrer", 0, &ev->referrer, &p)) != 0)
        return rc;
    if (p != F_ABSENT)
        ev->flags |= PROTO_HAS_REFERRER;
    if ((rc = rd_txs(&dc, data, "inTxs", &ev->in_tx_hashes, &in_chain, &p)) != 0)
        return rc;
    if (p == F_VALUE)
        ev->flags |= PROTO_HAS_IN_TXS;
    if ((rc = rd_txs(&dc, data, "outTxs", &ev->tx_hashes, &out_chain, &p)) != 0)
        return rc;
    if (p == F_VALUE)
        ev->flags |= PROTO_HAS_OUT_TXS;

    /* chain ids: the quoted route, else the transactions; same-chain swaps have no
     * destination side (docs: "fall back to origin.outputCurrency") */
    const char *const qo[] = {"route", "quoted", "origin", NULL};
    const char *const qd[] = {"route", "quoted", "destination", NULL};
    const struct jv *origin = jpath(data, qo), *dest = jpath(data, qd);
    ev->origin_chain_id = route_chain(origin, "inputCurrency", "outputCurrency");
    ev->destination_chain_id = route_chain(dest, "outputCurrency", "inputCurrency");
    if (ev->origin_chain_id == 0)
        ev->origin_chain_id = in_chain;
    if (ev->destination_chain_id == 0 && (dest == NULL || dest->type != J_OBJ) && origin != NULL)
        ev->destination_chain_id = route_chain(origin, "outputCurrency", "inputCurrency");
    if (ev->destination_chain_id == 0)
        ev->destination_chain_id = out_chain;
    if (ev->origin_chain_id == BITCOIN_CHAIN_ID && ev->st == PROTO_ST_PENDING &&
        deposit_unconfirmed(jget(data, "inTxs"), ev->origin_chain_id))
        ev->flags |= PROTO_F_UNCONFIRMED_DEPOSIT;
    if ((rc = rd_reorg(&dc, it, data, ev)) != 0)
        return rc;
    set_value_flags(ev);
    return 0;
}

int proto_normalize_requests_item(const char *buf, size_t len, int64_t observed_at,
                                  struct status_event *out, struct proto_err *err)
{
    struct jdoc doc;
    int rc;
    status_event_init(out);
    if ((rc = jdoc_parse(buf, len, &doc, err)) != 0)
        return rc;
    if ((rc = requests_item("", doc.root, observed_at, out, err)) != 0)
        status_event_cleanup(out);
    jdoc_free(&doc);
    return rc;
}

int proto_normalize_requests_page(const char *buf, size_t len, int64_t observed_at,
                                  proto_requests_item_cb *cb, void *arg, char **continuation,
                                  struct proto_err *err)
{
    struct jdoc doc;
    struct nctx c = {err, "", 0};
    int rc, p;
    char *cont = NULL, *unused;
    if (continuation == NULL)
        continuation = &unused;
    *continuation = NULL;
    if ((rc = jdoc_parse(buf, len, &doc, err)) != 0)
        return rc;
    const struct jv *root = doc.root, *reqs = jget(root, "requests"), *cs;
    if (root->type != J_OBJ) {
        rc = nfail(&c, PROTO_ETYPE, "", "expected an object");
        goto out;
    }
    if (reqs == NULL || reqs->type != J_ARR) {
        rc = nfail(&c, reqs == NULL ? PROTO_EMISSING : PROTO_ETYPE, "requests",
                   "expected an array");
        goto out;
    }
    if ((rc = rd_str(&c, root, "continuation", 0, &cs, &p)) != 0)
        goto out;
    if (cs != NULL && cs->u.str.n > 0 && (cont = mdup(cs->u.str.s, cs->u.str.n)) == NULL) {
        rc = nfail(&c, PROTO_ENOMEM, "continuation", "out of memory");
        goto out;
    }
    size_t i = 0;
    for (const struct jv *it = reqs->u.kids.first; it != NULL; it = it->next, i++) {
        struct status_event ev;
        struct proto_err ierr = {0};
        char pfx[32];
        snprintf(pfx, sizeof(pfx), "requests[%zu].", i);
        status_event_init(&ev);
        int irc = requests_item(pfx, it, observed_at, &ev, &ierr);
        if (irc != 0)
            status_event_cleanup(&ev);
        if (irc == PROTO_ENOMEM) { /* stop: the caller retries the page */
            rc = proto_fail(err, PROTO_ENOMEM, ierr.field, ierr.msg);
            goto out;
        }
        if (cb != NULL)
            cb(arg, irc, &ev, &ierr);
        status_event_cleanup(&ev);
    }
    if (continuation != &unused) {
        *continuation = cont;
        cont = NULL;
    }
out:
    free(cont);
    jdoc_free(&doc);
    return rc;
}

/* ---- ISO-8601 ---------------------------------------------------------------------------- */

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

int proto_iso8601_ms(const char *s, int64_t *out)
{
    static const unsigned char mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int Y, M, D, h, m, sec, ms = 0, off = 0;
    if (s == NULL || strlen(s) < 20)
        return PROTO_EVALUE;
    if (digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' ||
        digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &m) || s[16] != ':' ||
        digits(s + 17, 2, &sec))
        return PROTO_EVALUE;
    int leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
    if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] + (M == 2 && leap) || h > 23 || m > 59 ||
        sec > 59)
        return PROTO_EVALUE;
    const char *p = s + 19;
    if (*p == '.') {
        int n = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, n++)
            if (n < 3)
                ms = ms * 10 + (*p - '0');
        if (n == 0 || n > 9)
            return PROTO_EVALUE;
        for (; n < 3; n++)
            ms *= 10;
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, sign = *p == '-' ? -1 : 1;
        if (digits(p + 1, 2, &oh) != 0)
            return PROTO_EVALUE;
        p += 3;
        if (*p == ':')
            p++;
        if (digits(p, 2, &om) != 0 || oh > 23 || om > 59)
            return PROTO_EVALUE;
        p += 2;
        off = sign * (oh * 60 + om);
    } else {
        return PROTO_EVALUE; /* a zone is required: no guessing local time */
    }
    if (*p != '\0')
        return PROTO_EVALUE;
    int64_t days = days_from_civil(Y, (unsigned)M, (unsigned)D);
    *out = (((days * 24 + h) * 60 + m - off) * 60 + sec) * 1000 + ms;
    return 0;
}

/* ---- storage record ---------------------------------------------------------------------- */

static int rd_event_id(const struct nctx *c, const struct jv *obj, struct status_event *ev)
{
    const struct jv *s;
    int p, rc;
    if ((rc = rd_str(c, obj, "eventId", 1, &s, &p)) != 0)
        return rc;
    if (s->u.str.n >= PROTO_EVENT_ID_MAX)
        return nfail(c, PROTO_ETOOLONG, "eventId", "too long");
    for (uint32_t i = 0; i < s->u.str.n; i++) {
        char ch = s->u.str.s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_'))
            return nfail(c, PROTO_EVALUE, "eventId", "bad character");
    }
    memcpy(ev->event_id, s->u.str.s, s->u.str.n + 1);
    return 0;
}

/* "reorg": optional (older records have none), an object or null. */
static int rd_record_reorg(const struct nctx *c, const struct jv *r, struct status_event *ev)
{
    if (presence(r) != F_VALUE)
        return 0;
    if (r->type != J_OBJ)
        return nfail(c, PROTO_ETYPE, "reorg", "expected an object or null");
    size_t n = json_compact(r, NULL, 0);
    if (n > PROTO_MAX_REORG)
        return nfail(c, PROTO_ETOOLONG, "reorg", "longer than PROTO_MAX_REORG");
    if (json_depth(r) > PROTO_MAX_JSON_DEPTH)
        return nfail(c, PROTO_ETOOLONG, "reorg", "nested deeper than PROTO_MAX_JSON_DEPTH");
    if ((ev->reorg = malloc(n + 1)) == NULL)
        return nfail(c, PROTO_ENOMEM, "reorg", "out of memory");
    json_compact(r, ev->reorg, n);
    ev->reorg[n] = '\0';
    return 0;
}

int proto_event_from_record(const char *buf, size_t len, struct status_event *out,
                            struct proto_err *err)
{
    struct jdoc doc;
    struct nctx c = {err, "", 1};
    const struct jv *root, *s;
    int64_t v;
    int p, rc;
    status_event_init(out);
    if ((rc = jdoc_parse(buf, len, &doc, err)) != 0)
        return rc;
    root = doc.root;
    if (root->type != J_OBJ) {
        rc = nfail(&c, PROTO_ETYPE, "", "expected an object");
        goto out;
    }
    if ((rc = parse_payload(&c, root, NULL, out)) != 0)
        goto out;
    if ((rc = rd_int(&c, root, "flags", 1, 0, UINT32_MAX, &v, &p)) != 0)
        goto out;
    /* the details value's type (read above) is the authority on PROTO_HAS_DETAILS_JSON */
    out->flags = ((unsigned)v & ~PROTO_HAS_DETAILS_JSON) | (out->flags & PROTO_HAS_DETAILS_JSON);
    if ((rc = rd_str(&c, root, "source", 1, &s, &p)) != 0)
        goto out;
    if ((v = proto_source_parse(s->u.str.s)) < 0) {
        rc = nfail(&c, PROTO_EVALUE, "source", "unknown source");
        goto out;
    }
    out->source = (enum proto_source)v;
    if ((rc = rd_int(&c, root, "observedAt", 1, 0, PROTO_MAX_TS, &out->observed_at, &p)) != 0 ||
        (rc = rd_int(&c, root, "publishedAt", 1, 0, PROTO_MAX_TS, &out->published_at, &p)) != 0 ||
        (rc = rd_int(&c, root, "createdAt", 1, 0, PROTO_MAX_TS, &out->created_at, &p)) != 0 ||
        (rc = rd_int(&c, root, "seq", 1, 0, PROTO_MAX_TS, &v, &p)) != 0 ||
        (rc = rd_event_id(&c, root, out)) != 0)
        goto out;
    out->seq = (uint64_t)v;
    if ((rc = need_key(&c, root, "previousStatus")) != 0 ||
        (rc = rd_str(&c, root, "previousStatus", 0, &s, &p)) != 0)
        goto out;
    if (s != NULL && ((rc = check_token(&c, "previousStatus", s)) != 0 ||
                      (rc = copy_str(&c, "previousStatus", s, &out->prev_status)) != 0))
        goto out;
    rc = rd_record_reorg(&c, jget(root, "reorg"), out);
out:
    if (rc != 0)
        status_event_cleanup(out);
    jdoc_free(&doc);
    return rc;
}
