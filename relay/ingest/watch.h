/* watch.h - the watch of tracked requests, kept in Redis and the same for every process
 * (store/watch_lib.lua holds the phase rules: active, settled, ended).
 *
 * In every process this module:
 *  - keeps the upstream module's set of subscribed ids equal to the watched set in Redis
 *    (store/watch_sync.lua, every WATCH_SYNC_MS): whichever process tracked a request, the
 *    upstream websocket holder subscribes it within a second, and again after a takeover or
 *    a restart;
 *  - ends watches whose window passed (store/watch_expire.lua; idempotent, any process);
 *  - refreshes the gauges of stuck requests and the oldest unsettled request;
 *  - converts, once, requests tracked by a version without watches (watch_migrate.lua);
 *  - at start-up, settles the fallback watches a version before fallback was settled kept
 *    active (watch_fallback.lua, each partition's act index).
 * runs on: core thread. */
#ifndef RELAY_WATCH_H
#define RELAY_WATCH_H

struct core;
struct watch;

struct watch *watch_new(struct core *c);
void watch_free(struct watch *w);
/* Start the timers (after the upstream module exists). */
void watch_start(struct watch *w);
/* Look at the watched set again now (a request was just tracked by this process). */
void watch_kick(struct watch *w);

/* The windows every watch-moving script takes (store/watches.h), from the settings. */
struct watches_windows;
void watch_windows(const struct core *c, struct watches_windows *out);

#endif
