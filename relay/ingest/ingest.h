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
 * poller reschedule) hear every accepted event through ingest_on_event. */
void ingest_submit(struct ingest *in, const struct status_event *obs, int track,
                   ingest_done_cb *cb, void *arg);

/* Count a rejected (malformed) observation of a source. */
void ingest_rejected(struct ingest *in, enum proto_source src);

typedef void ingest_event_cb(void *arg, enum proto_verdict v, const struct status_event *ev,
                             const char *stream_id);
void ingest_on_event(struct ingest *in, ingest_event_cb *fn, void *arg);

#endif
