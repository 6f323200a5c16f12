/* lifecycle.h - the request state machine: is an observation a new event?
 *
 * Rules (DESIGN.md "Apply", "Watch and reversals"): no last state -> accept (seq 1, prev
 * NULL). An older updatedAt never overwrites a newer one (stale). No status is absorbing: a
 * different status with a strictly newer updatedAt is accepted from any state; out of a
 * settled status (success, refund) that change is a reversal (PROTO_F_REVERSAL on that
 * event, prev_status the settled status). A different status with an equal updatedAt is
 * stale after success/refund and accepted after any other status. A same-status observation
 * that adds tx hashes, sets a fail reason the output would show or a refund reason, a
 * depositTxHash, details (text or JSON type), reorg details, or changes the deposit address
 * is a real change; one that adds nothing is a duplicate. A facts follow-up (obs->flags has
 * PROTO_F_FACTS, obs->seq the seq of the last event it follows, obs otherwise that event's
 * state) is accepted as one more event of the same status with PROTO_F_FACTS when last is
 * still that event (same seq and status), else it is a duplicate.
 * failReason of every accepted state follows the upstream's status-response rule: "N/A" on
 * waiting, depositing, pending, submitted, success, delayed, received; on failure, fallback,
 * refund the observation's reason if it says something (not NULL/"N/A"), else the last
 * state's if that was failure/fallback/refund and says something, else "UNKNOWN"; on an
 * unknown status the observation's reason if it says something, else "N/A".
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
 * ones), optional fields absent from obs are kept from last (reorg details only on the same
 * status: a status change takes obs's or none), failReason by the rule above, PROTO_F_*
 * flags recomputed (PROTO_F_UNCONFIRMED_DEPOSIT from obs while pending, PROTO_F_REVERSAL
 * for this event only), seq = last->seq + 1 (or 1), prev_status = last->status (or NULL),
 * created_at = now_ms, gen = last->gen (or now_ms: a new record starts a generation),
 * event_id = proto_event_id(...), source/observed_at/published_at from
 * obs. The first observation is copied as is, but for failReason and the flags. *next is
 * initialised by the callee in every case (empty unless accepted). Returns 0 with *verdict
 * set, or PROTO_ENOMEM (also when libcrypto fails), or PROTO_EVALUE when obs has no request
 * id / status or last is about another request (a caller bug: nothing decided). */
int proto_lifecycle_decide(const struct status_event *last, const struct status_event *obs,
                           int64_t now_ms, enum proto_verdict *verdict,
                           struct status_event *next);

#endif
