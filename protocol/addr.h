/* addr.h - webhook target policy (the SSRF guard) and webhook URL parsing.
 *
 * Pure: no resolver, no sockets. The daemon resolves names itself and asks
 * proto_addr_forbidden about every address it is about to connect to (and, at registration,
 * about every address a name resolves to); proto_host_literal recognises the address
 * spellings the system resolver takes as literals without asking DNS, so that "127.1" or
 * "0x7f000001" is judged as the address it is.
 *
 * Forbidden (unless the operator allows private targets), IPv4:
 *   0.0.0.0/8 unspecified · 10/8, 172.16/12, 192.168/16 private · 100.64/10 cgnat ·
 *   127/8 loopback · 169.254/16 link_local · 192.0.0.0/24 (IETF protocol assignments,
 *   DS-Lite, NAT64 discovery), 192.88.99.0/24 (deprecated 6to4 relay anycast),
 *   240/4 reserved · 192.0.2/24, 198.51.100/24, 203.0.113/24 documentation ·
 *   198.18/15 benchmark · 224/4 multicast · 255.255.255.255 broadcast.
 * IPv6: an allowlist. Only global unicast 2000::/3 may pass, minus 2001::/23 (IETF
 *   protocol assignments incl. Teredo 2001::/32, ORCHID) reserved, 2001:2::/48 benchmark,
 *   2001:db8::/32 and 3fff::/20 documentation, and 2002::/16 (6to4) when its embedded IPv4
 *   is forbidden. Outside 2000::/3: :: unspecified, ::1 loopback, fe80::/10 link_local,
 *   fc00::/7 and fec0::/10 private, ff00::/8 multicast, all else reserved, except the forms
 *   that carry an IPv4 address, judged by that address: ::ffff:0:0/96 (mapped) and
 *   64:ff9b::/96 (NAT64 well-known prefix, so DNS64 networks keep working). IPv4-compatible
 *   ::a.b.c.d (deprecated) is always forbidden, named after the embedded address when that
 *   is forbidden itself. 64:ff9b:1::/48 (local-use NAT64) is reserved.
 * Not detectable here: a network-specific NAT64 prefix chosen by the operator (it lies in
 * 2000::/3); operators on such networks decide with STATUSRELAY_ALLOW_PRIVATE_TARGETS.
 * runs on: any thread (no state). */
#ifndef PROTO_ADDR_H
#define PROTO_ADDR_H

#include "protocol/proto.h"

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

/* Why an address is forbidden; 0 means allowed. Names via proto_addr_reason. */
enum proto_addr_reason {
    PROTO_ADDR_OK = 0,
    PROTO_ADDR_LOOPBACK,        /* "loopback" */
    PROTO_ADDR_PRIVATE,         /* "private": RFC 1918, IPv6 unique-local and site-local */
    PROTO_ADDR_CGNAT,           /* "cgnat": 100.64/10 shared address space */
    PROTO_ADDR_LINK_LOCAL,      /* "link_local" */
    PROTO_ADDR_MULTICAST,       /* "multicast" */
    PROTO_ADDR_UNSPECIFIED,     /* "unspecified": 0.0.0.0/8 and :: */
    PROTO_ADDR_BROADCAST,       /* "broadcast" */
    PROTO_ADDR_DOCUMENTATION,   /* "documentation" */
    PROTO_ADDR_BENCHMARK,       /* "benchmark" */
    PROTO_ADDR_RESERVED,        /* "reserved": everything else not globally routed */
    PROTO_ADDR_FAMILY,          /* "family": not AF_INET/AF_INET6, or a short sockaddr */
};

/* Nonzero (an enum proto_addr_reason) when a webhook must not connect to sa; 0 when allowed.
 * Fails closed: NULL, unknown families and len shorter than the family's sockaddr are
 * PROTO_ADDR_FAMILY. Takes what getaddrinfo and curl's opensocket callback hand out. */
int proto_addr_forbidden(const struct sockaddr *sa, socklen_t len);

/* Static name of a reason ("loopback", ...; "allowed" for 0, "unknown" out of range), for
 * API errors, logs and metrics. */
const char *proto_addr_reason(int reason);

