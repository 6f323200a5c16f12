/* limits.h - the dashboard hub's numbers: periods, page sizes, per-connection limits and the
 * close codes of a refused subscribe (the protocol: hub.h, README "Dashboard stream").
 * Constants only; every file of relay/dash/ may include it. */
#ifndef RELAY_DASH_LIMITS_H
#define RELAY_DASH_LIMITS_H

#define HUB_POLL_MS 25              /* stream poll period while idle */
#define HUB_READ_COUNT 1000         /* entries per XREAD */
#define HUB_REPLAY_PAGE 500         /* entries per XRANGE page of a resume */
#define HUB_HOLD_MS 2000            /* a subscribe held for the follower to catch up: at most
                                       this long, then it proceeds as if caught up */
#define HUB_HOLD_MAX 1024           /* subscribes held at once; more proceed at once */
#define HUB_SNAPSHOT_DEFAULT 100    /* snapshots for a broad subscription (snapshotLimit) */
#define HUB_SNAPSHOT_MAX 1000
#define HUB_HISTORY_MAX 100         /* events in a history answer */
#define HUB_HISTORY_BYTES (1024 * 1024) /* its size (the newest events that fit) */
#define HUB_HISTORY_ANON_MAX 20     /* the same for anonymous clients (no token, and not a */
#define HUB_HISTORY_ANON_BYTES (64 * 1024) /* tool or same-origin page on loopback) */
#define HUB_HISTORY_INFLIGHT 4      /* history, find and facts answers being read at once per
                                       connection */
#define HUB_FIND_MAX 100            /* rows of a find answer */
#define HUB_FIND_ANON_MAX 20        /* the same for anonymous clients */
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

#endif
