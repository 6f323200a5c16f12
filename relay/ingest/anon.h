/* anon.h - anonymous watches: requests watched only because a dashboard connection without
 * the stream token subscribed to them (README "Anonymous subscriptions"). Such a watch lives
 * while some connection is subscribed: this process holds each id its connections follow
 * with a lease in Redis (STATUSRELAY_WS_ANON_LEASE), refreshed while subscribed and released
 * when the last local subscriber leaves; when no process holds it any more - released, or
 * the lease of a killed process expired - the watch ends (store/anon_lib.lua). Tracking
 * through the API always wins. Anonymous watches are polled in their own tier, after the
 * tracked requests and with at most half of what the budget has left (store/poll_claim.lua),
 * and one the upstream answers 404 for ANON_TRIES times ends and is refused for a while.
 * Also the per-address count of new ids (STATUSRELAY_WS_ANON_IDS_PER_ADDRESS), and the read
 * leases of status reads (anon_read: README "Upstream-compatible surface").
 * runs on: core thread. */
#ifndef RELAY_ANON_H
#define RELAY_ANON_H

#include <stddef.h>

struct core;
struct anon;

#define ANON_TRIES 3                 /* 404 answers that end an anonymous watch */
#define ANON_NOT_FOUND_MS 600000     /* negative cache of such an id: 10 min */
#define ANON_NOT_FOUND_CAP 100000    /* at most this many ids in the negative cache */
#define ANON_ADDR_MAX 64             /* size of an address key */
#define ANON_READS_MAX 10000         /* ids held for status reads at once (beyond: not held) */

struct anon *anon_new(struct core *c);
void anon_free(struct anon *a);
/* Start the refresh and expiry timers. */
void anon_start(struct anon *a);

/* The anonymous watch of id ended because the upstream does not know it (here or in another
 * process: learned at the next hold or refresh). One listener (NULL clears it); id is
 * borrowed for the call. */
typedef void anon_gone_cb(void *arg, const char *id);
void anon_on_gone(struct anon *a, anon_gone_cb *cb, void *arg);

/* One more local subscriber of id (validated request id). The first one holds it in Redis
 * and starts its anonymous watch when nothing watches it (asynchronous; an id in the
 * negative cache is reported through anon_on_gone; while Redis is unavailable the next
 * refresh does it). */
void anon_hold(struct anon *a, const char *id);
/* One local subscriber of id fewer; the last one releases it at once (the watch ends when
 * no other process holds it and the API does not track it). */
void anon_release(struct anon *a, const char *id);
/* A status read of id (GET /intents/status/v3, relay/api/compat.c; validated request id not
 * tracked through the API): hold it like one more subscriber for STATUSRELAY_WS_ANON_LEASE
 * from now, so that it stays watched while it is read - each read renews that lease, and once
 * no read came for a lease the hold is released like a subscription that ended (the watch
 * ends unless something else holds or tracks it). A read lease is never tracking. A new hold
 * that starts the watch schedules its first poll a STATUSRELAY_POLL_INTERVAL from now (the
 * read has just seen the state), not at once. At most ANON_READS_MAX ids are held for reads:
 * beyond, a read holds nothing. */
void anon_read(struct anon *a, const char *id);

/* 1 when id is watched already as far as this process knows (held here, or in the watched
 * set every process keeps): a subscription to it starts nothing. */
int anon_watched(const struct anon *a, const char *id);

/* Graceful shutdown: release every id held here now (a killed process leaves them to the
 * lease); later holds and releases do nothing. */
void anon_shutdown(struct anon *a);

/* The poller got a 404 for a status poll of id: counts against an anonymous watch. */
void anon_upstream_404(struct anon *a, const char *id);

/* The key of a peer address (as lws reports it) for the per-address count: IPv4 as it is,
 * IPv6 by its /64, an IPv4-mapped IPv6 address as IPv4. */
void anon_addr_key(const char *peer, char *out, size_t n);
/* Take one new id for address key addr: 0, or -1 when the address is at
 * STATUSRELAY_WS_ANON_IDS_PER_ADDRESS. */
int anon_addr_take(struct anon *a, const char *addr);
/* Give one back (the subscription that took it ended). */
void anon_addr_put(struct anon *a, const char *addr);

#endif
