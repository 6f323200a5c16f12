/* lifecycle.c - the request state machine: accept / duplicate / stale, and the merged state.
 *
 * Order of the checks (lifecycle.h): unknown request -> accept; older updatedAt -> stale;
 * a different status -> accept, but stale when the last status is settled (success, refund)
 * and updatedAt is equal (a strictly newer one is a reversal); the same status -> accept
 * only when the observation adds something (a new tx hash, a fail reason the merged state
 * would show, a refund reason other than "N/A", details, reorg details, a deposit address or
 * a deposit field, a /requests/v3 pending that sets or clears the unconfirmed-deposit flag),
 * else duplicate.
 *
 * Merging an accepted observation into the new state:
 *  - tx hashes: union, the last state's order first, at most PROTO_MAX_HASHES (hashes beyond
 *    the bound are dropped, and do not count as "adding something");
 *  - a status change takes every optional field the observation carried (PROTO_HAS_*; a
 *    present null clears) and keeps the rest from the last state;
 *  - a same-status enrichment only adds: null, "N/A" and absent values keep the last state's;
 *  - failReason follows the status-response rule (fail_reason_of), never the plain pick;
 *  - reorg details: the same status keeps the last ones unless obs carries some; a status
 *    change takes obs's or none;
 *  - a deposit address object is merged field by field (a null depositTxHash from a lagging
 *    source never erases a seen one); chain ids and quoteCreatedAt are kept when unknown (0);
 *  - PROTO_F_* flags are recomputed from the merged values (PROTO_F_UNCONFIRMED_DEPOSIT: a
 *    status change into pending takes obs's; on pending, a /requests/v3 observation sets or
 *    clears it - news by itself - and the other sources, which cannot tell, keep last's;
 *    PROTO_F_REVERSAL is set by the caller for this event only), PROTO_HAS_* bits are the
 *    union but for PROTO_HAS_DETAILS_JSON (follows the details kept) and PROTO_HAS_REORG
 *    (set while reorg details are kept).
 * A facts follow-up (an observation with PROTO_F_FACTS and seq = the seq of the event it
 * follows: relay/ingest/facts.c) is accepted as a same-status event carrying PROTO_F_FACTS
 * only while that event is still the last one; any other state makes it a duplicate.
 * The first observation of a request is copied, with failReason and the flags fixed up.
 * runs on: any thread (pure). */
#include "protocol/lifecycle.h"

#include <stdlib.h>
#include <string.h>

const char *proto_verdict_name(enum proto_verdict v)
{
    switch (v) {
    case PROTO_ACCEPT: return "accepted";
    case PROTO_DUPLICATE: return "duplicate";
    case PROTO_STALE: return "stale";
    default: return "unknown";
    }
}

