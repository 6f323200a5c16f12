/* deliveries.h - the delivery scripts (store/wh_{claim,done,held,fanout,reap,requeue,health,
 * lease}.lua) as typed C calls: each function names its keys, builds its arguments and
 * decodes its reply here, so the scripts' wire letters ("p", "o", "ok", "=", ...) and reply
 * positions are written once, beside the scripts. relay/delivery/ speaks only these types.
 *
 * Every call is async on the store (store.h): it returns 0 when the command went out (cb runs
 * exactly once, later) or -1 when the store is not ready (cb not called). Every callback gets
 * err: NULL (res is set), store_err_disconnected, store_err_server (Redis refused: msg is its
 * error text) or dl_err_reply (an answer of another shape: msg is its text when it had one).
 * Results are borrowed for the callback only; copy out what you keep.
 *
 * The tag argument of the partition scripts: "view" is the caller's copy of the endpoint set
 * (relay/delivery/wh_view.c: "id[:flags],...") that a deployment with several partitions
 * hands to its scripts; it is ignored (may be NULL) with one partition, where the scripts
 * read the endpoint hashes themselves (docs/partitions.md).
 *
 * Partitions are this module's business: a caller names the partition of a call (0 with
 * one) and otherwise runs one path for any count. Where a deployment of several partitions
 * needs a second command (the endpoint set's version and health are deployment keys a
 * partition script cannot touch), the call here makes it: dl_held reads the version before
 * the script, dl_health applies the health outcomes the scripts return, dl_version_probe
 * reads the version the claims cannot. With one partition those are the degenerate case:
 * the script does it all and no extra command is sent.
 * runs on: core thread only. */
#ifndef STORE_DELIVERIES_H
#define STORE_DELIVERIES_H

#include <stddef.h>
#include <stdint.h>

struct store;
struct status_event;

/* An answer whose shape is not the script's (see above). */
extern const char dl_err_reply[];
/* The stream's consumer group is missing (Redis said NOGROUP): create it again. */
extern const char dl_err_nogroup[];

/* The outcome of one attempt (wh_done.lua, and the first attempts of the fan-out). */
enum dl_outcome {
    DL_OUTCOME_NONE = 0, /* not attempted (endpoint gone meanwhile): never written */
    DL_OUTCOME_OK,       /* delivered (2xx) */
    DL_OUTCOME_RETRY,    /* failed: again at next_ms */
    DL_OUTCOME_DEAD,     /* failed for good (last attempt, forbidden target, ...) */
    DL_OUTCOME_GONE,     /* 410: dead, and the endpoint is disabled */
    DL_OUTCOME_LOCAL,    /* not an attempt: a local resource ran out; again at next_ms */
    DL_OUTCOME_COUNT
};
/* Its name for logs and for wh_done.lua ("ok", "retry", ...; "none" for NONE). */
const char *dl_outcome_name(enum dl_outcome o);

/* An (endpoint id, text) pair of a reply: a disabled endpoint and its reason, or (several
 * partitions) an endpoint and a health outcome for dl_health. Borrowed; never NULL. */
struct dl_idval {
    const char *id, *val;
};

/* ---- claim (wh_claim.lua) --------------------------------------------------------------- */

/* How a claimed delivery's body came. */
enum dl_claim_kind {
    DL_CLAIM_BODY = 0, /* body is the webhook body */
    DL_CLAIM_SAME,     /* the body of the earlier delivery same_as of this claim */
    DL_CLAIM_RECORD,   /* the body key expired: body is the event record to encode from */
    DL_CLAIM_EXPIRED,  /* the event is gone: no body */
};
struct dl_claimed {
    const char *did, *whid, *event_id;
    int attempt; /* 1-based */
    int replay;
    enum dl_claim_kind kind;
    const char *body; /* BODY, RECORD ("" otherwise) */
    size_t body_len;
    size_t same_as; /* SAME: 0-based index in this claim (not checked to be earlier) */
};
/* A rate-limited endpoint's due deliveries that this claim left in its queue. */
struct dl_due {
    const char *whid;
    long n;
};
struct dl_claim_res {
    const char *version; /* the endpoint set's version, "*" when not read (several partitions) */
    const struct dl_claimed *v;
    size_t n;
    const struct dl_due *due; /* rate-limited endpoints (dl_free.limited) with due left */
    size_t ndue;
};
/* An endpoint's free slots when below the claim's default. limited: a rate-limited endpoint
 * (listed whatever its free slots): the reply counts its due deliveries left. */
