/* ws_url.c - see ws_url.h. runs on: any thread. */
#include "protocol/ws_url.h"
#include "protocol/proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A new formatted string, or NULL (allocation). */
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s == NULL)
        return NULL;
    va_start(ap, f);
    vsnprintf(s, (size_t)n + 1, f, ap);
    va_end(ap);
    return s;
}

/* RFC 3986 unreserved characters stay, every other byte is %XX. */
static char *urlencode(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(strlen(s) * 3 + 1), *p = out;
    if (out == NULL)
        return NULL;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
            *c == '-' || *c == '.' || *c == '_' || *c == '~') {
            *p++ = (char)*c;
        } else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        }
    }
    *p = '\0';
    return out;
}

void proto_ws_url_cleanup(struct proto_ws_url *u)
{
    if (u == NULL)
        return;
    free(u->address);
    free(u->host_hdr);
    free(u->target);
    free(u->log_url);
    memset(u, 0, sizeof(*u));
}

/* The request target and the loggable URL from rest (what follows the authority). */
static int set_target(struct proto_ws_url *u, const char *rest, const char *api_key)
{
    size_t plen = strcspn(rest, "#");
    char *path = *rest == '/' ? fmt("%.*s", (int)plen, rest) : fmt("/%.*s", (int)plen, rest);
    if (path == NULL)
        return PROTO_ENOMEM;
    size_t qpos = strcspn(path, "?");
    u->log_url = fmt("%s://%s%.*s", u->tls ? "wss" : "ws", u->host_hdr, (int)qpos, path);
    if (api_key != NULL && api_key[0] != '\0') {
        char *enc = urlencode(api_key);
        const char *sep = path[qpos] == '\0' ? "?" : path[qpos + 1] == '\0' ? "" : "&";
        u->target = enc != NULL ? fmt("%s%sapiKey=%s", path, sep, enc) : NULL;
        free(enc);
        free(path);
    } else {
        u->target = path;
    }
    return u->log_url != NULL && u->target != NULL ? 0 : PROTO_ENOMEM;
}

int proto_ws_url_parse(const char *url, const char *api_key, struct proto_ws_url *out)
{
    memset(out, 0, sizeof(*out));
    const char *p;
    if (url == NULL)
        return PROTO_EVALUE;
    if (strncasecmp(url, "ws://", 5) == 0) {
        p = url + 5;
    } else if (strncasecmp(url, "wss://", 6) == 0) {
        out->tls = 1;
        p = url + 6;
    } else {
        return PROTO_EVALUE;
    }
    size_t alen = strcspn(p, "/?#");
    const char *rest = p + alen;
    if (alen == 0 || memchr(p, '@', alen) != NULL)
        return PROTO_EVALUE;
    const char *host = p, *port_s = NULL;
    size_t hlen;
    int v6 = 0;
    if (*p == '[') {
        const char *rb = memchr(p, ']', alen);
        if (rb == NULL)
            return PROTO_EVALUE;
        host = p + 1;
        hlen = (size_t)(rb - host);
        v6 = 1;
        if (rb + 1 < rest) {
            if (rb[1] != ':')
                return PROTO_EVALUE;
            port_s = rb + 2;
        }
    } else {
        const char *colon = memchr(p, ':', alen);
        hlen = colon ? (size_t)(colon - p) : alen;
        port_s = colon ? colon + 1 : NULL;
    }
    if (hlen == 0 || hlen > 253)
        return PROTO_EVALUE;
    out->port = out->tls ? 443 : 80;
    if (port_s != NULL) {
        int port = 0;
        if (port_s == rest)
            return PROTO_EVALUE;
        for (const char *c = port_s; c < rest; c++) {
            if (*c < '0' || *c > '9' || port > 65535)
                return PROTO_EVALUE;
            port = port * 10 + (*c - '0');
        }
        if (port < 1 || port > 65535)
            return PROTO_EVALUE;
        out->port = port;
    }
    int rc = PROTO_ENOMEM;
    if ((out->address = fmt("%.*s", (int)hlen, host)) == NULL)
        goto fail;
    if (out->port == (out->tls ? 443 : 80))
        out->host_hdr = v6 ? fmt("[%s]", out->address) : fmt("%s", out->address);
    else
        out->host_hdr = v6 ? fmt("[%s]:%d", out->address, out->port)
                           : fmt("%s:%d", out->address, out->port);
    if (out->host_hdr == NULL || (rc = set_target(out, rest, api_key)) != 0)
        goto fail;
    return 0;
fail:
    proto_ws_url_cleanup(out);
    return rc;
}
