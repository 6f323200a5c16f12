/* fanout_internal.h - what fanout.c (the lease, reading the stream, the pre-decoded events,
 * wiring) and fanout_batch.c (matching a batch, first attempts, committing) share. Private to
 * relay/delivery/: nobody else includes it. See fanout.c for the design.
 * runs on: core thread. */
#ifndef RELAY_DELIVERY_FANOUT_INTERNAL_H
#define RELAY_DELIVERY_FANOUT_INTERNAL_H

#include "relay/delivery/fanout.h"
#include "protocol/event.h"
#include "protocol/proto.h"
#include "store/deliveries.h"
#include "store/keys.h"

#include <event2/util.h>
#include <stddef.h>
#include <stdint.h>

struct idmap;
struct dispatch_body;
struct dispatch_attempt;

#define FANOUT_POLL_MS 50
#define FANOUT_MAX_EVENTS 500
#define FANOUT_MAX_DELIVERIES 4000 /* per script call: bounds the time Redis spends in it */
#define FANOUT_PRE_MAX 8192 /* events this process accepted, kept decoded for the fan-out */
#define FANOUT_MAX_BATCHES 8     /* open batches (read, not committed) */
#define FANOUT_MAX_OPEN 2048     /* first attempts open across them (more only waits in queues) */
#define FANOUT_COMMIT_WAIT_MS 1000 /* a batch commits after this even with attempts open */

struct fo_entry {
    char sid[48];
    int ok; /* decoded */
    int no_facts; /* the applier said its request had no facts when it was written: it
                     carries none, so no facts_at read for it (store/apply.h) */
    struct status_event ev;
    struct dispatch_body *body; /* the webhook body, made once for all first attempts */
};

struct fo_batch;

/* The state of one (event, endpoint) pair of a batch, changed only by fo_dl_set (names for
 * logs: fo_state_name). The commit records PENDING, SKIPPED, the outcomes and INFLIGHT as
 * the matching store/deliveries.h enum dl_pair (fo_state_pair).
 *   PENDING   recorded pending by the commit: the dispatcher sends it
 *   SKIPPED   the endpoint is disabled: recorded skipped
 *   OPEN      a first attempt from this process: a candidate until wh_held.lua answered,
 *             then sent (open until its outcome)
 *   CHAINED   waits in memory behind an open attempt of the same request and endpoint (sent
 *             when that one succeeds)
 *   OK RETRY DEAD GONE  the first attempt's outcome
 *   INFLIGHT  the attempt was still out when its batch was committed: recorded in flight
 *             (detached once that commit landed) */
enum fo_state {
    FO_PENDING = 0,
    FO_SKIPPED,
    FO_OPEN,
    FO_CHAINED,
    FO_OK,
    FO_RETRY,
    FO_DEAD,
    FO_GONE,
    FO_INFLIGHT,
    FO_STATE_COUNT
};

/* One (event, endpoint) pair of a batch. */
struct fo_dl {
    struct fo_batch *b;
    size_t ev;          /* index in b->ents */
    struct webhook *wh; /* reference */
    enum fo_state st;   /* read freely; written only through fo_dl_set */
    char late; /* its outcome came while the commit writing it in flight (INFLIGHT) was out:
                  once that commit lands, the outcome is written by wh_done.lua
                  (dispatch_report) */
    struct dispatch_attempt *h; /* while the attempt is open (until its commit landed) */
    char *json;                 /* the attempt log entry (owned) */
    int64_t num;                /* next attempt ms (retry) or lease end (in flight) */
    struct fo_dl *succ;         /* chained successor (CHAINED), not owned */
    uint32_t slot;              /* in the open-pair map: slot + 1, 0 when not */
    uint32_t hash;              /* of its pair key in fo->pairs (idmap_hash), made once */
};

struct fo_batch {
    struct fanout *fo;
    struct fo_batch *next;
    struct fo_entry *ents;
    size_t n;
    struct fo_dl **dls; /* owned */
    size_t ndl, capdl;
    size_t open; /* pairs OPEN (sent) or CHAINED */
    int64_t t0;  /* mono ms when its first attempts started */
    int committing;
};