struct dl_free {
    const char *whid;
    long free;
    int limited;
};
struct dl_claim_req {
    unsigned part;
    const char *view;
    int64_t now_ms, lease_ms, retention_ms;
    size_t max;    /* deliveries at most */
    long def_free; /* free slots of an endpoint not listed */
    const struct dl_free *free;
    size_t nfree;
};
typedef void dl_claim_cb(void *arg, const char *err, const char *msg,
                         const struct dl_claim_res *res);
int dl_claim(struct store *s, const struct dl_claim_req *q, dl_claim_cb *cb, void *arg);

/* ---- outcomes (wh_done.lua) ------------------------------------------------------------- */

struct dl_result {
    const char *did, *whid;
    enum dl_outcome outcome; /* OK, RETRY, DEAD, GONE or LOCAL */
    const char *json;        /* the attempt log entry ("" for LOCAL) */
    int64_t next_ms;         /* RETRY, LOCAL */
};
/* The pairs: the endpoint health of the call, which the caller hands to dl_health as they
 * came (with one partition the script applied it and these are the endpoints disabled now,
 * (id, reason); with several the health outcomes (id, outcome) dl_health applies). */
struct dl_pairs {
    const struct dl_idval *v;
    size_t n;
};
typedef void dl_pairs_cb(void *arg, const char *err, const char *msg, const struct dl_pairs *res);
/* Write n outcomes of deliveries of partition part (idempotent: an unknown result may be
 * written again). */
int dl_done(struct store *s, unsigned part, const char *view, int64_t now_ms,
            int64_t disable_after_ms, int64_t retention_ms, const struct dl_result *r, size_t n,
            dl_pairs_cb *cb, void *arg);

/* ---- endpoint health (wh_health.lua with several partitions) ---------------------------- */

/* Several partitions: write the endpoint.disabled records wh_health.lua queued in {P}:wdisq
 * into the webhook ids' partitions (wh_disabled.lua: once each, whoever flushes), then drop
 * them from the queue; at most 32 per call, errors left for the next call. One partition:
 * nothing (the disabling script wrote the event). Returns store_cmd's result. */
int dl_disabled_flush(struct store *s);

/* The endpoint health pairs p of a dl_done or dl_fanout_send reply, applied: res the
 * endpoints disabled now (id, reason). With several partitions wh_health.lua applies the
 * outcomes to the deployment's endpoint hashes and cb runs from its reply (err: its error);
 * with one the script applied them already, the pairs are the endpoints it disabled and cb
 * runs now, inside this call. No pairs: nothing to do, cb not called. Returns 0, or -1 when
 * the command could not be sent (cb not called). */
int dl_health(struct store *s, int64_t now_ms, int64_t disable_after_ms,
              const struct dl_pairs *p, dl_pairs_cb *cb, void *arg);

/* ---- lease reaper (wh_reap.lua) --------------------------------------------------------- */

/* Return up to max deliveries of partition part whose lease expired to their queues;
 * res: how many. */
typedef void dl_count_cb(void *arg, const char *err, const char *msg, long long res);
int dl_reap(struct store *s, unsigned part, int64_t now_ms, long max, dl_count_cb *cb,
            void *arg);

/* ---- the endpoint set's version ({P}:whv) ------------------------------------------------ */

/* res: the version, "0" when none was ever written. */
typedef void dl_version_cb(void *arg, const char *err, const char *msg, const char *res);
/* The version for a claimer: every dl_claim reply carries it with one partition, so then
 * nothing is sent (returns 1, cb not called); with several (the claim script cannot read a
 * deployment key) it is read here. Returns 0 sent, -1 not sent, 1 not needed. */
int dl_version_probe(struct store *s, dl_version_cb *cb, void *arg);

/* ---- the fan-out's lease (wh_lease.lua) -------------------------------------------------- */

/* Take or renew partition part's fan-out lease for holder; res 1 held now, 0 another holds
 * it (other values: neither). */
