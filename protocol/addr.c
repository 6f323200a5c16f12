/* addr.c - webhook target policy (SSRF guard), address literals and webhook URL parsing.
 *
 * The policy tables are in addr.h. The IPv4 literal parser re-implements glibc's
 * inet_aton_end (used by getaddrinfo through __inet_aton_exact) without errno, locale or
 * strtoul, so that a host is judged exactly as the resolver would read it; the unit test
 * compares it with the C library's inet_aton on a large generated set.
 * runs on: any thread (no state). */
#include "protocol/addr.h"
#include "protocol/proto.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- policy ---------------------------------------------------------------------------- */

struct v4_range {
    uint32_t net;
    int bits;
    int reason;
};

/* Most specific first: the first match decides. */
static const struct v4_range v4_ranges[] = {
    {0xffffffffu, 32, PROTO_ADDR_BROADCAST},     /* 255.255.255.255 */
    {0x00000000u, 8, PROTO_ADDR_UNSPECIFIED},    /* 0.0.0.0/8 "this network" */
    {0x0a000000u, 8, PROTO_ADDR_PRIVATE},        /* 10/8 */
    {0x64400000u, 10, PROTO_ADDR_CGNAT},         /* 100.64/10 shared address space */
    {0x7f000000u, 8, PROTO_ADDR_LOOPBACK},       /* 127/8 */
    {0xa9fe0000u, 16, PROTO_ADDR_LINK_LOCAL},    /* 169.254/16 (cloud metadata lives here) */
    {0xac100000u, 12, PROTO_ADDR_PRIVATE},       /* 172.16/12 */
    {0xc0000000u, 24, PROTO_ADDR_RESERVED},      /* 192.0.0/24 IETF protocol assignments */
    {0xc0000200u, 24, PROTO_ADDR_DOCUMENTATION}, /* 192.0.2/24 TEST-NET-1 */
    {0xc0586300u, 24, PROTO_ADDR_RESERVED},      /* 192.88.99/24 6to4 relay anycast */
    {0xc0a80000u, 16, PROTO_ADDR_PRIVATE},       /* 192.168/16 */
    {0xc6120000u, 15, PROTO_ADDR_BENCHMARK},     /* 198.18/15 */
    {0xc6336400u, 24, PROTO_ADDR_DOCUMENTATION}, /* 198.51.100/24 TEST-NET-2 */
    {0xcb007100u, 24, PROTO_ADDR_DOCUMENTATION}, /* 203.0.113/24 TEST-NET-3 */
    {0xe0000000u, 4, PROTO_ADDR_MULTICAST},      /* 224/4 */
    {0xf0000000u, 4, PROTO_ADDR_RESERVED},       /* 240/4 future use */
};