/* An event this process accepted, decoded, waiting for the fan-out to read its stream
 * entry: the read then skips decoding the record again. ev is the applier's written event
 * itself, moved here (ingest_on_event_take), not a copy: the node owns it until pre_take
 * moves it into the batch entry (or it is dropped). Listeners run in the order of the
 * apply replies, which is the order of the XADDs, so the queue is in stream order; entries
 * of other processes simply find no match here and are decoded. */
struct fo_pre {
    struct fo_pre *next;
    char sid[48];
    int facts; /* the applier's word: 0 the event carries no facts, else maybe (apply.h) */
    struct status_event ev;
};

struct fanout {
    struct core *c;
    struct webhooks *w;
    struct dispatch *dp;
    struct event *lease_ev, *poll_ev, *kick_ev, *commit_ev;
    int closing, pending;
    int leader, group_ready, need_claim, need_pending, busy;
    int kick_again; /* new events while a step was in flight: read again after it */
    struct fo_batch *batch; /* being matched (owned) */
    size_t count_asked;
    struct fo_batch *q_head, *q_tail; /* open batches, stream order (owned) */
    size_t nq, nopen;
    struct idmap *pairs; /* "<endpoint>\x1f<request>" -> slot of its newest open pair */
    struct fo_dl **slots;
    uint32_t nslots, capslots, *free_slots, nfree;
    char claim_cursor[48];
    struct fo_pre *pre_head, *pre_tail; /* owned */
    size_t npre;
    unsigned part;              /* the partition this fan-out reads (store/keys.h) */
    struct fanout_share *share; /* NULL with one partition */
};

/* fanout.c */
/* Every store callback starts here: 1 when the object is closing (and maybe freed now). */
int fo_callback_enter(struct fanout *fo);
/* The read step is over (busy cleared). */
void fo_idle(struct fanout *fo);
/* Take the next read step if none is in flight and the pipeline has room (coalesced). */
void fo_step(struct fanout *fo);

/* fanout_state.c: the pair states' names, their one setter, and the pure per-pair decisions
 * (row-tested in tests/unit/test_relay_fanout_state.c) */
/* The one place a pair's state changes. */
void fo_dl_set(struct fo_dl *dl, enum fo_state st);
const char *fo_state_name(enum fo_state st);
/* How the commit records a pair of state st (OPEN and CHAINED never reach it: the commit's
 * step turns them into INFLIGHT or PENDING first; recorded PENDING if they did). */
enum dl_pair fo_state_pair(enum fo_state st);
/* The state of a first attempt's outcome (OK, RETRY, DEAD or GONE; any other: DEAD), and
 * back (a state that is no outcome: DEAD). */
enum fo_state fo_outcome_state(enum dl_outcome o);
enum dl_outcome fo_state_outcome(enum fo_state st);

/* A candidate's admission once wh_held.lua answered: held (its request has an unfinished
 * delivery to the endpoint: recorded PENDING, not open); else by its newest open pair of the
 * same (endpoint, request), the predecessor: none or delivered (OK): SEND its first attempt;
 * still open (OPEN, CHAINED): CHAIN behind it; anything else (failed, pending, in flight):
 * BEHIND it, recorded PENDING. */
enum fo_admit { FO_ADMIT_HELD, FO_ADMIT_SEND, FO_ADMIT_CHAIN, FO_ADMIT_BEHIND };
enum fo_admit fo_admit_decide(int held, int has_pred, enum fo_state pred);

/* The commit's step for one pair of the batch it writes (attempt_out: the dispatcher still
 * has its first attempt, dl->h != NULL). */
struct fo_commit_step {
    enum fo_state st; /* the state after the step (recorded as fo_state_pair(st)) */
    int closes;       /* it leaves the open count (b->open, fo->nopen) */
    int lease;        /* its number becomes the lease end (recorded in flight) */
    int unchain;      /* its chained successors become PENDING (recorded behind it) */
};
struct fo_commit_step fo_commit_decide(enum fo_state st, int attempt_out);
/* Match fo->batch against the endpoints and start its first attempts (through wh_held.lua);
 * the batch then joins the open ones. */
void fo_process_batch(struct fanout *fo);
/* Commit the oldest open batch once its attempts are done or it has waited long enough. */
void fo_try_commit(struct fanout *fo);
void fo_on_commit_ev(evutil_socket_t fd, short what, void *arg);
/* Free b (NULL is fine) / only its pairs, forgetting open first attempts. */
void fo_batch_free(struct fanout *fo, struct fo_batch *b);

#endif
