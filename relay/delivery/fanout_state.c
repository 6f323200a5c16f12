/* fanout_state.c - the states of the fan-out's (event, endpoint) pairs (fanout_internal.h):
 * their names for logs, their one setter, and the per-pair decisions of matching and
 * committing as pure functions of the state (no I/O: row-tested by
 * tests/unit/test_relay_fanout_state.c).
 * runs on: core thread (fo_dl_set); the rest is pure. */
#include "relay/delivery/fanout_internal.h"
#include "relay/common/log.h"
#include "relay/delivery/endpoint.h"

static const char *const state_names[FO_STATE_COUNT] = {
    [FO_PENDING] = "pending", [FO_SKIPPED] = "skipped", [FO_OPEN] = "open",
    [FO_CHAINED] = "chained", [FO_OK] = "ok",           [FO_RETRY] = "retry",
    [FO_DEAD] = "dead",       [FO_GONE] = "gone",       [FO_INFLIGHT] = "inflight",
};

const char *fo_state_name(enum fo_state st)
{
    return (unsigned)st < FO_STATE_COUNT ? state_names[st] : "?";
}

void fo_dl_set(struct fo_dl *dl, enum fo_state st)
{
    if (dl->st != st)
        log_debug("webhook fan-out pair", "webhook=%s request=%s from=%s to=%s", dl->wh->id,
                  dl->b->ents[dl->ev].ev.request_id, fo_state_name(dl->st), fo_state_name(st));
    dl->st = st;
}

enum dl_pair fo_state_pair(enum fo_state st)
{
    switch (st) {
    case FO_SKIPPED:
        return DL_PAIR_SKIPPED;
    case FO_OK:
        return DL_PAIR_OK;
    case FO_RETRY:
        return DL_PAIR_RETRY;
    case FO_DEAD:
        return DL_PAIR_DEAD;
    case FO_GONE:
        return DL_PAIR_GONE;
    case FO_INFLIGHT:
        return DL_PAIR_INFLIGHT;
    default:
        return DL_PAIR_PENDING;
    }
}

enum fo_state fo_outcome_state(enum dl_outcome o)
{
    switch (o) {
    case DL_OUTCOME_OK:
        return FO_OK;
    case DL_OUTCOME_RETRY:
        return FO_RETRY;
    case DL_OUTCOME_GONE:
        return FO_GONE;
    default:
        return FO_DEAD;
    }
}

enum dl_outcome fo_state_outcome(enum fo_state st)
{
    switch (st) {
    case FO_OK:
        return DL_OUTCOME_OK;
    case FO_RETRY:
        return DL_OUTCOME_RETRY;
    case FO_GONE:
        return DL_OUTCOME_GONE;
    default:
        return DL_OUTCOME_DEAD;
    }
}

enum fo_admit fo_admit_decide(int held, int has_pred, enum fo_state pred)
{
    if (held)
        return FO_ADMIT_HELD;
    if (!has_pred || pred == FO_OK)
        return FO_ADMIT_SEND;
    if (pred == FO_OPEN || pred == FO_CHAINED)
        return FO_ADMIT_CHAIN;
    return FO_ADMIT_BEHIND;
}

struct fo_commit_step fo_commit_decide(enum fo_state st, int attempt_out)
{
    struct fo_commit_step s = {.st = st};
    if (st == FO_OPEN && attempt_out) { /* still out: recorded in flight, with a lease */
        s.st = FO_INFLIGHT;
        s.closes = s.lease = s.unchain = 1;
    } else if (st == FO_INFLIGHT && attempt_out) { /* again after a failed commit */
        s.lease = 1;                                /* a fresh lease */
    } else if (st == FO_CHAINED) { /* its predecessor is recorded first, in stream order */
        s.st = FO_PENDING;
        s.closes = 1;
    }
    return s;
}