/* Reason for an IPv4 address in host byte order. */
static int v4_reason(uint32_t a)
{
    size_t i;

    for (i = 0; i < sizeof(v4_ranges) / sizeof(v4_ranges[0]); i++) {
        uint32_t mask = 0xffffffffu << (32 - v4_ranges[i].bits);
        if ((a & mask) == v4_ranges[i].net)
            return v4_ranges[i].reason;
    }
    return PROTO_ADDR_OK;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int all_zero(const uint8_t *p, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (p[i] != 0)
            return 0;
    return 1;
}

/* Reason for an IPv6 address (16 bytes, network order). */
static int v6_reason(const uint8_t *a)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t nat64_local[6] = {0, 0x64, 0xff, 0x9b, 0, 1};
    int r;

    if (all_zero(a, 16))
        return PROTO_ADDR_UNSPECIFIED;
    if (all_zero(a, 15) && a[15] == 1)
        return PROTO_ADDR_LOOPBACK;
    if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0)
        return v4_reason(be32(a + 12));
    if (all_zero(a, 12))                            /* IPv4-compatible, deprecated */
        return (r = v4_reason(be32(a + 12))) != PROTO_ADDR_OK ? r : PROTO_ADDR_RESERVED;
    if (memcmp(a, nat64_local, 6) == 0)             /* 64:ff9b:1::/48 */
        return PROTO_ADDR_RESERVED;
    if (a[0] == 0xff)
        return PROTO_ADDR_MULTICAST;
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return PROTO_ADDR_LINK_LOCAL;
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)      /* fec0::/10 site-local, deprecated */
        return PROTO_ADDR_PRIVATE;
    if ((a[0] & 0xfe) == 0xfc)                      /* fc00::/7 unique local */
        return PROTO_ADDR_PRIVATE;
    if ((a[0] & 0xe0) != 0x20)                      /* not 2000::/3 global unicast */
        return PROTO_ADDR_RESERVED;
    if (a[0] == 0x20 && a[1] == 0x01) {
        if (a[2] == 0x0d && a[3] == 0xb8)           /* 2001:db8::/32 */
            return PROTO_ADDR_DOCUMENTATION;
        if (a[2] == 0 && a[3] == 2 && a[4] == 0 && a[5] == 0)    /* 2001:2::/48 */
            return PROTO_ADDR_BENCHMARK;
        if ((a[2] & 0xfe) == 0)                     /* 2001::/23, Teredo, ORCHID */
            return PROTO_ADDR_RESERVED;
    }
    if (a[0] == 0x3f && a[1] == 0xff && (a[2] & 0xf0) == 0)     /* 3fff::/20 */
        return PROTO_ADDR_DOCUMENTATION;
    if (a[0] == 0x20 && a[1] == 0x02)               /* 6to4: 2002:AABB:CCDD::/48 */
        return v4_reason(be32(a + 2));
    return PROTO_ADDR_OK;
}

int proto_addr_forbidden(const struct sockaddr *sa, socklen_t len)
{
    if (sa == NULL)
        return PROTO_ADDR_FAMILY;
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return v4_reason(ntohl(in->sin_addr.s_addr));
    }
    if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        return v6_reason(in6->sin6_addr.s6_addr);
    }
    return PROTO_ADDR_FAMILY;
}

const char *proto_addr_reason(int reason)
{
    static const char *const names[] = {
        [PROTO_ADDR_OK] = "allowed",
        [PROTO_ADDR_LOOPBACK] = "loopback",
        [PROTO_ADDR_PRIVATE] = "private",
        [PROTO_ADDR_CGNAT] = "cgnat",
        [PROTO_ADDR_LINK_LOCAL] = "link_local",
        [PROTO_ADDR_MULTICAST] = "multicast",
        [PROTO_ADDR_UNSPECIFIED] = "unspecified",
        [PROTO_ADDR_BROADCAST] = "broadcast",
        [PROTO_ADDR_DOCUMENTATION] = "documentation",
        [PROTO_ADDR_BENCHMARK] = "benchmark",
        [PROTO_ADDR_RESERVED] = "reserved",
        [PROTO_ADDR_FAMILY] = "family",
    };

    if (reason < 0 || reason >= (int)(sizeof(names) / sizeof(names[0])))
        return "unknown";
    return names[reason];
}

/* ---- literals -------------------------------------------------------------------------- */

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int hex_digit(char c)
{
    return proto_hex_digit((unsigned char)c);
}

/* One number as strtoul(s, &end, 0) reads it, given that *s is a digit: 0x/0X hex (at least
 * one hex digit, else just "0" is read), leading 0 octal, else decimal. Values beyond 32
 * bits saturate to UINT64_MAX (rejected by every caller). Returns the end. */
static const char *read_number(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    int base = 10, d;

    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && hex_digit(s[2]) >= 0) {
        base = 16;
        s += 2;
    } else if (s[0] == '0') {
        base = 8;
    }
    for (; (d = base == 16 ? hex_digit(*s) : is_digit(*s) ? *s - '0' : -1) >= 0 && d < base;
         s++)
        v = v > 0xffffffffu ? v : v * (uint64_t)base + (uint64_t)d;
    *out = v;
    return s;
}

