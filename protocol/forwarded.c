/* forwarded.c - see forwarded.h. runs on: any thread (no state). */
#include "protocol/forwarded.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define ELEM_MAX 128  /* one element's text (an address with brackets and port fits easily) */
#define ELEMS_MAX 256 /* elements in one header at most (more: malformed) */

static int ows(char c)
{
    return c == ' ' || c == '\t';
}

/* [*s, *e) without surrounding OWS. */
static void trim(const char **s, const char **e)
{
    while (*s < *e && ows(**s))
        (*s)++;
    while (*e > *s && ows((*e)[-1]))
        (*e)--;
}

static const uint8_t mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

int proto_ip_parse(const char *s, size_t len, struct proto_ip *out)
{
    char buf[INET6_ADDRSTRLEN + 1];
    if (s == NULL || len == 0 || len >= sizeof(buf) || memchr(s, '\0', len) != NULL)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    memset(out, 0, sizeof(*out));
    if (memchr(buf, ':', len) == NULL) {
        out->family = AF_INET;
        return inet_pton(AF_INET, buf, out->a) == 1 ? 0 : -1;
    }
    if (inet_pton(AF_INET6, buf, out->a) != 1)
        return -1;
    out->family = AF_INET6;
    if (memcmp(out->a, mapped_prefix, 12) == 0) {
        memmove(out->a, out->a + 12, 4);
        memset(out->a + 4, 0, 12);
        out->family = AF_INET;
    }
    return 0;
}

