/* redis_url.c - see redis_url.h. runs on: any thread. */
#include "store/redis_url.h"
#include "protocol/proto.h"
#include "relay/common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(int c)
{
    return proto_hex_digit(c);
}

/* Heap copy of s[0..n) with valid %XX sequences decoded (others kept as they are); NULL when
 * one decodes to a NUL byte (%00), which a C string would silently cut the value at. */
static char *pct_decode(const char *s, size_t n)
{
    char *o = xmalloc(n + 1), *w = o;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = hexval((unsigned char)s[i + 1])) >= 0 &&
            (lo = hexval((unsigned char)s[i + 2])) >= 0) {
            if ((*w++ = (char)(hi << 4 | lo)) == '\0') {
                free(o);
                return NULL;
            }
            i += 2;
        } else
            *w++ = s[i];
    }
    *w = '\0';
    return o;
}

static int fail(struct redis_url *u, const char **why, const char *msg)
{
    redis_url_cleanup(u);
    if (why)
        *why = msg;
    return -1;
}

static int parse_db(const char *s, int *db)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || v < 0 || v > 1000)
        return -1;
    *db = (int)v;
    return 0;
}

int redis_url_parse(const char *url, struct redis_url *u, const char **why)
{
    memset(u, 0, sizeof(*u));
    u->port = 6379;
    if (url == NULL || url[0] == '\0')
        return fail(u, why, "empty");
    if (strncmp(url, "rediss://", 9) == 0)
        return fail(u, why,
                    "rediss:// (TLS) is not supported: this build's hiredis (0.14) has no TLS; "
                    "reach Redis through a local TLS tunnel (stunnel, spiped) or a unix socket "
                    "and give its redis:// or unix:// address");
    if (strncmp(url, "unix://", 7) == 0) {
        const char *p = url + 7, *q = strchr(p, '?');
        u->unix_path = q ? xstrndup(p, (size_t)(q - p)) : xstrdup(p);
        if (u->unix_path[0] != '/')
            return fail(u, why, "unix:// needs an absolute socket path: unix:///path/to.sock");
        if (q && (strncmp(q, "?db=", 4) != 0 || parse_db(q + 4, &u->db) != 0))
            return fail(u, why, "unix:// accepts only ?db=N (0..1000) after the path");
        return 0;
    }
    if (strncmp(url, "redis://", 8) != 0)
        return fail(u, why, "must start with redis:// or unix://");
    const char *p = url + 8, *at = strrchr(p, '@');
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : p; /* redis://user:pw@, redis://:pw@, redis://pw@ */
        if (colon && colon > p && (u->user = pct_decode(p, (size_t)(colon - p))) == NULL)
            return fail(u, why, "the user holds %00 (a NUL byte), which Redis cannot be sent");
        if (at > pw) {
            if ((u->password = pct_decode(pw, (size_t)(at - pw))) == NULL)
                return fail(u, why,
                            "the password holds %00 (a NUL byte), which would cut it short");
        } else if (u->user)
            return fail(u, why, "a user needs a password: redis://user:password@host");
        p = at + 1;
    }
    const char *slash = strchr(p, '/');
    char hp[300], host[300];
    size_t hl = slash ? (size_t)(slash - p) : strlen(p);
    if (hl == 0 || hl >= sizeof(hp))
        return fail(u, why, "needs a host: redis://host:port/db");
    memcpy(hp, p, hl);
    hp[hl] = '\0';
    if (hp[0] == '[' || strchr(hp, ':') != NULL) { /* host:port or [v6]:port */
        if (parse_hostport(hp, host, sizeof(host), &u->port) != 0) {
            if (hp[0] != '[' || hp[hl - 1] != ']' || hl < 3)
                return fail(u, why, "bad host:port (port 0..65535, IPv6 in brackets)");
            snprintf(host, sizeof(host), "%.*s", (int)(hl - 2), hp + 1); /* [v6], no port */
        }
    } else
        snprintf(host, sizeof(host), "%s", hp);
    if (strpbrk(host, " \t\r\n?#") != NULL)
        return fail(u, why, "bad host");
    u->host = xstrdup(host);
    if (slash && slash[1] != '\0' && parse_db(slash + 1, &u->db) != 0)
        return fail(u, why, "the database after the host must be a number 0..1000");
    return 0;
}

void redis_url_cleanup(struct redis_url *u)
{
    free(u->host);
    free(u->unix_path);
    free(u->user);
    free(u->password);
    memset(u, 0, sizeof(*u));
}

void redis_url_redact(const char *url, char *out, size_t n)
{
    if (n == 0)
        return;
    const char *sep = url ? strstr(url, "://") : NULL;
    const char *at = sep ? strrchr(sep + 3, '@') : NULL;
    if (at == NULL) {
        snprintf(out, n, "%s", url ? url : "");
        return;
    }
    const char *ui = sep + 3;
    const char *colon = memchr(ui, ':', (size_t)(at - ui));
    size_t keep = colon ? (size_t)(colon + 1 - url) : (size_t)(ui - url);
    snprintf(out, n, "%.*s***%s", (int)keep, url, at);
}
