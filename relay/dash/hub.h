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
 * frame's streamId are vectors of one stream id per partition (follow_parts.c).
 *
 * Hand-off. A subscription is installed in the ws thread (XMSG_DASH_ACCEPT_SUB) at a precise
 * stream position, the hub's cursor at that moment: every event after it is routed by the ws
 * thread, every event up to it came from a snapshot or a replay. Both threads see one FIFO
 * queue, so the order of acks, snapshots, replayed and live frames is the order the hub
 * pushed them. Resume: XINFO STREAM (gap check against the oldest retained entry), then XRANGE
 * pages from the client's cursor up to the hub's cursor, then live; a client cursor ahead of
 * this process's cursor waits until the follower passes it. One Redis connection answers in
 * order, which is what makes "up to the hub's cursor" exact.
 *
 * Page counters: clients subscribed to "statusrelay.stats" get one stats frame per second
 * built from core->metrics, the upstream state and the ws thread's counters.
 * runs on: core thread. */
#ifndef RELAY_HUB_H
#define RELAY_HUB_H

#include <stdint.h>

#define HUB_POLL_MS 25              /* stream poll period while idle */
#define HUB_READ_COUNT 1000         /* entries per XREAD */
#define HUB_REPLAY_PAGE 500         /* entries per XRANGE page of a resume */
#define HUB_SNAPSHOT_DEFAULT 100    /* snapshots for a broad subscription (snapshotLimit) */
#define HUB_SNAPSHOT_MAX 1000
#define HUB_HISTORY_MAX 100         /* events in a history answer */
#define HUB_HISTORY_BYTES (1024 * 1024) /* its size (the newest events that fit) */
#define HUB_HISTORY_ANON_MAX 20     /* the same for anonymous clients (no token, and not a */
#define HUB_HISTORY_ANON_BYTES (64 * 1024) /* tool or same-origin page on loopback) */
#define HUB_HISTORY_INFLIGHT 4      /* history answers being read at once per connection */
#define HUB_STATS_MS 1000           /* stats frame period */
#define HUB_MSG_BURST 200           /* client messages: burst, then HUB_MSG_RATE per second */
#define HUB_MSG_RATE 100
#define HUB_BAD_BURST 10            /* bad client messages: burst, then one per 2 s */

/* A refused subscribe gets its error frame ({"type":"error","request":"subscribe",...}: not
 * an ack even to a client that reads only "type") and then the connection is closed with
 * one of these codes, so an upstream client falls back to polling (README "Dashboard
 * stream"). The close reason is "subscription refused: <error code>". */
#define HUB_CLOSE_REFUSED 4400             /* bad_request, invalid_request_id, bad_cursor,
                                              unsupported_event */
#define HUB_CLOSE_REFUSED_AUTH 4401        /* unauthorized: the stream token is needed */
#define HUB_CLOSE_REFUSED_LIMIT 4429       /* too_many_subscriptions, too_many_ids */
#define HUB_CLOSE_REFUSED_UNAVAILABLE 4503 /* unavailable: Redis is down, retry later */

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
