/* fuzz_forwarded.c - libFuzzer target for protocol/forwarded.c: proto_cidr_list_parse,
 * proto_cidr_list_match, proto_forwarded_client (as X-Forwarded-For and as Forwarded),
 * proto_ip_parse, proto_ip_key.
 *
 * Properties: never crashes; a parsed list has at most PROTO_CIDR_MAX entries of a known
 * family with a prefix within its length, and every entry matches its own address; a client
 * found is IPv4 or IPv6 with a key that fits; an X-Forwarded-For value that ends in ", A"
 * for an untrusted literal A yields A whatever comes before (the client's own part cannot
 * change the answer); an address literal agrees with inet_pton.
 * runs on: the fuzzer's thread. */
#include "protocol/forwarded.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_list(const char *s)
{
    static struct proto_cidr_list l;
    const char *why = NULL;
    if (proto_cidr_list_parse(s, &l, &why) != 0) {
        if (why == NULL || why[0] == '\0')
            abort();
        return;
    }
    if (l.n > PROTO_CIDR_MAX)
        abort();
    for (size_t i = 0; i < l.n; i++) {
        const struct proto_cidr *c = &l.v[i];
        if ((c->ip.family != AF_INET && c->ip.family != AF_INET6) || c->bits < 0 ||
            c->bits > (c->ip.family == AF_INET ? 32 : 128))
            abort();
        if (!proto_cidr_list_match(&l, &c->ip))
            abort();
    }
}

static void check_client(const char *s, size_t n, const struct proto_cidr_list *trusted)
{
    struct proto_ip ip;
    char key[PROTO_IP_KEY_MAX];
    for (int as_fwd = 0; as_fwd < 2; as_fwd++) {
        enum proto_fwd_result r = as_fwd ? proto_forwarded_client(NULL, 0, s, n, trusted, &ip)
                                         : proto_forwarded_client(s, n, NULL, 0, trusted, &ip);
        if (r != PROTO_FWD_OK && r != PROTO_FWD_NONE && r != PROTO_FWD_BAD)
            abort();
        if (r == PROTO_FWD_OK) {
            if (ip.family != AF_INET && ip.family != AF_INET6)
                abort();
            proto_ip_key(&ip, key, sizeof(key));
            if (key[0] == '\0' || strlen(key) >= sizeof(key))
                abort();
        }
    }
    /* spoofing: whatever the client wrote, the real peer appended last is the answer */
    char *x = malloc(n + 32);
    if (x == NULL)
        abort();
    memcpy(x, s, n);
    memcpy(x + n, ", 203.0.113.77", 14);
    if (proto_forwarded_client(x, n + 14, NULL, 0, trusted, &ip) != PROTO_FWD_OK ||
        ip.family != AF_INET || memcmp(ip.a, "\xcb\x00\x71\x4d", 4) != 0)
        abort();
    free(x);
}

static void check_literal(const char *s, size_t n)
{
    struct proto_ip ip;
    unsigned char a[16];
    int mine = proto_ip_parse(s, n, &ip) == 0;
    if (strlen(s) != n || n >= 64)
        return;
    int v4 = inet_pton(AF_INET, s, a) == 1, v6 = !v4 && inet_pton(AF_INET6, s, a) == 1;
    if (mine != (v4 || v6))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct proto_cidr_list trusted;
    const char *why;
    char *s = malloc(size + 1);
    if (s == NULL)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    if (proto_cidr_list_parse("127.0.0.0/8, 10.0.0.0/8, ::1, 2001:db8::/32", &trusted, &why))
        abort();
    check_list(s);
    check_client(s, size, &trusted);
    check_literal(s, size);
    free(s);
    return 0;
}
