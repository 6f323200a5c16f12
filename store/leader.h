/* leader.h - the upstream websocket lease as typed C calls (store/leader.lua,
 * leader_release.lua on the deployment keys {P}:leader and {P}:wsok): exactly one process
 * holds the lease and connects the upstream websocket (relay/ingest/upstream.c), and shares
 * whether that websocket is healthy. This module is the only C code that knows the scripts'
 * keys, arguments and replies.
 * runs on: core thread only. */
#ifndef STORE_LEADER_H
#define STORE_LEADER_H

#include <stdint.h>

struct store;

/* An answer whose shape is not the script's. */
extern const char leader_err_reply[];

/* held: holder holds the lease now (taken or renewed); ws_ok: the holder's websocket is
 * healthy (whoever holds it). Both 0 when err is set. */
typedef void leader_cb(void *arg, const char *err, int held, int ws_ok);
/* Take or renew the lease for lease_ms; healthy: holder's own websocket is ready (written
 * only while holder holds the lease). Returns 0 (cb runs once, later) or -1 when the store is
 * not ready (cb not called). */
int leader_renew(struct store *s, const char *holder, int64_t lease_ms, int healthy,
                 leader_cb *cb, void *arg);
/* Give the lease up now if holder still holds it (graceful shutdown). No answer. */
int leader_release(struct store *s, const char *holder);

#endif
