/* upstream.h - the core side of the upstream websocket: which ids are subscribed, what the
 * connection's state is, parsing of frames (protocol/normalize) into ingest. The lws side
 * (relay/edge/upstream_ws.c) only moves frames. Subscribes every watched request (settled ones
 * too: the upstream reverses them) on every ready greeting, reports health to the poller
 * (fast polling while down/unconfirmed).
 * runs on: core thread. */
#ifndef RELAY_UPSTREAM_H
#define RELAY_UPSTREAM_H

#include <stdint.h>

struct core;
struct xmsg;
struct upstream;

struct upstream *upstream_new(struct core *c);
void upstream_free(struct upstream *u);
/* Compete for the upstream websocket lease
 * ({P}:leader, STATUSRELAY_LEADER_LEASE, renewed every quarter lease); the holder connects,
 * the others stand by and take over when the holder stops renewing. */
void upstream_start(struct upstream *u);
/* Give the lease up (graceful shutdown) so another process takes over at once. */
void upstream_shutdown(struct upstream *u);
/* Listener: the websocket is ready again after being down since since_wall_ms (wall clock):
 * what it missed must be read another way (the poller repairs the gap). One listener. */
typedef void upstream_gap_cb(void *arg, int64_t since_wall_ms);
void upstream_on_gap(struct upstream *u, upstream_gap_cb *fn, void *arg);
/* Handle an XMSG_UP_* message from the ws thread. Returns 1 when it took m (a frame: kept
 * until applied), else 0 and the caller frees m. */
int upstream_on_msg(struct upstream *u, struct xmsg *m);
/* Subscribe / unsubscribe one id (no-op when already in that state). The set of ids is the
 * watched set kept in Redis (relay/ingest/watch.c keeps it in step in every process; only the
 * lease holder sends frames). */
void upstream_track(struct upstream *u, const char *id);
void upstream_untrack(struct upstream *u, const char *id);
/* A full copy of one part of the watched set follows (the store's partition: in_scope(scope,
 * id) says whether id belongs to it): upstream_sync_begin, upstream_track for each id of it,
 * upstream_sync_end unsubscribes every id of that part that was not named in between (other
 * ids stay). */
typedef int upstream_scope_fn(const void *scope, const char *id);
void upstream_sync_begin(struct upstream *u, upstream_scope_fn *in_scope, const void *scope);
void upstream_sync_end(struct upstream *u);
/* 1 when the websocket is ready and the subscription of id is acknowledged. */
int upstream_confirmed(const struct upstream *u, const char *id);
/* 1 when the upstream websocket can confirm subscriptions: this process holds it and it is
 * ready, or (standby) the holder reports it healthy; 0 while it is down or lagging. */
int upstream_healthy(const struct upstream *u);
/* "down", "connecting", "ready", "standby" (another process holds the lease). */
const char *upstream_state_name(const struct upstream *u);
/* Tell the upstream module a safety poll found a change the websocket never reported. */
void upstream_lagging(struct upstream *u);
/* 1 when id is watched (subscribed, or to be subscribed by the holder). */
int upstream_tracked(const struct upstream *u, const char *id);
/* Number of subscribed ids. */
uint64_t upstream_subscriptions(const struct upstream *u);

#endif