/* inet_aton_end followed by "the whole string was used" (__inet_aton_exact). */
static int parse_ipv4(const char *s, uint32_t *out)
{
    static const uint32_t max[4] = {0xffffffffu, 0xffffffu, 0xffffu, 0xffu};
    uint32_t parts = 0;
    int n = 0;
    uint64_t v;

    for (;;) {
        if (!is_digit(*s))
            return 0;
        s = read_number(s, &v);
        if (v > 0xffffffffu)
            return 0;
        if (*s != '.')
            break;
        if (n > 2 || v > 0xff)
            return 0;
        parts |= (uint32_t)v << (24 - 8 * n++);
        s++;
    }
    if (*s != '\0' || v > max[n])
        return 0;
    *out = parts | (uint32_t)v;
    return 1;
}

int proto_host_literal(const char *host, struct sockaddr_storage *ss)
{
    char buf[INET6_ADDRSTRLEN + 8];
    struct in6_addr a6;
    uint32_t a4;
    size_t n;

    if (host == NULL)
        return 0;
    if (parse_ipv4(host, &a4)) {
        if (ss != NULL) {
            struct sockaddr_in *in = (struct sockaddr_in *)ss;
            memset(ss, 0, sizeof(*ss));
            in->sin_family = AF_INET;
            in->sin_addr.s_addr = htonl(a4);
        }
        return 1;
    }
    n = strnlen(host, sizeof(buf) + 2);
    if (n > 0 && host[0] == '[') {                      /* "[...]" */
        if (n < 2 || host[n - 1] != ']')
            return 0;
        host++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof(buf) || memchr(host, '[', n) != NULL ||
        memchr(host, ']', n) != NULL)
        return 0;
    memcpy(buf, host, n);
    buf[n] = '\0';
    if ((host = strchr(buf, '%')) != NULL) {            /* zone: needs a name, ignored */
        if (host[1] == '\0')
            return 0;
        buf[host - buf] = '\0';
    }
    if (strchr(buf, ':') == NULL || inet_pton(AF_INET6, buf, &a6) != 1)
        return 0;
    if (ss != NULL) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        memset(ss, 0, sizeof(*ss));
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = a6;
    }
    return 1;
}

/* ---- URLs ------------------------------------------------------------------------------ */

/* 1 when s starts with prefix (lowercase ASCII), ignoring ASCII case (no locale). */
static int prefix_nocase(const char *s, const char *prefix)
{
    for (; *prefix != '\0'; s++, prefix++)
        if ((*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s) != *prefix)
            return 0;
    return 1;
}

/* RFC 3986 characters allowed in a path or query besides %XX: unreserved, sub-delims,
 * ':', '@', '/', '?'. */
static int target_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
           (c != '\0' && strchr("-._~!$&'()*+,;=:@/?", c) != NULL);
}

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' ||
           c == '_' || c == '.';
}

/* WHATWG "ends in a number": the last label (a final dot aside) is all digits or 0x-hex. */
static int ends_in_number(const char *h, size_t n)
{
    size_t i, start;

    if (n > 0 && h[n - 1] == '.')
        n--;
    for (start = n; start > 0 && h[start - 1] != '.'; start--)
        ;
    if (start == n)
        return 0;
    if (n - start >= 2 && h[start] == '0' && (h[start + 1] == 'x' || h[start + 1] == 'X')) {
        for (i = start + 2; i < n && hex_digit(h[i]) >= 0; i++)
            ;
        return i == n;
    }
    for (i = start; i < n && is_digit(h[i]); i++)
        ;
    return i == n;
}