static int same_str(const char *a, const char *b)
{
    return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

/* A reason that says something: not NULL and not "N/A". */
static int reason_set(const char *r)
{
    return r != NULL && strcmp(r, "N/A") != 0;
}

/* failure, fallback, refund: the statuses that carry a failReason. */
static int fail_status(enum proto_status st)
{
    return st == PROTO_ST_FAILURE || st == PROTO_ST_FALLBACK || st == PROTO_ST_REFUND;
}

/* failReason of the state obs leads to (last may be NULL); borrowed from obs, last or static.
 * The upstream's status-response rule (lifecycle.h). */
static const char *fail_reason_of(const struct status_event *last, const struct status_event *obs)
{
    enum proto_status st = proto_status_parse(obs->status);
    if (st == PROTO_ST_OTHER)
        return reason_set(obs->fail_reason) ? obs->fail_reason : "N/A";
    if (!fail_status(st))
        return "N/A";
    if (reason_set(obs->fail_reason))
        return obs->fail_reason;
    if (last != NULL && fail_status(proto_status_parse(last->status)) &&
        reason_set(last->fail_reason))
        return last->fail_reason;
    return "UNKNOWN";
}

static int strv_has(const struct proto_strv *sv, const char *s, size_t upto)
{
    for (size_t i = 0; i < sv->n && i < upto; i++)
        if (strcmp(sv->v[i], s) == 0)
            return 1;
    return 0;
}

/* Would the union of a and b hold an entry that a lacks? */
static int strv_adds(const struct proto_strv *a, const struct proto_strv *b)
{
    if (a->n >= PROTO_MAX_HASHES)
        return 0;
    for (size_t i = 0; i < b->n; i++)
        if (!strv_has(a, b->v[i], a->n))
            return 1;
    return 0;
}

static char *dup_str(const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

/* *dst = copy of src (NULL stays NULL); -1 on allocation failure. */
static int set_str(char **dst, const char *src)
{
    *dst = dup_str(src);
    return src != NULL && *dst == NULL ? -1 : 0;
}

/* dst = a, then the entries of b that a (and earlier b) lack, at most PROTO_MAX_HASHES. */
static int strv_union(struct proto_strv *dst, const struct proto_strv *a,
                      const struct proto_strv *b)
{
    size_t cap = a->n + b->n;
    if (cap > PROTO_MAX_HASHES)
        cap = a->n > PROTO_MAX_HASHES ? a->n : PROTO_MAX_HASHES;
    if (cap == 0)
        return 0;
    if ((dst->v = calloc(cap, sizeof(*dst->v))) == NULL)
        return -1;
    for (size_t i = 0; i < a->n; i++)
        if ((dst->v[dst->n++] = dup_str(a->v[i])) == NULL)
            return -1;
    for (size_t i = 0; i < b->n && dst->n < cap; i++) {
        if (strv_has(dst, b->v[i], dst->n))
            continue;
        if ((dst->v[dst->n++] = dup_str(b->v[i])) == NULL)
            return -1;
    }
    return 0;
}

/* Does obs's deposit address add to last's (a new object, or a field last lacks/differs)? */
static int deposit_adds(const struct proto_deposit *l, const struct proto_deposit *o)
{
    if (o == NULL)
        return 0;
    if (l == NULL)
        return 1;
    return (o->address != NULL && !same_str(o->address, l->address)) ||
           (o->type != NULL && !same_str(o->type, l->type)) ||
           (o->depositor != NULL && !same_str(o->depositor, l->depositor)) ||
           (o->deposit_tx_hash != NULL && !same_str(o->deposit_tx_hash, l->deposit_tx_hash));
}

/* Only /requests/v3 tells a mempool Bitcoin deposit (PROTO_F_UNCONFIRMED_DEPOSIT) from a mined
 * one: its pending observation that sets or clears the flag is news. */
static int unconfirmed_news(const struct status_event *last, const struct status_event *obs)
{
    return obs->source == PROTO_SRC_REQUESTS &&
           proto_status_parse(obs->status) == PROTO_ST_PENDING &&
           ((obs->flags ^ last->flags) & PROTO_F_UNCONFIRMED_DEPOSIT) != 0;
}

/* Same status: does obs add anything to last? */
static int adds_something(const struct status_event *last, const struct status_event *obs)
{
    unsigned f = obs->flags;
    return unconfirmed_news(last, obs) || strv_adds(&last->in_tx_hashes, &obs->in_tx_hashes) ||
           strv_adds(&last->tx_hashes, &obs->tx_hashes) ||
           (reason_set(obs->fail_reason) &&
            !same_str(fail_reason_of(last, obs), last->fail_reason)) ||
           ((f & PROTO_HAS_REASONS) && reason_set(obs->refund_fail_reason) &&
            !same_str(obs->refund_fail_reason, last->refund_fail_reason)) ||
           ((f & PROTO_HAS_DETAILS) && obs->details != NULL &&
            (!same_str(obs->details, last->details) ||
             ((f ^ last->flags) & PROTO_HAS_DETAILS_JSON))) ||
           (obs->reorg != NULL && !same_str(obs->reorg, last->reorg)) ||
           ((f & PROTO_HAS_DEPOSIT) && deposit_adds(last->deposit, obs->deposit));
}

/* The merged deposit: o's non-NULL fields over l's. Either may be NULL (not both). */
static int deposit_merge(struct proto_deposit **dst, const struct proto_deposit *l,
                         const struct proto_deposit *o)
{
    static const struct proto_deposit none = {0};
    struct proto_deposit *d = calloc(1, sizeof(*d));
    if ((*dst = d) == NULL)
        return -1;
    if (l == NULL)
        l = &none;
    if (o == NULL)
        o = &none;
#define FIELD(f) (o->f != NULL ? o->f : l->f)
    int rc = set_str(&d->address, FIELD(address)) != 0 || set_str(&d->type, FIELD(type)) != 0 ||
             set_str(&d->depositor, FIELD(depositor)) != 0 ||
             set_str(&d->deposit_tx_hash, FIELD(deposit_tx_hash)) != 0;
#undef FIELD
    return rc ? -1 : 0;
}

/* Pick an optional string for the merged state. */
static const char *pick(int changed, int present, const char *o, const char *l, int is_reason)
{
    if (!present)
        return l;
    if (changed)
        return o;
    /* same status: only a value that says something replaces the last one */
    return (is_reason ? reason_set(o) : o != NULL) ? o : l;
}

/* Merge obs into last (both about the same request) into next. changed: status differs. */
static int merge(const struct status_event *last, const struct status_event *obs, int changed,
                 struct status_event *next)
{
    unsigned of = obs->flags, lf = last->flags;
    int has_r = (of & PROTO_HAS_REASONS) != 0, has_d = (of & PROTO_HAS_DETAILS) != 0;
    const char *details = pick(changed, has_d, obs->details, last->details, 0);
    const char *fr = fail_reason_of(last, obs);
    const char *reorg = obs->reorg != NULL || changed ? obs->reorg : last->reorg;
    const char *rfr = pick(changed, has_r, obs->refund_fail_reason, last->refund_fail_reason, 1);
    const char *ref = pick(changed, (of & PROTO_HAS_REFERRER) != 0, obs->referrer,
                           last->referrer, 0);

    next->st = proto_status_parse(obs->status);
    next->updated_at = obs->updated_at;
    next->origin_chain_id = obs->origin_chain_id != 0 ? obs->origin_chain_id
                                                      : last->origin_chain_id;
    next->destination_chain_id = obs->destination_chain_id != 0 ? obs->destination_chain_id
                                                                : last->destination_chain_id;
    next->quote_created_at = obs->quote_created_at != 0 ? obs->quote_created_at
                                                        : last->quote_created_at;
    /* PROTO_HAS_* union, but for the bits that describe the values kept */
    next->flags = (lf | of) & ~(PROTO_F_MASK | PROTO_HAS_DETAILS_JSON | PROTO_HAS_REORG);
    if (next->st == PROTO_ST_OTHER)
        next->flags |= PROTO_F_UNKNOWN_STATUS;
    if (details != NULL)
        next->flags |= (details == obs->details ? of : lf) &
                       (PROTO_F_DETAILS_TRUNCATED | PROTO_HAS_DETAILS_JSON);
    if (reorg != NULL)
        next->flags |= PROTO_HAS_REORG;
    /* a status change takes obs's; on the same status only /requests/v3 can tell, the other
     * sources keep what it said */
    if (next->st == PROTO_ST_PENDING)
        next->flags |= (changed || obs->source == PROTO_SRC_REQUESTS ? of : lf) &
                       PROTO_F_UNCONFIRMED_DEPOSIT;
    if (fr != NULL && !proto_fail_reason_known(fr))
        next->flags |= PROTO_F_UNKNOWN_FAIL_REASON;
    if (rfr != NULL && !proto_refund_reason_known(rfr))
        next->flags |= PROTO_F_UNKNOWN_REFUND_REASON;

    if (set_str(&next->request_id, obs->request_id) != 0 ||
        set_str(&next->status, obs->status) != 0 || set_str(&next->details, details) != 0 ||
        set_str(&next->fail_reason, fr) != 0 || set_str(&next->refund_fail_reason, rfr) != 0 ||
        set_str(&next->referrer, ref) != 0 || set_str(&next->reorg, reorg) != 0 ||
        strv_union(&next->in_tx_hashes, &last->in_tx_hashes, &obs->in_tx_hashes) != 0 ||
        strv_union(&next->tx_hashes, &last->tx_hashes, &obs->tx_hashes) != 0)
        return -1;
    if (!(of & PROTO_HAS_DEPOSIT) || (obs->deposit == NULL && !changed))
        return last->deposit != NULL ? deposit_merge(&next->deposit, last->deposit, NULL) : 0;
    if (obs->deposit == NULL)
        return 0; /* a status change that says "no deposit address": cleared */
    return deposit_merge(&next->deposit, last->deposit, obs->deposit);
}

/* The first state of a request: obs as is, but for failReason and the per-event flags. */
static int first_state(const struct status_event *obs, struct status_event *next)
{
    if (status_event_copy(next, obs) != 0)
        return -1;
    const char *fr = fail_reason_of(NULL, obs);
    if (!same_str(fr, next->fail_reason)) {
        free(next->fail_reason);
        if ((next->fail_reason = dup_str(fr)) == NULL)
            return -1;
    }
    next->flags &= ~(PROTO_F_REVERSAL | PROTO_F_UNKNOWN_FAIL_REASON);
    if (!proto_fail_reason_known(fr))
        next->flags |= PROTO_F_UNKNOWN_FAIL_REASON;
    if (proto_status_parse(obs->status) != PROTO_ST_PENDING)
        next->flags &= ~PROTO_F_UNCONFIRMED_DEPOSIT;
    return 0;
}

int proto_lifecycle_decide(const struct status_event *last, const struct status_event *obs,
                           int64_t now_ms, enum proto_verdict *verdict,
                           struct status_event *next)
{
    status_event_init(next);
    *verdict = PROTO_STALE;
    if (obs->request_id == NULL || obs->status == NULL ||
        (last != NULL && (last->status == NULL || !same_str(last->request_id, obs->request_id))))
        return PROTO_EVALUE;

    int changed = 1, reversal = 0, followup = (obs->flags & PROTO_F_FACTS) != 0;
    if (last != NULL) {
        if (obs->updated_at < last->updated_at)
            return 0; /* stale: an older observation never overwrites a newer one */
        changed = strcmp(obs->status, last->status) != 0;
        if (changed && proto_status_terminal(proto_status_parse(last->status))) {
            if (obs->updated_at == last->updated_at)
                return 0; /* stale: only a strictly newer observation reverses a settled one */
            reversal = 1;
        }
        if (followup && (changed || obs->seq != last->seq)) {
            *verdict = PROTO_DUPLICATE; /* another event came first: it carries the facts */
            return 0;
        }
        if (!changed && !followup && !adds_something(last, obs)) {
            *verdict = PROTO_DUPLICATE;
            return 0;
        }
    } else if (followup) {
        *verdict = PROTO_DUPLICATE;
        return 0;
    }

    int rc = last == NULL ? first_state(obs, next) : merge(last, obs, changed, next);
    if (rc != 0)
        goto nomem;
    if (reversal)
        next->flags |= PROTO_F_REVERSAL;
    if (followup)
        next->flags |= PROTO_F_FACTS;
    next->st = proto_status_parse(next->status);
    /* the next state is a status event, whatever obs was (only records carry other types) */
    next->type = PROTO_EV_STATUS;
    free(next->type_reason);
    free(next->type_url);
    next->type_reason = next->type_url = NULL;
    next->type_at = 0;
    next->source = obs->source;
    next->observed_at = obs->observed_at;
    next->published_at = obs->published_at;
    next->seq = last != NULL ? last->seq + 1 : 1;
    next->created_at = now_ms;
    free(next->prev_status);
    next->prev_status = NULL;
    if (last != NULL && (next->prev_status = dup_str(last->status)) == NULL)
        goto nomem;
    /* a new record starts a generation; a record of an older version (gen 0) keeps 0 */
    next->gen = last != NULL ? last->gen : now_ms;
    proto_event_id(next->request_id, next->seq, next->gen, next->event_id);
    if (next->event_id[0] == '\0')
        goto nomem;
    *verdict = PROTO_ACCEPT;
    return 0;
nomem:
    status_event_cleanup(next);
    *verdict = PROTO_STALE;
    return PROTO_ENOMEM;
}
