/* rest_req.c - see rest_req.h: the REST request head, chunked bodies, paths, routes and the
 * numeric query values, parsed without I/O. runs on: any thread. */
#include "protocol/rest_req.h"
#include "protocol/proto.h"

#include <string.h>
#include <strings.h>

#define CHUNK_LINE_MAX 1024
#define CHUNK_TRAILER_MAX 8192
#define CHUNK_SIZE_MAX 9007199254740991ULL /* 2^53-1 */

long proto_rest_head_end(const char *buf, size_t len, size_t max)
{
    size_t lim = len < max ? len : max;
    size_t start = 0; /* start of the current line */
    for (size_t i = 0; i < lim; i++) {
        if (buf[i] != '\n')
            continue;
        size_t n = i - start; /* line length without LF */
        if (n == 0 || (n == 1 && buf[start] == '\r'))
            return start == 0 ? PROTO_EVALUE : (long)(i + 1);
        start = i + 1;
    }
    return len >= max ? PROTO_ETOOLONG : 0;
}

static int tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Length of the line at buf[off..len) without its terminator; *next is the next line's start.
 * -1 when there is no LF. */
static long line_at(const char *buf, size_t len, size_t off, size_t *next)
{
    const char *lf = memchr(buf + off, '\n', len - off);
    if (lf == NULL)
        return -1;
    size_t n = (size_t)(lf - (buf + off));
    *next = off + n + 1;
    if (n > 0 && buf[off + n - 1] == '\r')
        n--;
    return (long)n;
}

