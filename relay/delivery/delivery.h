/* delivery.h - the webhook delivery service of a process: it owns the endpoint set
 * (relay/delivery/endpoints.h), the fan-out (fanout.h) and the dispatcher (dispatch.h), and
 * sits above them (they know the endpoint set, never this owner). Replays (replay.h) are
 * operations clients start on the running service; the service does not own them.
 * runs on: core thread. */
#ifndef RELAY_DELIVERY_H
#define RELAY_DELIVERY_H

struct core;
struct dispatch;

/* Start the service of c (endpoint set, fan-out, dispatcher with its reaper) and set
 * c->webhooks and c->delivery. Call after store_start (work begins when Redis is up).
 * Returns 0. */
int delivery_start(struct core *c);
/* Stop claiming and fanning out and free the service; attempts still in flight complete
 * (when httpc_free ends them) without recording anything, so their leases expire and
 * another process or the next start sends them again. Call before httpc_free. NULL-safe
 * on c->delivery. */
void delivery_stop(struct core *c);
/* 1 while first attempts, fan-out batches not yet committed, or outcomes not yet written
 * remain (graceful shutdown waits for 0; no new work starts once c->shutting_down is set). */
int delivery_busy(const struct core *c);
/* Partitions whose fan-out lease this process holds now (0 before delivery_start). */
unsigned delivery_partitions_held(const struct core *c);
/* The dispatcher (NULL before delivery_start and after delivery_stop). */
struct dispatch *delivery_dispatch(const struct core *c);

#endif