int dl_lease(struct store *s, unsigned part, const char *holder, int64_t lease_ms,
             dl_count_cb *cb, void *arg);

/* ---- held pairs (wh_held.lua) ------------------------------------------------------------ */

/* An (endpoint, request) pair, a candidate for a first attempt. */
struct dl_pair_ref {
    const char *whid, *request_id;
};
struct dl_held_res {
    int stale;           /* the endpoint set moved on: match again (only version is set) */
    const char *version; /* stale: the set's version now */
    const char *flags;   /* one character per pair asked: '1' held, '0' free (may be short) */
    size_t nflags;
};
typedef void dl_held_cb(void *arg, const char *err, const char *msg,
                        const struct dl_held_res *res);
/* version: the endpoint set's version the pairs were matched against, checked first (with
 * several partitions by a read of the deployment's version before wh_held.lua runs on the
 * partition alone: one slot per script; the pairs are copied for it). */
int dl_held(struct store *s, unsigned part, const char *version, const struct dl_pair_ref *p,
            size_t n, dl_held_cb *cb, void *arg);

/* ---- fan-out and replay (wh_fanout.lua) -------------------------------------------------- */

/* How an (event, endpoint) pair is recorded. */
enum dl_pair {
    DL_PAIR_PENDING = 0, /* queued for the dispatcher (or held behind an unfinished one) */
    DL_PAIR_SKIPPED,     /* the endpoint is disabled (replayable) */
    DL_PAIR_OK,          /* first attempt delivered: a listing entry only */
    DL_PAIR_RETRY,       /* first attempt failed: waits for its retry at num */
    DL_PAIR_DEAD,        /* first attempt failed for good */
    DL_PAIR_GONE,        /* first attempt got 410: dead, endpoint disabled */
    DL_PAIR_INFLIGHT,    /* first attempt still out: leased until num */
    DL_PAIR_COUNT
};
/* Its name for logs. */
const char *dl_pair_name(enum dl_pair k);

/* The keys and arguments of one wh_fanout.lua call, built up event by event (owns every
 * string it made; the caller's strings must live until dl_fanout_send / _free). */
struct dl_fanout {
    struct store *s;
    size_t events, pairs; /* events added / pairs of the current event */
    /* private */
    const char **v;
    size_t *lens;
    size_t n, cap;
    char **owned;
    size_t nowned, capowned;
    size_t body_at, n_at; /* slots of the current event */
};
struct dl_fanout_opts {
    unsigned part;
    const char *view;
    int replay;          /* 1: a replay (no lease, no XACK; terminal deliveries again) */
    const char *version; /* replays with one partition: checked; NULL: not checked */
    const char *holder;  /* the lease holder (instance id) */
    const char *group;   /* the stream's consumer group */
    int64_t now_ms, retention_ms, disable_after_ms;
    long list_cap;
};
void dl_fanout_begin(struct dl_fanout *f, struct store *s, const struct dl_fanout_opts *o);
/* Start stream entry sid with its event ev, or ev NULL for an unreadable entry (XACKed,
 * nothing to deliver: add nothing more for it). */
void dl_fanout_event(struct dl_fanout *f, const char *sid, const struct status_event *ev);
/* One pair of the current event. json: the first attempt's log entry (NULL: none); num:
 * the retry time (RETRY) or the lease end (INFLIGHT). */
void dl_fanout_pair(struct dl_fanout *f, const char *whid, enum dl_pair kind, const char *json,
                    int64_t num);
/* 1 when a pair of that kind needs the event's body (it is sent later). */
int dl_pair_needs_body(enum dl_pair kind);
/* The current event's webhook body (len bytes); own: f frees it. Default: empty. */
void dl_fanout_body(struct dl_fanout *f, const char *body, size_t len, int own);
/* Drop the current event (nothing matched; its strings stay owned until freed). */
void dl_fanout_drop(struct dl_fanout *f);
struct dl_fanout_res {
    long long code;    /* -1 the endpoint set moved on; -2 the lease is another's; else ok */
    long long created; /* deliveries created */
    struct dl_pairs pairs; /* as dl_done's */
};
typedef void dl_fanout_cb(void *arg, const char *err, const char *msg,
                          const struct dl_fanout_res *res);