int proto_ip_from_sockaddr(const struct sockaddr *sa, struct proto_ip *out)
{
    memset(out, 0, sizeof(*out));
    if (sa == NULL)
        return -1;
    if (sa->sa_family == AF_INET) {
        out->family = AF_INET;
        memcpy(out->a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family != AF_INET6)
        return -1;
    const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    if (memcmp(b, mapped_prefix, 12) == 0) {
        out->family = AF_INET;
        memcpy(out->a, b + 12, 4);
    } else {
        out->family = AF_INET6;
        memcpy(out->a, b, 16);
    }
    return 0;
}

void proto_ip_format(const struct proto_ip *ip, char *out, size_t n)
{
    if (n == 0)
        return;
    out[0] = '\0';
    if (ip->family == AF_INET || ip->family == AF_INET6)
        inet_ntop(ip->family, ip->a, out, (socklen_t)n);
}

void proto_ip_key(const struct proto_ip *ip, char *out, size_t n)
{
    if (ip->family != AF_INET6) {
        proto_ip_format(ip, out, n);
        return;
    }
    struct proto_ip p = *ip;
    char buf[INET6_ADDRSTRLEN];
    memset(p.a + 8, 0, 8);
    proto_ip_format(&p, buf, sizeof(buf));
    snprintf(out, n, "%s/64", buf);
}

/* ---- the trusted list ------------------------------------------------------------------ */

static void mask(struct proto_ip *ip, int bits)
{
    int len = ip->family == AF_INET ? 4 : 16;
    for (int i = 0; i < len; i++) {
        int keep = bits - 8 * i;
        if (keep >= 8)
            continue;
        ip->a[i] &= keep <= 0 ? 0 : (uint8_t)(0xff << (8 - keep));
    }
}

/* One entry [s, e): "addr" or "addr/bits". */
static int cidr_parse(const char *s, const char *e, struct proto_cidr *c, const char **why)
{
    const char *slash = memchr(s, '/', (size_t)(e - s));
    const char *ae = slash != NULL ? slash : e;
    int mapped;
    char tmp[INET6_ADDRSTRLEN + 1];
    if (proto_ip_parse(s, (size_t)(ae - s), &c->ip) != 0) {
        *why = "every entry must be an IP address or CIDR (a.b.c.d[/n], ipv6[/n]), no names";
        return -1;
    }
    /* a mapped IPv6 spelling (became IPv4): its prefix counts from bit 96 */
    mapped = c->ip.family == AF_INET && memchr(s, ':', (size_t)(ae - s)) != NULL;
    int max = c->ip.family == AF_INET ? 32 : 128;
    c->bits = max;
    if (slash != NULL) {
        size_t dl = (size_t)(e - slash - 1);
        if (dl == 0 || dl > 3 || dl >= sizeof(tmp)) {
            *why = "a CIDR prefix length must be a number after '/'";
            return -1;
        }
        int v = 0;
        for (const char *p = slash + 1; p < e; p++) {
            if (*p < '0' || *p > '9') {
                *why = "a CIDR prefix length must be a number after '/'";
                return -1;
            }
            v = v * 10 + (*p - '0');
        }
        if (mapped) {
            if (v < 96 || v > 128) {
                *why = "an IPv4-mapped CIDR needs a prefix of /96 to /128";
                return -1;
            }
            v -= 96;
        }
        if (v > max) {
            *why = "a CIDR prefix is longer than its address (IPv4 /32, IPv6 /128 at most)";
            return -1;
        }
        c->bits = v;
    }
    mask(&c->ip, c->bits);
    return 0;
}

int proto_cidr_list_parse(const char *s, struct proto_cidr_list *out, const char **why)
{
    *why = "";
    out->n = 0;
    if (s == NULL)
        return 0;
    const char *p = s, *end = s + strlen(s), *a = p, *b = end;
    trim(&a, &b);
    if (a == b)
        return 0;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma != NULL ? comma : end, *es = p;
        trim(&es, &e);
        if (es == e) {
            *why = "an entry is empty (two commas, or a comma at an end)";
            return -1;
        }
        if (out->n >= PROTO_CIDR_MAX) {
            *why = "at most 64 entries";
            return -1;
        }
        if (cidr_parse(es, e, &out->v[out->n], why) != 0)
            return -1;
        out->n++;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return 0;
}

int proto_cidr_list_match(const struct proto_cidr_list *l, const struct proto_ip *ip)
{
    for (size_t i = 0; l != NULL && i < l->n; i++) {
        const struct proto_cidr *c = &l->v[i];
        if (c->ip.family != ip->family)
            continue;
        struct proto_ip m = *ip;
        mask(&m, c->bits);
        if (memcmp(m.a, c->ip.a, ip->family == AF_INET ? 4 : 16) == 0)
            return 1;
    }
    return 0;
}

/* ---- headers --------------------------------------------------------------------------- */

/* One node address [s, e) as proxies write it: "a.b.c.d", "a.b.c.d:port", "ipv6",
 * "[ipv6]", "[ipv6]:port" (already unquoted). 0, or -1. */
static int node_parse(const char *s, const char *e, struct proto_ip *out)
{
    trim(&s, &e);
    if (s == e)
        return -1;
    const char *ae = e;
    if (*s == '[') {
        const char *rb = memchr(s, ']', (size_t)(e - s));
        if (rb == NULL)
            return -1;
        if (rb + 1 < e) { /* ":port" */
            if (rb[1] != ':' || rb + 2 == e)
                return -1;
            for (const char *p = rb + 2; p < e; p++)
                if (*p < '0' || *p > '9')
                    return -1;
        }
        if (proto_ip_parse(s + 1, (size_t)(rb - s - 1), out) != 0)
            return -1;
        return out->family == AF_INET6 || memchr(s + 1, ':', (size_t)(rb - s - 1)) ? 0 : -1;
    }
    const char *colon = memchr(s, ':', (size_t)(e - s));
    if (colon != NULL && memchr(colon + 1, ':', (size_t)(e - colon - 1)) == NULL) {
        /* exactly one colon: IPv4 with a port */
        if (colon + 1 == e)
            return -1;
        for (const char *p = colon + 1; p < e; p++)
            if (*p < '0' || *p > '9')
                return -1;
        ae = colon;
        if (proto_ip_parse(s, (size_t)(ae - s), out) != 0 || out->family != AF_INET)
            return -1;
        return 0;
    }
    return proto_ip_parse(s, (size_t)(ae - s), out);
}

/* The element list [s, e), split on commas outside quoted strings, walked from the right.
 * get: the node text of one element (unquoted into buf), 1 found, 0 none in this element
 * (skipped), -1 malformed. */
typedef int elem_fn(const char *s, const char *e, char *buf, size_t n, size_t *len);

static enum proto_fwd_result walk(const char *s, const char *e, int quotes, elem_fn *get,
                                  const struct proto_cidr_list *trusted, struct proto_ip *out)
{
    /* element boundaries, found left to right (quotes decide in Forwarded), then visited
     * right to left */
    uint16_t starts[ELEMS_MAX]; /* a ring: only the rightmost ELEMS_MAX elements count */
    size_t n = 0;
    int inq = 0, any = 0;
    struct proto_ip leftmost = {0};
    starts[n++] = 0;
    for (const char *p = s; p < e; p++) {
        if (quotes && inq && *p == '\\' && p + 1 < e) {
            p++;
            continue;
        }
        if (quotes && *p == '"')
            inq = !inq;
        else if (*p == ',' && !inq)
            starts[n++ % ELEMS_MAX] = (uint16_t)(p + 1 - s);
    }
    if (inq)
        return PROTO_FWD_BAD;
    for (size_t i = n; i-- > 0 && i + ELEMS_MAX >= n;) {
        const char *es = s + starts[i % ELEMS_MAX];
        const char *ee = i + 1 < n ? s + starts[(i + 1) % ELEMS_MAX] - 1 : e;
        char buf[ELEM_MAX];
        size_t len = 0;
        int rc = get(es, ee, buf, sizeof(buf), &len);
        if (rc < 0)
            return PROTO_FWD_BAD;
        if (rc == 0)
            continue;
        struct proto_ip ip;
        if (node_parse(buf, buf + len, &ip) != 0)
            return PROTO_FWD_BAD;
        if (!proto_cidr_list_match(trusted, &ip)) {
            *out = ip;
            return PROTO_FWD_OK;
        }
        leftmost = ip;
        any = 1;
    }
    if (!any)
        return PROTO_FWD_NONE;
    *out = leftmost;
    return PROTO_FWD_OK;
}

/* X-Forwarded-For: the element is the node (no quotes); empty elements are skipped. */
static int xff_elem(const char *s, const char *e, char *buf, size_t n, size_t *len)
{
    trim(&s, &e);
    if (s == e)
        return 0;
    if ((size_t)(e - s) >= n)
        return -1;
    memcpy(buf, s, (size_t)(e - s));
    *len = (size_t)(e - s);
    return 1;
}

/* Forwarded: the value of the element's "for" parameter, unquoted. Elements without one are
 * skipped; a quoted value must close and span the whole value. */
static int fwd_elem(const char *s, const char *e, char *buf, size_t n, size_t *len)
{
    const char *p = s;
    while (p < e) {
        /* one pair: token "=" (token / quoted-string), up to ';' outside quotes */
        const char *ps = p, *eq = NULL, *pe;
        int inq = 0;
        for (pe = p; pe < e; pe++) {
            if (inq && *pe == '\\' && pe + 1 < e) {
                pe++;
                continue;
            }
            if (*pe == '"')
                inq = !inq;
            else if (!inq && *pe == ';')
                break;
            else if (!inq && *pe == '=' && eq == NULL)
                eq = pe;
        }
        const char *ns = ps, *ne = eq != NULL ? eq : pe;
        trim(&ns, &ne);
        if (eq != NULL && ne - ns == 3 && strncasecmp(ns, "for", 3) == 0) {
            const char *vs = eq + 1, *ve = pe;
            trim(&vs, &ve);
            size_t k = 0;
            if (vs < ve && *vs == '"') {
                if (ve - vs < 2 || ve[-1] != '"')
                    return -1;
                for (const char *q = vs + 1; q < ve - 1; q++) {
                    if (*q == '\\' && q + 1 < ve - 1)
                        q++;
                    else if (*q == '"')
                        return -1;
                    if (k + 1 >= n)
                        return -1;
                    buf[k++] = *q;
                }
            } else {
                for (const char *q = vs; q < ve; q++) {
                    if (*q == '"' || k + 1 >= n)
                        return -1;
                    buf[k++] = *q;
                }
            }
            *len = k;
            return k > 0 ? 1 : -1;
        }
        if (eq == NULL && ns != ne)
            return -1; /* a pair without '=' */
        p = pe + 1;
    }
    return 0;
}

/* 1 when [s, s+len) holds anything but OWS and commas. */
static int has_element(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!ows(s[i]) && s[i] != ',')
            return 1;
    return 0;
}

enum proto_fwd_result proto_forwarded_client(const char *xff, size_t xff_len, const char *fwd,
                                             size_t fwd_len, const struct proto_cidr_list *trusted,
                                             struct proto_ip *out)
{
    if (xff != NULL && has_element(xff, xff_len)) {
        if (xff_len > PROTO_FWD_HEADER_MAX) { /* the rightmost part is what counts */
            const char *cut = xff + xff_len - PROTO_FWD_HEADER_MAX;
            const char *c = memchr(cut, ',', PROTO_FWD_HEADER_MAX);
            if (c == NULL)
                return PROTO_FWD_BAD;
            xff_len -= (size_t)(c + 1 - xff);
            xff = c + 1;
        }
        return walk(xff, xff + xff_len, 0, xff_elem, trusted, out);
    }
    if (fwd != NULL && has_element(fwd, fwd_len)) {
        if (fwd_len > PROTO_FWD_HEADER_MAX)
            return PROTO_FWD_BAD;
        return walk(fwd, fwd + fwd_len, 1, fwd_elem, trusted, out);
    }
    return PROTO_FWD_NONE;
}