/* Check a DNS name of n chars (name_char only) and copy it lowercased into out. */
static int parse_name(const char *h, size_t n, char *out, struct proto_err *err)
{
    size_t i, label = 0;

    if (n - (n > 0 && h[n - 1] == '.') > 253)
        return proto_fail(err, PROTO_ETOOLONG, "url.host", "host name over 253 characters");
    for (i = 0; i < n; i++) {
        if (h[i] == '.') {
            if (label == 0)
                return proto_fail(err, PROTO_EVALUE, "url.host", "empty label in host");
            label = 0;
        } else if (++label > 63) {
            return proto_fail(err, PROTO_EVALUE, "url.host", "host label over 63 characters");
        }
        out[i] = h[i] >= 'A' && h[i] <= 'Z' ? (char)(h[i] - 'A' + 'a') : h[i];
    }
    out[n] = '\0';
    if (ends_in_number(h, n))
        return proto_fail(err, PROTO_EVALUE, "url.host",
                          "host looks numeric but is not an IPv4 address");
    return 0;
}

/* Set out->host (canonical text), family and addr from a literal in ss. */
static void set_literal(struct proto_url *out, const struct sockaddr_storage *ss)
{
    out->family = ss->ss_family;
    out->addr = *ss;
    if (ss->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, out->host,
                  sizeof(out->host));
    else
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, out->host,
                  sizeof(out->host));
}