/* Send the call (f stays the caller's: dl_fanout_free it either way). */
int dl_fanout_send(struct dl_fanout *f, dl_fanout_cb *cb, void *arg);
void dl_fanout_free(struct dl_fanout *f);

/* ---- replay of dead or skipped deliveries (wh_requeue.lua) ------------------------------- */

struct dl_requeue_req {
    unsigned part;
    const char *view;
    int skipped; /* 0 the dead set, 1 the skipped set */
    int64_t now_ms;
    const char *webhook_id, *request_id; /* "" = any */
    int has_since, has_until;
    int64_t since_ms, until_ms; /* event time window (when has_*) */
    int dry;
    long max; /* deliveries at most */
};
/* res: deliveries replayed (or that would be, dry). */
int dl_requeue(struct store *s, const struct dl_requeue_req *q, dl_count_cb *cb, void *arg);

/* ---- the fan-out's reading of its stream {P}:events (consumer group) --------------------- */

struct store_events_iter;
/* The group exists now (created, or it existed: BUSYGROUP is not an error). */
typedef void dl_group_cb(void *arg, const char *err, const char *msg);
int dl_group_create(struct store *s, unsigned part, const char *group, dl_group_cb *cb,
                    void *arg);
/* XAUTOCLAIM of every pending entry from cursor (ids only): res next cursor ("0-0": done),
 * claimed the entries taken over in this step. err dl_err_nogroup: create the group. */
typedef void dl_autoclaim_cb(void *arg, const char *err, const char *msg, const char *next,
                             size_t claimed);
int dl_autoclaim(struct store *s, unsigned part, const char *group, const char *consumer,
                 const char *cursor, dl_autoclaim_cb *cb, void *arg);
/* A page of entries: walk them with store_events_next (store/events.h; borrowed for the
 * callback); n entries (0: nothing). */
typedef void dl_events_cb(void *arg, const char *err, const char *msg,
                          struct store_events_iter *it, size_t n);
/* XREADGROUP of up to count entries for consumer: new ones, or (pending = 1) its own pending
 * entries from the start. err dl_err_nogroup: create the group. */
int dl_read(struct store *s, unsigned part, const char *group, const char *consumer,
            size_t count, int pending, dl_events_cb *cb, void *arg);
/* Replays: a page of partition part's stream (XRANGE start end COUNT count), or every event
 * of one request (store/events_by_request.lua, on its partition). */
int dl_events_page(struct store *s, unsigned part, const char *start, const char *end,
                   int count, dl_events_cb *cb, void *arg);
int dl_events_of_request(struct store *s, const char *request_id, dl_events_cb *cb, void *arg);

/* ---- the deployment's live processes (members.lua, several partitions) ------------------- */

/* Renew this process's entry (lease_ms 0: leave); res: the live processes. cb may be NULL. */
int dl_members(struct store *s, const char *instance, int64_t now_ms, int64_t lease_ms,
               dl_count_cb *cb, void *arg);

/* ---- the endpoint set (wh_load.lua, wh_put.lua, wh_del.lua) ------------------------------ */

struct dl_endpoint_row {
    const char *id;
    const char **kv; /* field, value, ... (2 * nkv strings, borrowed) */
    size_t nkv;
};
struct dl_endpoints_res {
    const char *version; /* "0" before any endpoint was written */
    const struct dl_endpoint_row *v;
    size_t n;
};
typedef void dl_endpoints_cb(void *arg, const char *err, const char *msg,
                             const struct dl_endpoints_res *res);
/* Every endpoint with the set's version, atomically. */
int dl_endpoints_load(struct store *s, dl_endpoints_cb *cb, void *arg);
/* Create (create = 1) or update endpoint id with nfields (field, value) pairs, a value NULL
 * deleting the field; res 1, or 0 when updating an unknown id / creating an existing one. */
int dl_endpoint_put(struct store *s, const char *id, int create, const char *const *fields,
                    int nfields, int64_t now_ms, dl_count_cb *cb, void *arg);
/* Delete endpoint id with its queue (its delivery log is purged by wh_gc.lua); res 1, or 0
 * when unknown. */
int dl_endpoint_del(struct store *s, const char *id, int64_t now_ms, dl_count_cb *cb,
                    void *arg);

#endif
