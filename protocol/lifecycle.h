/* lifecycle.h - the request state machine: is an observation a new event?
 *
 * Rules (DESIGN.md "Apply"): no last state -> accept (seq 1, prev NULL). An older updatedAt
 * never overwrites a newer one (stale). success and refund are terminal: afterwards only a
 * same-status enrichment is accepted, any other status is stale. failure is not terminal
 * (pending -> failure -> pending -> refund is legal). A same-status observation that adds tx
 * hashes, sets fail/refund reasons, a depositTxHash, details or changes the deposit address
 * is a real change; one that adds nothing is a duplicate. Status changes with an equal or
 * newer updatedAt are accepted.
 * runs on: any thread (pure). */
#ifndef PROTO_LIFECYCLE_H
#define PROTO_LIFECYCLE_H

#include "protocol/event.h"

enum proto_verdict {
    PROTO_ACCEPT = 0,
    PROTO_DUPLICATE,
    PROTO_STALE,
};

const char *proto_verdict_name(enum proto_verdict v); /* "accepted", "duplicate", "stale" */

/* Decide what obs means given last (NULL = request never seen). On PROTO_ACCEPT, *next is
 * filled with the merged new state: tx hash lists are the union (last's order, then new
 * ones), optional fields absent from obs are kept from last, seq = last->seq + 1 (or 1),
 * prev_status = last->status (or NULL), created_at = now_ms, event_id = proto_event_id(...),
 * source/observed_at/published_at from obs. *next is initialised by the callee in every
 * case (empty unless accepted). Returns 0 with *verdict set, or PROTO_ENOMEM (also when
 * libcrypto fails), or PROTO_EVALUE when obs has no request id / status or last is about
 * another request (a caller bug: nothing decided). */
int proto_lifecycle_decide(const struct status_event *last, const struct status_event *obs,
                           int64_t now_ms, enum proto_verdict *verdict,
                           struct status_event *next);

#endif
