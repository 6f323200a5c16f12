/* ingest.h - where every upstream observation enters: normalised struct status_event from
 * the websocket, the poller or the upstream webhook goes through the applier; accepted
 * events are published to dashboards. Redis down: observations wait in a bounded queue and
 * are applied when Redis is back (and the poller re-reads every tracked request anyway).
 * runs on: core thread. */
#ifndef RELAY_INGEST_H
#define RELAY_INGEST_H

#include "protocol/lifecycle.h"

struct core;
struct ingest;

struct ingest *ingest_new(struct core *c);
void ingest_free(struct ingest *in);

/* Outcome for callers that must answer only once it is durable (upstream webhook): err NULL
 * = applied (or duplicate/stale, i.e. nothing to write). */
typedef void ingest_done_cb(void *arg, const char *err, enum proto_verdict v,
                            const struct status_event *ev);

/* Submit obs (copied). With cb == NULL the observation is queued and retried while Redis is
 * down; with cb the caller is told the outcome (err set when Redis is unavailable: nothing
 * queued). track = 1 starts tracking unknown requests. Listeners (upstream subscriptions,
 * poller reschedule) hear every accepted event through ingest_on_event. An observation that
 * ingest_refuse_future refuses is dropped before the apply step: cb (if any) gets err NULL,
 * verdict PROTO_STALE and a NULL event (nothing was written). */
void ingest_submit(struct ingest *in, const struct status_event *obs, int track,
                   ingest_done_cb *cb, void *arg);
/* The same, but obs's members are taken, not copied (one deep copy less per observation:
 * issue 26): obs is left empty (status_event_init), so the caller's cleanup frees nothing. */
void ingest_submit_take(struct ingest *in, struct status_event *obs, int track,
                        ingest_done_cb *cb, void *arg);

/* Count a rejected (malformed) observation of a source. */
void ingest_rejected(struct ingest *in, enum proto_source src);

/* 1 when obs's updatedAt is more than STATUSRELAY_MAX_CLOCK_SKEW ahead of this relay's clock
 * (a signed payload or an upstream clock from the far future would make every later real
 * update "stale" and freeze the request): counted as rejected (reason future_updated_at) and
 * logged (one warn line per 10 s at most, with the number suppressed); *ahead_ms, when not
 * NULL, gets how far ahead it is. 0 otherwise (nothing counted). ingest_submit calls it for
 * every observation; a caller that answers the sender calls it first to say why. */
int ingest_refuse_future(struct ingest *in, const struct status_event *obs, int64_t *ahead_ms);

typedef void ingest_event_cb(void *arg, enum proto_verdict v, const struct status_event *ev,
                             const char *stream_id);
void ingest_on_event(struct ingest *in, ingest_event_cb *fn, void *arg);
/* A listener that may take the accepted event over: called for every accepted event after
 * every ingest_on_event listener and the submitter's callback (they only borrow it), in
 * registration order. It may move ev's members into a struct of its own (then
 * status_event_init(ev)): the applier frees what is left once they return, so a taker gets
 * the written event without a deep copy. A later taker then sees ev->request_id == NULL
 * (taken: nothing for it). facts: the applier's word on whether the event can carry request
 * facts (store/apply.h: 0 never, 1 maybe, -1 not known). Used by the fan-out's pre-decoded
 * events (issue 26). */
typedef void ingest_take_cb(void *arg, struct status_event *ev, const char *stream_id,
                            int facts);
void ingest_on_event_take(struct ingest *in, ingest_take_cb *fn, void *arg);

#endif