static int ieq(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

static int parse_request_line(const char *p, size_t n, struct proto_rest_head *h)
{
    const char *sp1 = memchr(p, ' ', n);
    if (sp1 == NULL || sp1 == p)
        return PROTO_EVALUE;
    h->method = p;
    h->method_len = (size_t)(sp1 - p);
    for (size_t i = 0; i < h->method_len; i++)
        if (!tchar((unsigned char)p[i]))
            return PROTO_EVALUE;
    const char *t = sp1 + 1, *end = p + n;
    const char *sp2 = memchr(t, ' ', (size_t)(end - t));
    if (sp2 == NULL || sp2 == t)
        return PROTO_EVALUE;
    h->target = t;
    h->target_len = (size_t)(sp2 - t);
    for (size_t i = 0; i < h->target_len; i++)
        if ((unsigned char)t[i] <= 0x20 || t[i] == 0x7f)
            return PROTO_EVALUE;
    const char *v = sp2 + 1;
    if (end - v != 8 || memcmp(v, "HTTP/1.", 7) != 0 || v[7] < '0' || v[7] > '9')
        return PROTO_EVALUE;
    h->minor = v[7] - '0';
    return 0;
}

static int take_header(struct proto_rest_head *h, const struct proto_rest_hdr *x)
{
    if (ieq(x->name, x->name_len, "Content-Length")) {
        if (h->content_length >= 0 || x->value_len == 0 || x->value_len > 16)
            return PROTO_EVALUE;
        int64_t v = 0;
        for (size_t i = 0; i < x->value_len; i++) {
            if (x->value[i] < '0' || x->value[i] > '9')
                return PROTO_EVALUE;
            v = v * 10 + (x->value[i] - '0');
        }
        if (v > PROTO_MAX_CHAIN_ID)
            return PROTO_EVALUE;
        h->content_length = v;
    } else if (ieq(x->name, x->name_len, "Transfer-Encoding")) {
        if (h->chunked || !ieq(x->value, x->value_len, "chunked"))
            return PROTO_EVALUE;
        h->chunked = 1;
    } else if (ieq(x->name, x->name_len, "Expect")) {
        if (ieq(x->value, x->value_len, "100-continue"))
            h->expect_continue = 1;
    }
    return 0;
}

int proto_rest_head_parse(const char *buf, size_t len, struct proto_rest_head *h)
{
    memset(h, 0, sizeof(*h));
    h->content_length = -1;
    size_t off = 0, next;
    long n = line_at(buf, len, 0, &next);
    if (n <= 0 || parse_request_line(buf, (size_t)n, h) != 0)
        return PROTO_EVALUE;
    h->line_len = next;
    for (off = next; off < len; off = next) {
        n = line_at(buf, len, off, &next);
        if (n < 0)
            return PROTO_EVALUE; /* not a whole head */
        if (n == 0)
            return next == len ? (h->chunked && h->content_length >= 0 ? PROTO_EVALUE : 0)
                               : PROTO_EVALUE; /* bytes after the head */
        const char *p = buf + off;
        const char *colon = memchr(p, ':', (size_t)n);
        if (colon == NULL || colon == p)
            return PROTO_EVALUE; /* no name; obs-fold lines start with a space: not a token */
        struct proto_rest_hdr spare;
        struct proto_rest_hdr *x = h->nhdr < PROTO_REST_HDR_MAX ? &h->hdr[h->nhdr] : &spare;
        x->name = p;
        x->name_len = (size_t)(colon - p);
        for (size_t i = 0; i < x->name_len; i++)
            if (!tchar((unsigned char)p[i]))
                return PROTO_EVALUE;
        const char *v = colon + 1, *e = p + n;
        while (v < e && (*v == ' ' || *v == '\t'))
            v++;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        for (const char *q = v; q < e; q++)
            if (*q == '\0' || *q == '\r')
                return PROTO_EVALUE;
        x->value = v;
        x->value_len = (size_t)(e - v);
        x->off = off;
        x->len = next - off;
        if (take_header(h, x) != 0)
            return PROTO_EVALUE;
        if (x == &spare)
            h->more = 1; /* checked, not kept */
        else
            h->nhdr++;
    }
    return PROTO_EVALUE; /* no empty line */
}

const struct proto_rest_hdr *proto_rest_head_find(const struct proto_rest_head *h,
                                                  const char *name)
{
    for (size_t i = 0; i < h->nhdr; i++)
        if (ieq(h->hdr[i].name, h->hdr[i].name_len, name))
            return &h->hdr[i];
    return NULL;
}

/* ---- chunked ------------------------------------------------------------------------------ */

enum { CH_SIZE, CH_EXT, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_DONE };

static int hexval(unsigned char c)
{
    return proto_hex_digit(c);
}

/* One byte of the trailer section (lines until an empty one, "\n" or "\r\n"). Returns 0 to go
 * on, 1 at its end (state CH_DONE), PROTO_ETOOLONG past CHUNK_TRAILER_MAX bytes. */
static int trailer_byte(struct proto_rest_chunked *c, unsigned char ch)
{
    if (++c->trailer > CHUNK_TRAILER_MAX)
        return PROTO_ETOOLONG;
    if (ch == '\n') {
        if (c->line == 0 || (c->line == 1 && c->digits)) {
            c->state = CH_DONE;
            return 1;
        }
        c->line = 0;
        c->digits = 0;
        return 0;
    }
    c->digits = c->line == 0 && ch == '\r'; /* "\r" alone so far: maybe the end */
    c->line++;
    return 0;
}

int proto_rest_chunked_step(struct proto_rest_chunked *c, const char *in, size_t len,
                            size_t *used, const char **data, size_t *dlen)
{
    size_t i = 0;
    *data = NULL;
    *dlen = 0;
    while (i < len) {
        unsigned char ch = (unsigned char)in[i];
        switch (c->state) {
        case CH_SIZE: /* hex digits, then extensions or the line end */
        case CH_EXT:
            if (++c->line > CHUNK_LINE_MAX) {
                *used = i;
                return PROTO_ETOOLONG;
            }
            i++;
            if (ch == '\n') {
                if (c->digits == 0)
                    goto bad;
                c->line = 0;
                c->digits = 0;
                c->state = c->left == 0 ? CH_TRAILER : CH_DATA;
                c->trailer = 0;
                continue;
            }
            if (c->state == CH_SIZE && hexval(ch) >= 0) {
                if (c->left > (CHUNK_SIZE_MAX >> 4)) {
                    *used = i;
                    return PROTO_ETOOLONG;
                }
                c->left = c->left * 16 + (uint64_t)hexval(ch);
                c->digits++;
                continue;
            }
            if (c->digits == 0 || ch == '\0')
                goto bad;
            c->state = CH_EXT; /* ";ext", spaces, the CR: ignored up to the LF */
            continue;
        case CH_DATA: {
            size_t n = len - i;
            if (n > c->left)
                n = (size_t)c->left;
            *data = in + i;
            *dlen = n;
            c->left -= n;
            i += n;
            if (c->left == 0)
                c->state = CH_DATA_CR;
            *used = i;
            return 0;
        }
        case CH_DATA_CR:
            i++;
            if (ch == '\r')
                c->state = CH_DATA_LF;
            else if (ch == '\n')
                c->state = CH_SIZE;
            else
                goto bad;
            continue;
        case CH_DATA_LF:
            i++;
            if (ch != '\n')
                goto bad;
            c->state = CH_SIZE;
            continue;
        case CH_TRAILER: { /* lines until an empty one */
            i++;
            int rc = trailer_byte(c, ch);
            if (rc != 0) {
                *used = i;
                return rc;
            }
            continue;
        }
        default:
            *used = i;
            return 1;
        }
    }
    *used = i;
    return c->state == CH_DONE ? 1 : 0;
bad:
    *used = i;
    return PROTO_EVALUE;
}

/* ---- paths and routes --------------------------------------------------------------------- */

int proto_rest_path_split(const char *path, size_t plen, char *buf, size_t bufsz,
                          struct proto_rest_seg *segs, int max)
{
    if (plen == 0) {
        path = "/";
        plen = 1;
    }
    if (path[0] != '/' || bufsz < plen)
        return -1;
    if (plen > 1 && path[plen - 1] == '/')
        plen--;
    if (plen == 1)
        return 0;
    int n = 0;
    size_t o = 0;
    const char *p = path + 1, *end = path + plen;
    for (;;) {
        const char *q = memchr(p, '/', (size_t)(end - p));
        if (q == NULL)
            q = end;
        if (n == max)
            return -1;
        size_t len = (size_t)(q - p), start = o;
        for (size_t i = 0; i < len; i++) { /* evhttp_uridecode(s, 0, ...) */
            if (p[i] == '%' && i + 2 < len && hexval((unsigned char)p[i + 1]) >= 0 &&
                hexval((unsigned char)p[i + 2]) >= 0) {
                buf[o++] = (char)(hexval((unsigned char)p[i + 1]) * 16 +
                                  hexval((unsigned char)p[i + 2]));
                i += 2;
            } else {
                buf[o++] = p[i];
            }
        }
        segs[n].s = buf + start;
        segs[n].len = o - start;
        n++;
        if (q == end)
            return n;
        p = q + 1;
    }
}

int proto_rest_route_match(const char *pattern, const struct proto_rest_seg *segs, int nsegs,
                           int *params, int maxp)
{
    int i = 0, np = 0;
    const char *p = pattern;
    if (strcmp(pattern, "/") == 0)
        return nsegs == 0;
    while (*p == '/') {
        p++;
        const char *q = strchr(p, '/');
        size_t pl = q != NULL ? (size_t)(q - p) : strlen(p);
        if (i >= nsegs)
            return 0;
        if (pl == 2 && p[0] == '{' && p[1] == '}') {
            if (segs[i].len == 0 || np >= maxp)
                return 0;
            if (params != NULL)
                params[np] = i;
            np++;
        } else if (segs[i].len != pl || memcmp(segs[i].s, p, pl) != 0) {
            return 0;
        }
        i++;
        p += pl;
    }
    return i == nsegs;
}

/* ---- query values ------------------------------------------------------------------------- */

/* Decimal digits of s[0..n) into *out; PROTO_EVALUE for no digit, another character or a value
 * above 2^64-1. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0)
        return PROTO_EVALUE;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return PROTO_EVALUE;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return PROTO_EVALUE;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int proto_rest_limit(const char *s, int def, int max, int *out)
{
    uint64_t v;
    *out = def;
    if (s == NULL || s[0] == '\0')
        return 0;
    if (parse_u64(s, strlen(s), &v) != 0 || v < 1 || v > (uint64_t)INT64_MAX)
        return PROTO_EVALUE;
    *out = v > (uint64_t)max ? max : (int)v;
    return 0;
}

int proto_rest_stream_id(const char *s, uint64_t *ms, uint64_t *seq, int *has_seq)
{
    *ms = *seq = 0;
    *has_seq = 0;
    if (s == NULL)
        return PROTO_EVALUE;
    size_t n = strlen(s);
    const char *dash = memchr(s, '-', n);
    size_t a = dash != NULL ? (size_t)(dash - s) : n;
    if (parse_u64(s, a, ms) != 0)
        return PROTO_EVALUE;
    if (dash == NULL)
        return 0;
    if (parse_u64(dash + 1, n - a - 1, seq) != 0)
        return PROTO_EVALUE;
    *has_seq = 1;
    return 0;
}
