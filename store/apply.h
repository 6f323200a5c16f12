/* apply.h - the apply step: read the last-known state, let protocol/lifecycle decide, and
 * write an accepted event atomically with store/apply.lua (compare-and-set on seq; on a
 * conflict the script returns the current state and the decision is made again).
 * One source of truth for the rules: protocol/lifecycle.c. Redis only enforces the CAS.
 * Observations of one partition that arrive while its applies are in flight go to Redis
 * together, in batches (apply.c); per-request order and one callback per observation hold.
 * runs on: core thread. */
#ifndef STORE_APPLY_H
#define STORE_APPLY_H

#include "protocol/lifecycle.h"
#include "store/store.h"

/* Next poll of a watched request in state ev: returns the due time (ms, wall clock) and sets
 * *tier to 'u' (urgent: the upstream websocket does not confirm it), 'a' (active, safety
 * poll) or 's' (settled). Whether it is watched at all is the watch rule's (apply.lua). */
typedef int64_t apply_poll_policy_cb(void *arg, const struct status_event *ev, int64_t now_ms,
                                     char *tier);

struct applier;

struct applier *applier_new(struct store *s, int64_t stream_maxlen,
                            apply_poll_policy_cb *policy, void *policy_arg);
void applier_free(struct applier *a);
/* The watch windows (ms) apply.lua needs to move a request's watch (store/watch_lib.lua):
 * waiting TTL, settled watch, failure tail. Set before the first apply. */
void applier_set_watch(struct applier *a, int64_t waiting_ttl, int64_t settled_watch,
                       int64_t failure_tail);
/* Listener: an accepted event set a refundFailReason other than the last state's (called
 * before the apply callback, with the request id and the event's reason). One per applier. */
typedef void apply_refund_failure_cb(void *arg, const char *request_id, const char *reason);
void applier_on_refund_failure(struct applier *a, apply_refund_failure_cb *fn, void *arg);

/* Result: err is NULL or a store error (store_err_disconnected: nothing was written, retry
 * later). On PROTO_ACCEPT, ev is the written event and stream_id its event-stream entry id.
 * ev is owned by the applier (its apply op), which frees it when the callback returns: the
 * callback may take ev's members over instead of copying them (a struct of owned pointers:
 * move it, then status_event_init(ev)), so the applier then frees an empty event. This is
 * how relay/ingest hands the event to the fan-out without a deep copy (issue 26).
 * facts (with ev): 0 when the request had no facts as the event was written, so the event
 * never carries any (a later facts version starts at a later seq: store/facts.h) and nobody
 * needs to ask store_facts_at for it; 1 when it had some; -1 not known. */
typedef void apply_done_cb(void *arg, const char *err, enum proto_verdict v,
                           struct status_event *ev, const char *stream_id, int facts);

/* Apply obs: borrowed, not copied - the caller keeps it alive and unchanged until cb is
 * called (cb may free it; the applier does not touch obs after cb). track = 1 starts
 * tracking an untracked request (upstream webhooks of our key). Returns 0 (cb called exactly
 * once, once obs is in Redis or failed; possibly before this returns) or -1 when the store
 * is not ready (cb not called, obs not kept). */
int applier_apply(struct applier *a, const struct status_event *obs, int track,
                  apply_done_cb *cb, void *arg);

#endif
