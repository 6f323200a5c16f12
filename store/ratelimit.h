/* ratelimit.h - the per-endpoint rate limit (an endpoint's "rateLimit") as typed C calls:
 * store/ratelimit_take.lua and ratelimit_give.lua on the deployment key {P}:rl:<endpoint>, a
 * sliding log of grants shared by every process, so that two processes cannot both send a
 * window's worth. A caller takes a few sends at a time, sends them at once, and gives back
 * what it did not use. This module is the only C code that knows the scripts' keys,
 * arguments and replies.
 * runs on: core thread only. */
#ifndef STORE_RATELIMIT_H
#define STORE_RATELIMIT_H

#include <stdint.h>

struct store;

/* An answer whose shape is not the script's. */
extern const char ratelimit_err_reply[];

/* The answer of a take: granted sends (0..wanted); at: the grant's time on the Redis clock
 * (ms; the id to give back with); wait_ms: how long until the log has room again (0 when it
 * has room now). All 0 when err is set (a store error, or ratelimit_err_reply). */
typedef void ratelimit_take_cb(void *arg, const char *err, long granted, int64_t at,
                               int64_t wait_ms);
/* Take up to wanted sends for endpoint whid: at most limit sends are granted in any window of
 * window_ms, across every process. Returns 0 (cb runs once, later) or -1 when the store is
 * not ready (cb not called). */
int ratelimit_take(struct store *s, const char *whid, long limit, int64_t window_ms,
                   long wanted, ratelimit_take_cb *cb, void *arg);
/* Give n unused sends of the grant at back (no answer; a grant that left the window
 * already is ignored). Returns 0 sent, -1 not sent. */
int ratelimit_give(struct store *s, const char *whid, int64_t at, long n);

#endif
