/* polls.h - the poll schedule, the shared upstream budget and the chain list cache as typed C
 * calls: store/poll_{claim,take,set,due}.lua, budget_{take,give}.lua and chains_{poll,put}.lua.
 * This module is the only C code that knows their keys, argument order and reply positions;
 * relay/ingest/ (the poller, the chain list) speaks only these types.
 *
 * Partitions (docs/partitions.md) are this module's business: the budget bucket and the chain
 * list are deployment keys, the poll tiers are partition keys. A claim of polls is one atomic
 * poll_claim.lua call with one partition, and with several a round - budget_take.lua, then
 * poll_take.lua partition by partition, then budget_give.lua of what was not used - decided
 * here; the caller asks once and hears once. Calls that touch every partition's tiers
 * (polls_due_now) send one command per partition.
 *
 * Every call with a callback returns 0 when the command went out (cb runs exactly once, later)
 * or -1 when the store is not ready (cb not called). Callbacks get err: NULL (the result is
 * set), store_err_disconnected, store_err_server or polls_err_reply (an answer of another
 * shape). Results are borrowed for the callback only. The clock (wall ms) is read here, at
 * each command, as the scripts want it.
 * runs on: core thread only. */
#ifndef STORE_POLLS_H
#define STORE_POLLS_H

#include <stddef.h>
#include <stdint.h>

struct store;

/* An answer whose shape is not the script's. */
extern const char polls_err_reply[];

/* ---- the budget: calls besides the polls (poll_claim.lua, reserve only) ------------------- */

struct polls_reserve {
    int64_t budget;     /* calls a minute, all processes (STATUSRELAY_UPSTREAM_BUDGET) */
    int calls;          /* calls wanted */
    int64_t anon_share; /* > 0: an anonymous status read, drawn from this share (calls a
                         * minute) too and only when the urgent polls due now keep their
                         * calls; 0: any other call */
};
/* granted: the calls granted (0 when err is set or the budget is spent). */
typedef void polls_reserve_cb(void *arg, const char *err, int granted);
int polls_reserve(struct store *s, const struct polls_reserve *q, polls_reserve_cb *cb,
                  void *arg);

/* ---- claims of due polls ------------------------------------------------------------------ */

struct polls_claim {
    int64_t budget;   /* calls a minute (as polls_reserve) */
    int max;          /* polls wanted (> 0) */
    int64_t lease_ms; /* claimed ids are pushed this far out, so no other process takes them */
    unsigned round;   /* a counter the caller turns: with several partitions the round starts
                       * at partition round % N, so no partition always comes last */
    int64_t skip_feed_ms; /* > 0 while the changes feed is healthy: due requests the feed
                           * sees (feed.h feed_mark) are pushed this far out, not claimed */
};
/* ids: the claimed request ids, most urgent tier first (urgent, active, settled, then the
 * anonymous tier with at most half of the calls left). They are claimed even when err is set
 * (a round that failed half-way): poll them. */
typedef void polls_claim_cb(void *arg, const char *err, const char *const *ids, size_t n);
int polls_claim(struct store *s, const struct polls_claim *q, polls_claim_cb *cb, void *arg);

/* ---- the schedule ------------------------------------------------------------------------- */

/* Set the next poll of watched request id (poll_set.lua; a request whose watch ended meanwhile
 * stays unpolled; an anonymous watch keeps its tier "n"). tier: 'u', 'a', 's' (apply.h), or 0
 * to keep the request's tier. No answer: returns 0 when sent, -1 when not ready. */
int polls_set(struct store *s, const char *id, char tier, int64_t due_ms);

/* Which tiers polls_due_now makes due. */
enum polls_tiers {
    POLLS_TIERS_ACTIVE = 0, /* active and urgent (gap repair without an API key) */
    POLLS_TIERS_ALL,        /* urgent, active, settled and anonymous (websocket lost) */
};
/* Make every request of those tiers due now, in every partition (poll_due.lua). No answer. */
void polls_due_now(struct store *s, enum polls_tiers which);

/* ---- the chain list cache {P}:chains and its refresh lease (chains_{poll,put}.lua) -------- */

struct polls_chains_look {
    int64_t period_ms; /* refresh period: a list older than this is due */
    int64_t lease_ms;  /* the refresh lease taken when due */
    const char *holder;   /* this process (instance id) */
    const char *known_at; /* the fetch time of the list this process last saw ("" = none) */
};
struct polls_chains_seen {
    int fetch;        /* 1: a refresh is due and this call took the lease: fetch now */
    const char *at;   /* the cached list's fetch time ("" when none) */
    const char *body; /* the cached body when at differs from known_at, else NULL */
    size_t body_len;
};
typedef void polls_chains_look_cb(void *arg, const char *err, const struct polls_chains_seen *r);
int polls_chains_look(struct store *s, const struct polls_chains_look *q,
                      polls_chains_look_cb *cb, void *arg);
/* The end of a refresh: store body[0..len) (NULL: the refresh failed) and release the lease,
 * or keep it hold_ms (the next try waits that long; 0 releases it). stored = 1 when a body was
 * stored. cb may be NULL. */
typedef void polls_chains_put_cb(void *arg, const char *err, int stored);
int polls_chains_put(struct store *s, const char *holder, const char *body, size_t len,
                     int64_t hold_ms, polls_chains_put_cb *cb, void *arg);

#endif
