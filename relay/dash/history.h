/* history.h - the past of a request for one session: snapshots (the last-known state a new
 * subscription starts from, or for a broad one the newest requests it matches), starting to
 * track an id a snapshot found untracked, and history answers (the request's timeline in one
 * frame). The reads are store/history.h's.
 * runs on: core thread. */
#ifndef RELAY_DASH_HISTORY_H
#define RELAY_DASH_HISTORY_H

#include "relay/dash/internal.h"

/* Start tracking request id (idempotent); failures are logged. */
void dash_track_one(struct hub *h, const char *id);
/* Send x the last-known state of request id for subscription u (an error frame when Redis
 * is unavailable); track = start tracking the id if nobody does. */
void dash_snapshot_one(struct hub *h, struct hsess *x, struct hsub *u, const char *id,
                       int track);
/* The snapshot a new subscription gets: its id, or the newest `limit` requests a broad one
 * matches. */
void dash_fresh_snapshot(struct hub *h, struct hsess *x, struct hsub *u, int limit);
/* Answer a history request of x for request id (validated and allowed by the caller): the
 * newest HUB_HISTORY_MAX events within HUB_HISTORY_BYTES, or for !trusted (anonymous) the
 * HUB_HISTORY_ANON_* caps; "truncated": true when older ones were left out for size. */
void dash_history(struct hub *h, struct hsess *x, const char *id, int trusted);

#endif
