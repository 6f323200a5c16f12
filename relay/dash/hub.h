/* hub.h - the core side of the dashboard stream: who may subscribe to what, which events go
 * to whom, snapshots, resume and gaps. The ws thread (relay/edge/ws_server.c) only moves frames
 * and keeps the filters the hub installed. Protocol: README "Dashboard stream".
 *
 * Events. The hub follows the event stream {P}:events with XREAD from its last stream id:
 * every 25 ms, and at once when this process accepted an event (ingest listener), so events
 * written by any process sharing the Redis reach this process's clients. Each entry's record
 * is decoded and encoded once as a dashboard frame (proto_event_ws_frame plus
 * "statusrelay.streamId"), put in one xbuf and pushed as one XMSG_DASH_EVENT with its routing
 * meta; entries nobody here can match are skipped without decoding. With N > 1 partitions
 * (docs/partitions.md) every partition's stream is followed, merged, and the cursor and each
 * frame's streamId are vectors of one stream id per partition (store/stream.h; one partition: the
 * plain stream id).
 *
 * Hand-off. A subscription is installed in the ws thread (XMSG_DASH_ACCEPT_SUB) at a precise
 * stream position, the hub's cursor at that moment: every event after it is routed by the ws
 * thread, every event up to it came from a snapshot or a replay. Both threads see one FIFO
 * queue, so the order of acks, snapshots, replayed and live frames is the order the hub
 * pushed them. Resume: XINFO STREAM (gap check against the oldest retained entry), then XRANGE
 * pages from the client's cursor up to the hub's cursor, then live; a client cursor ahead of
 * this process's cursor waits until the follower passes it. One Redis connection answers in
 * order, which is what makes "up to the hub's cursor" exact. A subscribe that takes a snapshot
 * or resumes is held first until the follower has read every event written before it (a
 * read sent after it came back short; follow.h dash_hold), so that cursor is not behind.
 *
 * Limits and close codes: relay/dash/limits.h. Files of this folder, one object each (none
 * includes a header of a file above it; hub.c is the owner and includes them all):
 *   limits.h   the numbers; internal.h the shared state (types only)
 *   frames.c   frames to the ws thread (text, JSON, filter changes, event frames)
 *   table.c    the sessions and their subscriptions, the indexes, the waiters, going live
 *   ops.c      what every Redis command carries (struct op) and the hub's deferred free
 *   history.c  snapshots and history answers (store/history.h)
 *   find.c     find (search) and facts answers (store/search.h, store/requests.h)
 *   follow.c   the follower of the event stream, the hold of a subscribe, resume, gaps
 *              (store/stream.h)
 *   stats.c    the stats frames
 *   subscribe.c  the subscribe decision (pure, tests/unit/test_relay_dash_subscribe.c)
 *   client.c   client messages: open, gone, subscribe (decide, then apply), unsubscribe,
 *              history, find and facts requests, message rates
 *
 * Page counters: clients subscribed to "statusrelay.stats" get one stats frame per second
 * built from core->metrics, the upstream state and the ws thread's counters.
 * runs on: core thread. */
#ifndef RELAY_HUB_H
#define RELAY_HUB_H

#include <stdint.h>

struct core;
struct xmsg;
struct hub;

/* Create; sends the ping settings to the ws thread, follows the stream once Redis is up. */
struct hub *hub_new(struct core *c);
/* Handle XMSG_DASH_OPEN / DASH_MSG / DASH_GONE from the ws thread (takes nothing; the caller
 * frees m). Other types are ignored. */
void hub_on_msg(struct hub *h, const struct xmsg *m);
/* The anonymous watch of id ended because the upstream does not know it (an anon_gone_cb,
 * relay/ingest/anon.h; arg: the hub): every anonymous subscription to id gets an error frame
 * with code "not_found" and ends; the connection stays open. */
void hub_anon_gone(void *hub, const char *id);
/* Stop; Redis commands in flight complete into nothing (the object lives until then).
 * NULL-safe. */
void hub_free(struct hub *h);

#endif
