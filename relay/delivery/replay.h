/* replay.h - replays: queue deliveries again, either from the event log (events selected by
 * time, request and endpoint, matched against the endpoints' filters and queued through
 * store/wh_fanout.lua in replay mode, with the fan-out's arguments: fanout.h) or from the dead
 * and skipped sets (store/wh_requeue.lua). Knows nothing of HTTP: POST /v1/replay
 * (relay/api/webhooks.c) validates the request, fills a struct replay_spec and answers from
 * the completion. A replay is a client of the running delivery service (delivery.h), which
 * does not own it.
 * runs on: core thread. */
#ifndef RELAY_DELIVERY_REPLAY_H
#define RELAY_DELIVERY_REPLAY_H

#include "protocol/event.h"
#include "relay/delivery/endpoint.h"

#include <stdint.h>

struct core;

#define REPLAY_PAGE 200           /* events read from the log per step */
#define REPLAY_MAX_EVENTS 200000  /* events scanned by one replay at most */
#define REPLAY_MAX_REQUEUE 100000 /* dead or skipped deliveries requeued per set at most */

/* What to replay. Events: created_at within [since, until] (each bound when has_*), of
 * request_id ("" any), to webhook_id ("" every enabled endpoint whose filters match; replays
 * also reach endpoints registered after the event). dead / skipped: requeue those sets
 * instead (the same bounds and ids narrow them). dry: count, queue nothing. */
struct replay_spec {
    int64_t since, until;
    int has_since, has_until;
    int dead, skipped, dry;
    char request_id[PROTO_MAX_ID + 1];
    char webhook_id[WH_ID_MAX];
};

/* Errors of the completion (compare by pointer). */
extern const char replay_err_unavailable[]; /* Redis failed or the service is going away */
extern const char replay_err_not_found[];   /* webhook_id names no endpoint */

/* Completion: err NULL and count (pairs queued, or that would be with dry) and replay_id
 * ("rpl_" + 16 hex, logged with the count; NULL with dry), or err set. Strings are valid
 * during the call only. */
typedef void replay_done_cb(void *arg, const char *err, long long count, const char *replay_id);

/* Start a replay of spec (copied) on c's delivery service, which must be running
 * (webhooks_of(c) != NULL). The endpoint set is reloaded first, so the replay matches the
 * current endpoints; the dispatcher is kicked when something was queued. cb runs exactly
 * once, later or before this returns (when Redis refuses at once). */
void replay_start(struct core *c, const struct replay_spec *spec, replay_done_cb *cb, void *arg);

#endif
