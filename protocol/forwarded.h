/* forwarded.h - client addresses behind reverse proxies (DESIGN "Client addresses behind
 * proxies"): the STATUSRELAY_TRUSTED_PROXIES list (addresses and CIDRs, IPv4 and IPv6), and
 * the client address of a request a trusted proxy forwarded, from its X-Forwarded-For or
 * Forwarded (RFC 7239) header.
 *
 * Which element is the client: each proxy on the way APPENDS the address it received the
 * connection from (nginx: `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`), so
 * everything left of the first proxy's own element was written by the client and may be
 * anything. The client is the RIGHTMOST element that is not a trusted proxy: walking from the
 * right, trusted proxies are skipped and the first other address is taken (an element that is
 * not an address before that point makes the header malformed). When every element is a
 * trusted proxy, the leftmost one is taken. Only one header is read: X-Forwarded-For when it
 * has any element, else Forwarded's `for=` parameters (quoted, bracketed IPv6 and ports
 * allowed; `unknown` and obfuscated identifiers, when reached, make it malformed).
 *
 * Address keys (proto_ip_key): an IPv4 address as text, an IPv6 address as its /64
 * ("a:b:c:d::/64": one host usually holds a whole /64). IPv4-mapped IPv6 addresses are IPv4
 * everywhere here.
 * Pure: no I/O, no state. runs on: any thread. */
#ifndef PROTO_FORWARDED_H
#define PROTO_FORWARDED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define PROTO_CIDR_MAX 64       /* entries in STATUSRELAY_TRUSTED_PROXIES at most */
#define PROTO_FWD_HEADER_MAX 8192 /* forwarded header bytes considered (longer: malformed) */
#define PROTO_IP_KEY_MAX 48     /* an address key with its NUL ("ffff:...:ffff::/64") */

struct proto_ip {
    int family;   /* AF_INET or AF_INET6 */
    uint8_t a[16]; /* network order; IPv4 in a[0..3] */
};

struct proto_cidr {
    struct proto_ip ip; /* bits past the prefix are zero */
    int bits;
};

struct proto_cidr_list {
    size_t n;
    struct proto_cidr v[PROTO_CIDR_MAX];
};

enum proto_fwd_result {
    PROTO_FWD_BAD = -1, /* a header is there but names no usable client: use the peer */
    PROTO_FWD_NONE = 0, /* neither header (or both empty): use the peer */
    PROTO_FWD_OK = 1,   /* *out is the client */
};

/* Parse len bytes of s as one address literal: dotted-quad IPv4 or IPv6 (no brackets, no
 * zone, no port). 0, or -1. */
int proto_ip_parse(const char *s, size_t len, struct proto_ip *out);
/* The address of an AF_INET / AF_INET6 socket address (mapped IPv6 becomes IPv4). 0, or -1
 * for any other family. */
int proto_ip_from_sockaddr(const struct sockaddr *sa, struct proto_ip *out);
/* The address as text (RFC 5952 form for IPv6) into out (n >= 46 always fits). */
void proto_ip_format(const struct proto_ip *ip, char *out, size_t n);
/* The per-address limit key (see above) into out (n >= PROTO_IP_KEY_MAX always fits). */
void proto_ip_key(const struct proto_ip *ip, char *out, size_t n);

/* Parse a comma-separated list of addresses and CIDRs (OWS around entries allowed; NULL or
 * blank: an empty list). 0, or -1 with *why set to a static reason. */
int proto_cidr_list_parse(const char *s, struct proto_cidr_list *out, const char **why);
/* 1 when ip lies in one of the list's entries. */
int proto_cidr_list_match(const struct proto_cidr_list *l, const struct proto_ip *ip);

/* The client of a request from a trusted proxy, from its X-Forwarded-For value (xff, xff_len;
 * several header lines joined with ",") or, when that has no element, its Forwarded value
 * (fwd, fwd_len); either may be NULL. trusted: the proxies skipped from the right. */
enum proto_fwd_result proto_forwarded_client(const char *xff, size_t xff_len, const char *fwd,
                                             size_t fwd_len, const struct proto_cidr_list *trusted,
                                             struct proto_ip *out);

#endif
