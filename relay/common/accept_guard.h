/* accept_guard.h - when a listener may accept: a connection cap and a pause on descriptor
 * exhaustion, for any event loop (the REST listener on libevent, the dashboard listener on
 * libwebsockets).
 *
 * The owner of a listening socket tells the guard what happens (a connection opened or
 * closed, accept() failed) and the guard tells it, through three hooks, to stop watching the
 * socket, to watch it again, or to call accept_guard_on_timer later. So a listener never
 * spins on a readable socket it cannot accept from:
 *   - at `cap` open connections it is paused until one closes;
 *   - accept() failing with EMFILE, ENFILE, ENOBUFS or ENOMEM pauses it for a backoff
 *     (100 ms, doubling to 1 s, back to 100 ms after a successful accept), or until a
 *     connection of this listener closes, whichever comes first.
 * Each condition is logged as one warn line at most every ACCEPT_GUARD_LOG_MS, with the
 * number of occurrences folded into it since the previous line (`suppressed=N`):
 *   level=warn msg="accept: out of descriptors" listener=http errno=EMFILE suppressed=N
 *   level=warn msg="accept: connection cap reached" listener=ws cap=N suppressed=N
 *
 * Per address: the owner may also count connections per client address key (an IPv4
 * address, an IPv6 /64: protocol/forwarded.h proto_ip_key) against `per_address`
 * (accept_guard_set_per_address); accept_guard_addr_take refuses the one past it (the owner
 * closes that connection) with a warn line at the same rate:
 *   level=warn msg="accept: per-address connection cap reached" listener=http addr=A cap=N
 *   suppressed=N
 * The last `reserve` slots below the cap (accept_guard_reserved) are for connections the
 * owner lets in only for privileged requests (the REST port: the upstream's signed webhooks
 * and admin-token holders), so that one crowd cannot take every slot.
 * runs on: the thread of the listener it guards (one guard, one thread; no locking). */
#ifndef RELAY_COMMON_ACCEPT_GUARD_H
#define RELAY_COMMON_ACCEPT_GUARD_H

#include <stdint.h>

#define ACCEPT_GUARD_LOG_MS 10000    /* one warn line per condition at most this often */
#define ACCEPT_GUARD_BACKOFF_MIN_MS 100
#define ACCEPT_GUARD_BACKOFF_MAX_MS 1000

struct accept_guard_ops {
    void (*pause)(void *arg);              /* stop watching the listening socket */
    void (*resume)(void *arg);             /* watch it again */
    void (*arm)(void *arg, int64_t ms);    /* call accept_guard_on_timer in ms (replaces) */
};

struct accept_guard;

/* A guard for the listener `name` (a static string: "http", "ws") allowing `cap` (>= 1) open
 * connections. ops and arg are borrowed and must outlive the guard's last hook call (none
 * after accept_guard_free). Never NULL (allocation aborts). */
struct accept_guard *accept_guard_new(const char *name, int64_t cap,
                                      const struct accept_guard_ops *ops, void *arg);
/* Free, once nothing can report a close any more (the connections were closed or their
 * owner is gone). NULL-safe. */
void accept_guard_free(struct accept_guard *g);

/* A connection was accepted (count + 1); at the cap the listener is paused. */
void accept_guard_opened(struct accept_guard *g);
/* A connection counted by accept_guard_opened is gone; below the cap (and out of a
 * descriptor pause) the listener resumes. */
void accept_guard_closed(struct accept_guard *g);
/* accept() failed with errno err. Returns 1 when the listener is now paused (a resource
 * error: EMFILE, ENFILE, ENOBUFS, ENOMEM), 0 for anything else (the caller carries on; a
 * persistent other error is logged at the same rate as the descriptor one). */
int accept_guard_failed(struct accept_guard *g, int err);
/* The timer asked for through ops->arm fired: resume unless at the cap. */
void accept_guard_on_timer(struct accept_guard *g);

/* Count at most per_address (0: no limit) connections per address key. */
void accept_guard_set_per_address(struct accept_guard *g, int64_t per_address);
/* One more connection of key: 0, or -1 (nothing counted, logged) when key is at its cap. */
int accept_guard_addr_take(struct accept_guard *g, const char *key);
/* A connection counted by accept_guard_addr_take of key is gone. */
void accept_guard_addr_put(struct accept_guard *g, const char *key);
/* Connections counted for key. */
int64_t accept_guard_addr_count(const struct accept_guard *g, const char *key);
/* 1 when the connections now open reach into the reserve: the last cap/8 slots (1 to 64; none
 * with a cap below 2). */
int accept_guard_reserved(const struct accept_guard *g);
/* The same for n open connections. */
int accept_guard_reserved_at(const struct accept_guard *g, int64_t n);

/* Open connections counted. */
int64_t accept_guard_count(const struct accept_guard *g);
/* 1 while the listener is paused (cap or descriptors). */
int accept_guard_paused(const struct accept_guard *g);

#endif
