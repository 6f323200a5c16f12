/* fuzz_url_parse.c - libFuzzer target for protocol/addr.c: proto_url_parse, proto_url_format,
 * proto_host_literal and proto_addr_forbidden; and protocol/ws_url.c: proto_ws_url_parse.
 *
 * Properties: never crashes; a parsed URL satisfies its invariants and its canonical text
 * parses to the same target (a fixpoint); IPv4 literals agree with the C library's
 * inet_aton and IPv6 literals with inet_pton; an IPv4 address and its mapped / NAT64 forms
 * get the same verdict; a parsed upstream websocket URL has a host, a port, a target that
 * starts with '/' and carries the key last, a loggable URL without query or key, and that
 * loggable URL parses to the same host, port and scheme.
 * runs on: the fuzzer's thread. */
#include "protocol/addr.h"
#include "protocol/ws_url.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_url(const char *s)
{
    static struct proto_url u, u2;          /* large: keep them off the stack */
    static char canon[PROTO_URL_MAX + 64];
    struct proto_err err = {0};
    size_t i;
    int rc = proto_url_parse(s, &u, &err);

    if (rc != 0) {
        if ((rc != PROTO_EVALUE && rc != PROTO_ETOOLONG) || err.code != rc)
            abort();
        return;
    }
    if (u.host[0] == '\0' || u.port == 0 || u.target[0] != '/' || strlen(s) > PROTO_URL_MAX ||
        strchr(u.target, '#') != NULL || (u.family != 0 && u.family != AF_INET &&
                                          u.family != AF_INET6))
        abort();
    for (i = 0; u.family == 0 && u.host[i] != '\0'; i++)
        if (!((u.host[i] >= 'a' && u.host[i] <= 'z') || (u.host[i] >= '0' && u.host[i] <= '9') ||
              u.host[i] == '.' || u.host[i] == '-' || u.host[i] == '_'))
            abort();
    if (u.family != 0 && proto_addr_forbidden((struct sockaddr *)&u.addr, sizeof(u.addr)) < 0)
        abort();
    if (proto_url_format(&u, canon, sizeof(canon)) != 0)
        abort();
    if (strlen(canon) <= PROTO_URL_MAX) {
        if (proto_url_parse(canon, &u2, NULL) != 0 || strcmp(u.host, u2.host) != 0 ||
            strcmp(u.target, u2.target) != 0 || u.port != u2.port || u.https != u2.https ||
            u.family != u2.family || memcmp(&u.addr, &u2.addr, sizeof(u.addr)) != 0)
            abort();
    }
}

static void check_ws_url(const char *s)
{
    struct proto_ws_url w, w2;
    int rc = proto_ws_url_parse(s, "k y", &w);
    if (rc != 0) {
        if (rc != PROTO_EVALUE || w.address != NULL || w.target != NULL)
            abort();
        return;
    }
    size_t tl = strlen(w.target);
    if (w.address[0] == '\0' || w.port < 1 || w.port > 65535 || w.target[0] != '/' ||
        tl < 12 || strcmp(w.target + tl - 12, "apiKey=k%20y") != 0 || strchr(w.target, '#') ||
        strchr(w.log_url, '?') != NULL)
        abort();
    if (proto_ws_url_parse(w.log_url, NULL, &w2) != 0 || strcmp(w.address, w2.address) != 0 ||
        w.port != w2.port || w.tls != w2.tls || strcmp(w.host_hdr, w2.host_hdr) != 0)
        abort();
    proto_ws_url_cleanup(&w2);
    proto_ws_url_cleanup(&w);
}

static void check_literal(const char *s)
{
    struct sockaddr_storage ss;
    struct in_addr a4;
    struct in6_addr a6;
    int lit = proto_host_literal(s, &ss);

    if (strpbrk(s, " \t\n\v\f\r") == NULL) {        /* inet_aton stops at whitespace */
        int v4 = inet_aton(s, &a4) != 0;
        if (v4 != (lit && ss.ss_family == AF_INET))
            abort();
        if (v4 && ((struct sockaddr_in *)&ss)->sin_addr.s_addr != a4.s_addr)
            abort();
    }
    if (s[0] != '[' && strchr(s, '%') == NULL && strchr(s, ':') != NULL) {
        int v6 = inet_pton(AF_INET6, s, &a6) == 1;
        if (v6 != (lit && ss.ss_family == AF_INET6))
            abort();
        if (v6 && memcmp(&((struct sockaddr_in6 *)&ss)->sin6_addr, &a6, 16) != 0)
            abort();
    }
    if (lit && proto_addr_forbidden((struct sockaddr *)&ss, sizeof(ss)) < 0)
        abort();
}

static void check_policy(const uint8_t *data, size_t size)
{
    struct sockaddr_in in = {.sin_family = AF_INET};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
    int r4, r;

    if (size < 4)
        return;
    memcpy(&in.sin_addr, data, 4);
    r4 = proto_addr_forbidden((struct sockaddr *)&in, sizeof(in));
    if (r4 < 0 || r4 > PROTO_ADDR_FAMILY || strcmp(proto_addr_reason(r4), "unknown") == 0)
        abort();
    memcpy(in6.sin6_addr.s6_addr, mapped, 12);
    memcpy(in6.sin6_addr.s6_addr + 12, data, 4);
    if (proto_addr_forbidden((struct sockaddr *)&in6, sizeof(in6)) != r4)
        abort();
    memcpy(in6.sin6_addr.s6_addr, nat64, 12);
    if (proto_addr_forbidden((struct sockaddr *)&in6, sizeof(in6)) != r4)
        abort();
    if (size >= 16) {
        memcpy(in6.sin6_addr.s6_addr, data, 16);
        r = proto_addr_forbidden((struct sockaddr *)&in6, sizeof(in6));
        if (r < 0 || r > PROTO_ADDR_FAMILY)
            abort();
        if ((data[0] & 0xe0) != 0x20 && r == PROTO_ADDR_OK &&
            memcmp(data, mapped, 12) != 0 && memcmp(data, nat64, 12) != 0)
            abort();                                /* outside 2000::/3 only via IPv4 forms */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (s == NULL)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    check_url(s);
    check_ws_url(s);
    check_literal(s);
    check_policy(data, size);
    free(s);
    return 0;
}
