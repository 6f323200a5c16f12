/* follow.h - the event stream, new and resumed, for any number of partitions (one partition
 * is the degenerate case: a one-component vector is the plain stream id). The follower reads
 * what is new after its position (store_stream_read: one XREAD per partition, merged by (ms,
 * seq, partition)) and routes each entry once to the ws thread as one shared frame whose
 * streamId is the vector after it, or skips it when nobody here follows its request. Resume:
 * the gap check (store_stream_info, store_stream_gap_check), replay pages up to the
 * follower's position, then live; a client cursor ahead of the follower waits until the
 * follower passes it (going live just before the first event after it, or replaying again
 * when events the client did not see were routed meanwhile). The hand-off: hub.h.
 * runs on: core thread. */
#ifndef RELAY_DASH_FOLLOW_H
#define RELAY_DASH_FOLLOW_H

#include "protocol/lifecycle.h"
#include "relay/dash/internal.h"

struct status_event;

/* Set up the follower's state (the partition count, the position); hub_new. */
void dash_follow_init(struct hub *h);
/* Resume u from the vector u->from: gap check, then replay, then live; -1 when the command
 * could not be sent (nothing started). */
int dash_start_resume(struct hub *h, struct hsess *x, struct hsub *u);
/* Start subscription u (new, acked) once the follower has read every event written before
 * now: hold u (SS_HOLD) and wake the follower at once; the first read sent after the hold
 * that comes back short on every partition (so it held the streams' end as of then) routes
 * its events and releases u: it then resumes (u->from set) or goes live with a snapshot of
 * limit (id subscriptions: their one id). The snapshot shows no event the live part
 * repeats, and a resume replays every event written before the subscribe. No Redis command
 * of its own. Bounded: HUB_HOLD_MAX held at once and HUB_HOLD_MS each; beyond either, or
 * when the stream cannot be read, u proceeds at once. A broad fresh subscription without
 * snapshot goes live at once. */
void dash_hold(struct hub *h, struct hsess *x, struct hsub *u, int limit);
/* The resume cannot be served: say so (a "gap" frame), go live, snapshot. Never silence. */
void dash_gap(struct hub *h, struct hsess *x, struct hsub *u, const char *reason,
              const char *oldest);

/* The follower's triggers, wired by hub_new: the poll and kick events (arg = hub), the
 * ingest listener (an event was accepted here: read now), the store state listener (Redis
 * came back: re-check the position, a restarted Redis may be behind it). */
void dash_on_poll(evutil_socket_t fd, short what, void *arg);
void dash_on_ingest_event(void *arg, enum proto_verdict v, const struct status_event *ev,
                          const char *stream_id);
void dash_on_store_state(void *arg, int up);

#endif
