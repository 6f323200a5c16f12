/* upstream.h - the core side of the upstream websocket: which ids are subscribed, what the
 * connection's state is, parsing of frames (protocol/normalize) into ingest. The lws side
 * (relay/upstream_ws.c) only moves frames. Subscribes on every ready greeting, unsubscribes
 * on terminal states, reports health to the poller (fast polling while down/unconfirmed).
 * runs on: core thread. */
#ifndef RELAY_UPSTREAM_H
#define RELAY_UPSTREAM_H

#include <stdint.h>

struct core;
struct xmsg;
struct upstream;

struct upstream *upstream_new(struct core *c);
void upstream_free(struct upstream *u);
/* Load tracked ids from Redis and compete for the upstream websocket lease
 * ({P}:leader, STATUSRELAY_LEADER_LEASE, renewed every quarter lease); the holder connects,
 * the others stand by and take over when the holder stops renewing. */
void upstream_start(struct upstream *u);
/* Give the lease up (graceful shutdown) so another process takes over at once. */
void upstream_shutdown(struct upstream *u);
/* 1 while this process holds the upstream websocket lease. */
int upstream_held(const struct upstream *u);
/* Handle an XMSG_UP_* message from the ws thread (takes nothing; caller frees m). */
void upstream_on_msg(struct upstream *u, const struct xmsg *m);
/* Subscribe / unsubscribe one id (no-op when already in that state). */
void upstream_track(struct upstream *u, const char *id);
void upstream_untrack(struct upstream *u, const char *id);
/* 1 when the websocket is ready and the subscription of id is acknowledged. */
int upstream_confirmed(const struct upstream *u, const char *id);
/* "down", "connecting", "ready", "standby" (another process holds the lease). */
const char *upstream_state_name(const struct upstream *u);
/* ms (monotonic) when the connection last went down, 0 while up; gap repair starts there. */
int64_t upstream_down_since(const struct upstream *u);
/* Tell the upstream module a safety poll found a change the websocket never reported. */
void upstream_lagging(struct upstream *u);
/* 1 when id is tracked and not final (subscribed or to be subscribed). */
int upstream_tracked(const struct upstream *u, const char *id);
/* Number of subscribed ids. */
uint64_t upstream_subscriptions(const struct upstream *u);

#endif