/* 1 when host is an address literal as the system resolver (glibc getaddrinfo) takes it,
 * filling ss (may be NULL) with AF_INET or AF_INET6 and port 0; 0 when it is not (a name, or
 * garbage). IPv4 follows inet_aton exactly, without trailing text: 1 to 4 parts, each
 * decimal, octal (leading 0) or hex (0x), the last part filling the remaining bytes
 * ("127.1", "2130706433", "0x7f000001", "0177.0.0.1"). IPv6 is inet_pton, with or without
 * brackets, an optional "%zone" ignored (scope id 0). */
int proto_host_literal(const char *host, struct sockaddr_storage *ss);

/* 1 when a listen address "host:port" ("[v6]:port" for IPv6) can only be reached from this
 * machine: "localhost", or an address literal (any spelling proto_host_literal takes) that
 * is IPv4 127/8, IPv6 ::1, or ::ffff:127.x.y.z; 0 for anything else, names included
 * ("127.0.0.1.example.com" is a name). The one rule for "listening beyond loopback" (the
 * admin token requirement, the dashboard's anonymous broad subscriptions). */
int proto_listen_is_loopback(const char *hostport);

/* 1 when an HTTP Host header value ("name", "name:port", "[v6]:port") names this relay: a
 * loopback host in any spelling proto_listen_is_loopback takes (any port, or none), or a name
 * in allowed (comma- or space-separated, case-insensitive, compared without the port; NULL =
 * none). 0 for anything else, NULL and "" included, and for any value that is not
 * uri-host[:port] (userinfo "127.0.0.1:80@evil", a port that is not 1-5 digits <= 65535, a
 * list "a,b" as two Host headers joined, spaces). The one DNS-rebinding rule of both
 * listeners (REST without an admin token, the dashboard port without a stream token). */
int proto_host_names_relay(const char *host, const char *allowed);
/* 1 when host (a name, not bracketed) is "localhost" or a name under it ("a.localhost"), in any
 * case, with or without trailing dots: names RFC 6761 reserves for the loopback interface,
 * whatever a resolver answers for them. */
int proto_host_is_localhost(const char *host);

#define PROTO_URL_MAX 2048          /* longest accepted webhook URL */
#define PROTO_HOST_MAX 254          /* a DNS name of 253 chars plus an optional final dot */

/* A parsed webhook target. Fixed buffers: no allocation. */
struct proto_url {
    int https;                      /* 1 for https, 0 for http */
    char host[PROTO_HOST_MAX + 1];  /* lowercase name, or the literal in canonical text
                                       ("127.0.0.1", "::1": no brackets) */
    int family;                     /* AF_INET/AF_INET6 when host is a literal, else 0 */
    struct sockaddr_storage addr;   /* the literal's address with port set, when family */
    uint16_t port;                  /* explicit, else 80/443 */
    int port_explicit;
    char target[PROTO_URL_MAX + 1]; /* path and query as given, "/" when empty */
};

/* Parse a webhook URL: scheme http or https (any case) then "://"; no userinfo; host a DNS
 * name ([A-Za-z0-9_-] labels of 1..63, at most 253 chars, one final dot allowed), an IPv4
 * literal in any spelling proto_host_literal takes, or a bracketed IPv6 literal (no zone);
 * a host whose last label looks numeric (digits, or 0x...) must be an IPv4 literal
 * (WHATWG's rule, so "1.2.3.4.5" or "127.0.0.1." are refused, not sent to DNS); optional
 * port 1..65535; path and query of RFC 3986 characters and %XX escapes; no fragment; no
 * whitespace, control, non-ASCII or backslash anywhere; at most PROTO_URL_MAX bytes.
 * Syntax only: the caller applies proto_addr_forbidden to literals and resolved names.
 * Returns 0 and fills out, or PROTO_ETOOLONG / PROTO_EVALUE with err (may be NULL) naming
 * the part ("url", "url.scheme", "url.host", "url.port", "url.path"). */
int proto_url_parse(const char *url, struct proto_url *out, struct proto_err *err);

/* The canonical text of a parsed URL: scheme, lowercase host (IPv6 in brackets, literals in
 * canonical form), ":port" when explicit, target. Hand this to the HTTP client so that it
 * connects where the policy looked. out holds PROTO_URL_MAX + 1 + 32 bytes; returns 0 or
 * PROTO_ETOOLONG. */
int proto_url_format(const struct proto_url *u, char *out, size_t outsz);

#endif
