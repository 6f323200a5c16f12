/* facts.h - request facts (DESIGN "Request facts", protocol/facts.h) learned from /requests/v3
 * items and kept per request (store/facts.h: compressed in the request's hash, swept with it).
 * Every item the poller and the changes feed apply (gap repair, the feed, reads by id) goes
 * through facts_submit: its facts are merged into the stored ones first (proto_facts_merge, a
 * compare-and-set retried on a concurrent write) as the version of the request's next seq,
 * then its status is applied (ingest_submit), so the event that status makes carries the
 * item's facts (two Redis round trips before the apply; a request with no hash yet gets its
 * status first and its facts after: facts never exist without the request's hash).
 * Each write is a new version, carried by the request's events from its next seq on
 * (docs/facts.md "Facts in event bodies"), explorer links built from the chain list known
 * when it is written; when no event followed up the current status change yet, the write
 * claims the follow-up and one event of the same status flagged "facts" is submitted
 * (protocol/lifecycle.h). runs on: core thread. */
#ifndef RELAY_INGEST_FACTS_H
#define RELAY_INGEST_FACTS_H

#include "protocol/event.h"
#include "relay/ingest/ingest.h"

#include <stddef.h>

struct core;

/* Apply ev (ingest_submit with track) and, once applied, merge facts[0..len) (a canonical
 * facts text; NULL: none, then this is ingest_submit alone) into the request's stored facts.
 * Both are copied. When Redis is unavailable the observation is queued like any other
 * (ingest.h) and its facts are dropped (the next item brings them again). */
void facts_submit(struct core *c, const struct status_event *ev, int track, const char *facts,
                  size_t len);
/* The same with the caller's callback (ingest.h: called exactly once with the apply's answer,
 * after the facts were written when they could be; a Redis error is passed on, nothing queued). */
void facts_submit_cb(struct core *c, const struct status_event *ev, int track, const char *facts,
                     size_t len, ingest_done_cb *cb, void *arg);

/* Merge facts[0..len) into request id's stored facts (read, merge, compare-and-set; up to a
 * few rounds against concurrent writers) as a new version, with its follow-up event when it
 * claims one. Nothing is written when the request has no hash or the merge changes nothing. */
void facts_learn(struct core *c, const char *id, const char *facts, size_t len);

#endif