static int parse_port(const char *p, size_t n, struct proto_url *out, struct proto_err *err)
{
    unsigned v = 0;
    size_t i;

    if (n == 0 || n > 5)
        return proto_fail(err, PROTO_EVALUE, "url.port", "port must be 1..65535");
    for (i = 0; i < n; i++) {
        if (!is_digit(p[i]))
            return proto_fail(err, PROTO_EVALUE, "url.port", "port must be decimal digits");
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    if (v == 0 || v > 65535)
        return proto_fail(err, PROTO_EVALUE, "url.port", "port must be 1..65535");
    out->port = (uint16_t)v;
    out->port_explicit = 1;
    return 0;
}

/* The request target after the authority (p: "", "/path", "?query"; no fragment, %XX
 * escapes well formed) into out->target, with a leading '/'. */
static int parse_target(const char *p, struct proto_url *out, struct proto_err *err)
{
    if (strchr(p, '#') != NULL)
        return proto_fail(err, PROTO_EVALUE, "url.path", "fragment (#) is not allowed");
    for (size_t i = 0; p[i] != '\0'; i++) {
        if (p[i] == '%') {
            if (hex_digit(p[i + 1]) < 0 || hex_digit(p[i + 2]) < 0)
                return proto_fail(err, PROTO_EVALUE, "url.path", "bad %XX escape");
            i += 2;
        } else if (!target_char(p[i])) {
            return proto_fail(err, PROTO_EVALUE, "url.path", "character not allowed in path");
        }
    }
    snprintf(out->target, sizeof(out->target), "%s%s", p[0] == '/' ? "" : "/", p);
    return 0;
}

int proto_url_parse(const char *url, struct proto_url *out, struct proto_err *err)
{
    struct sockaddr_storage ss;
    const char *auth, *host, *port = NULL;
    size_t n, i, alen, hlen, plen = 0;
    char hbuf[PROTO_HOST_MAX + 8];
    int rc;

    if (out == NULL)
        return proto_fail(err, PROTO_EVALUE, "url", "no output");
    memset(out, 0, sizeof(*out));
    if (url == NULL || url[0] == '\0')
        return proto_fail(err, PROTO_EVALUE, "url", "empty URL");
    if ((n = strnlen(url, PROTO_URL_MAX + 1)) > PROTO_URL_MAX)
        return proto_fail(err, PROTO_ETOOLONG, "url", "URL over 2048 bytes");
    for (i = 0; i < n; i++)
        if ((unsigned char)url[i] <= 0x20 || (unsigned char)url[i] >= 0x7f || url[i] == '\\')
            return proto_fail(err, PROTO_EVALUE, "url",
                              "whitespace, control, non-ASCII or backslash in URL");

    if (prefix_nocase(url, "https://")) {
        out->https = 1;
        auth = url + 8;
    } else if (prefix_nocase(url, "http://")) {
        auth = url + 7;
    } else {
        return proto_fail(err, PROTO_EVALUE, "url.scheme", "scheme must be http:// or https://");
    }
    out->port = out->https ? 443 : 80;

    alen = strcspn(auth, "/?#");
    if (memchr(auth, '@', alen) != NULL)
        return proto_fail(err, PROTO_EVALUE, "url.host", "userinfo (user@) is not allowed");
    if (alen > 0 && auth[0] == '[') {
        const char *close = memchr(auth, ']', alen);
        if (close == NULL)
            return proto_fail(err, PROTO_EVALUE, "url.host", "unterminated [IPv6] host");
        host = auth + 1;
        hlen = (size_t)(close - host);
        if (close + 1 < auth + alen) {
            if (close[1] != ':')
                return proto_fail(err, PROTO_EVALUE, "url.host", "text after [IPv6] host");
            port = close + 2;
            plen = (size_t)(auth + alen - port);
        }
        if (hlen == 0 || hlen >= INET6_ADDRSTRLEN || memchr(host, '%', hlen) != NULL)
            return proto_fail(err, PROTO_EVALUE, "url.host", "bad [IPv6] host (zones refused)");
        memcpy(hbuf, host, hlen);
        hbuf[hlen] = '\0';
        if (strchr(hbuf, ':') == NULL || !proto_host_literal(hbuf, &ss))
            return proto_fail(err, PROTO_EVALUE, "url.host", "bad IPv6 address in [ ]");
        set_literal(out, &ss);
    } else {
        const char *colon = memchr(auth, ':', alen);
        host = auth;
        hlen = colon != NULL ? (size_t)(colon - auth) : alen;
        if (colon != NULL) {
            port = colon + 1;
            plen = alen - hlen - 1;
        }
        if (hlen == 0)
            return proto_fail(err, PROTO_EVALUE, "url.host", "empty host");
        if (hlen > PROTO_HOST_MAX)
            return proto_fail(err, PROTO_ETOOLONG, "url.host", "host name over 253 characters");
        for (i = 0; i < hlen; i++)
            if (!name_char(host[i]))
                return proto_fail(err, PROTO_EVALUE, "url.host", "invalid character in host");
        memcpy(hbuf, host, hlen);
        hbuf[hlen] = '\0';
        if (proto_host_literal(hbuf, &ss))
            set_literal(out, &ss);
        else if ((rc = parse_name(hbuf, hlen, out->host, err)) != 0)
            return rc;
    }
    if (port != NULL && (rc = parse_port(port, plen, out, err)) != 0)
        return rc;
    if (out->family == AF_INET)
        ((struct sockaddr_in *)&out->addr)->sin_port = htons(out->port);
    else if (out->family == AF_INET6)
        ((struct sockaddr_in6 *)&out->addr)->sin6_port = htons(out->port);
    return parse_target(auth + alen, out, err);
}

int proto_url_format(const struct proto_url *u, char *out, size_t outsz)
{
    int n;

    if (u == NULL || out == NULL)
        return PROTO_EVALUE;
    if (u->port_explicit)
        n = snprintf(out, outsz, "%s://%s%s%s:%u%s", u->https ? "https" : "http",
                     u->family == AF_INET6 ? "[" : "", u->host,
                     u->family == AF_INET6 ? "]" : "", (unsigned)u->port, u->target);
    else
        n = snprintf(out, outsz, "%s://%s%s%s%s", u->https ? "https" : "http",
                     u->family == AF_INET6 ? "[" : "", u->host,
                     u->family == AF_INET6 ? "]" : "", u->target);
    return n < 0 || (size_t)n >= outsz ? PROTO_ETOOLONG : 0;
}

int proto_host_is_localhost(const char *host)
{
    static const char lh[] = "localhost";
    const size_t k = sizeof(lh) - 1;
    if (host == NULL)
        return 0;
    size_t n = strlen(host);
    while (n > 0 && host[n - 1] == '.')
        n--;
    if (n < k || strncasecmp(host + n - k, lh, k) != 0)
        return 0;
    return n == k || host[n - k - 1] == '.';
}

int proto_listen_is_loopback(const char *hostport)
{
    char host[PROTO_HOST_MAX + 3];
    const char *colon;
    size_t n;
    if (hostport == NULL)
        return 0;
    if (hostport[0] == '[') { /* "[v6]:port" */
        const char *end = strchr(hostport, ']');
        if (end == NULL || end[1] != ':')
            return 0;
        n = (size_t)(end - hostport - 1);
        colon = end + 1;
        hostport++;
    } else {
        if ((colon = strrchr(hostport, ':')) == NULL)
            return 0;
        n = (size_t)(colon - hostport);
        if (memchr(hostport, ':', n) != NULL) /* bare IPv6 without brackets: ambiguous */
            return 0;
    }
    if (n == 0 || n >= sizeof(host) || colon[1] == '\0')
        return 0;
    memcpy(host, hostport, n);
    host[n] = '\0';
    if (strcasecmp(host, "localhost") == 0 || strcasecmp(host, "localhost.") == 0)
        return 1;
    struct sockaddr_storage ss;
    if (!proto_host_literal(host, &ss))
        return 0;
    return proto_addr_forbidden((const struct sockaddr *)&ss, sizeof(ss)) == PROTO_ADDR_LOOPBACK;
}

static int ascii_alnum(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* 1 when s (n bytes) is a port: 1 to 5 digits, at most 65535. */
static int port_ok(const char *s, size_t n)
{
    unsigned v = 0;
    if (n == 0 || n > 5)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    return v <= 65535;
}

/* 1 when a Host value has the shape RFC 9110 gives it: uri-host [ ":" port ], where the host
 * is a name or IPv4 of letters, digits, '-', '.', '_', '~', or an IPv6 literal in brackets
 * (hex, ':', '.', a "%zone" of the same letters), and the port is digits (<= 65535). No
 * userinfo ("127.0.0.1:80@evil"), no port that is not a number ("localhost:x"), no list (two
 * Host headers joined with ','), no spaces. */
static int host_syntax_ok(const char *host, size_t n)
{
    size_t i = 0;
    if (n > 0 && host[0] == '[') {
        for (i = 1; i < n && host[i] != ']'; i++)
            if (!ascii_alnum(host[i]) && strchr(":.%-_~", host[i]) == NULL)
                return 0;
        if (i >= n || i == 1)
            return 0;
        i++; /* past ']' */
    } else {
        for (; i < n && host[i] != ':'; i++)
            if (!ascii_alnum(host[i]) && strchr("-._~", host[i]) == NULL)
                return 0;
        if (i == 0)
            return 0;
    }
    if (i == n)
        return 1;
    return host[i] == ':' && port_ok(host + i + 1, n - i - 1);
}

int proto_host_names_relay(const char *host, const char *allowed)
{
    char hp[300];
    if (host == NULL)
        return 0;
    size_t n = strlen(host);
    if (n == 0 || n >= sizeof(hp) - 4 || !host_syntax_ok(host, n))
        return 0;
    if (proto_listen_is_loopback(host))
        return 1;
    snprintf(hp, sizeof(hp), "%s:0", host); /* no port given */
    if (proto_listen_is_loopback(hp))
        return 1;
    /* the name without its port */
    size_t hl = n;
    const char *colon = strrchr(host, ':');
    if (colon != NULL && strchr(colon, ']') == NULL)
        hl = (size_t)(colon - host);
    for (const char *l = allowed; l != NULL && *l != '\0';) {
        while (*l == ' ' || *l == ',')
            l++;
        size_t k = strcspn(l, ", ");
        if (k > 0 && k == hl && strncasecmp(l, host, hl) == 0)
            return 1;
        l += k;
    }
    return 0;
}
