/* sim_model.h - the simulator's requests: creation (generated from a lifecycle mix or
 * scripted through the control API), their paths through the upstream statuses, tx hashes
 * and reasons, the status history, the timers that advance them, and the seeded random
 * generator that makes ids, hashes, addresses and paths reproducible with --seed.
 *
 * Every request lives in memory until evicted (oldest finished first, beyond --retain), so
 * /intents/status/v3 and /requests/v3 always agree with what the websocket said. Each change
 * of status calls the change callback given to sim_model_new exactly once, after the request
 * was updated.
 *
 * A reorg (the "reorg" lifecycle, or "reorg": true on a scripted step or explicit change)
 * marks the deposit inTx as failed and records struct sim_reorg, which /requests/v3 shows
 * as metadata.reorg; everything else about the change follows the usual rules.
 *
 * Per-request call counters (status polls, /requests/v3 reads by id, subscribes) are kept
 * on the request; calls for an id that does not exist yet are kept in a bounded side map and
 * handed over when a request with that id is created (sim_model_count_call).
 *
 * Determinism: generated requests draw from their own stream keyed by (seed, n-th generated
 * request) and scripted ones from (seed, n-th scripted request), so ids, hashes and paths do
 * not depend on how the two interleave in time. Timestamps are real time.
 * struct sim_req is public so that sim_json.c can serialise it; only this module writes it.
 * runs on: the simulator's lws thread. */
#ifndef RELAY_SIM_MODEL_H
#define RELAY_SIM_MODEL_H

#include <stddef.h>
#include <stdint.h>

struct lws_context;

#define SIM_ID_MAX 129   /* request id text incl. NUL (PROTO_MAX_ID) */
#define SIM_ADDR_MAX 64  /* an address text incl. NUL */
#define SIM_MAX_STEPS 32 /* steps in one path */
#define SIM_MAX_TXS 16   /* hashes in inTxHashes / txHashes */

enum sim_tx_kind { SIM_TX_DEPOSIT, SIM_TX_FILL, SIM_TX_REFUND, SIM_TX_OTHER };

struct sim_tx {
    char *hash;       /* heap */
    int64_t chain_id;
    int64_t at_ms;    /* when it was seen (wall) */
    int64_t block;
    int64_t fee;
    enum sim_tx_kind kind;
    int failed;       /* "status": "failure" in /requests/v3 (a reorged deposit) */
};

struct sim_step {
    const char *status;             /* interned */
    const char *fail_reason;        /* interned; NULL = keep the request's */
    const char *refund_fail_reason; /* interned; NULL = keep */
    const char *details;            /* interned; NULL = null */
    int64_t delay_ms;               /* before entering this step; -1 = manual (advance) */
    int reorg;                      /* entering it reorgs the deposit (see sim_reorg) */
};

struct sim_deposit {
    char address[SIM_ADDR_MAX];
    const char *type;               /* "open" | "strict" */
    char depositor[SIM_ADDR_MAX];   /* "" = null (until the deposit is seen) */
    char *tx_hash;                  /* heap; NULL until the deposit is seen */
    char recovery[SIM_ADDR_MAX];
};

/* The deposit's block was reorganised away: shown as metadata.reorg in /requests/v3. */
struct sim_reorg {
    int64_t detected_ms;            /* wall ms: the updatedAt of the change that found it */
    int64_t block;                  /* the deposit tx's block */
    char block_hash[67];            /* 0x + 64 hex */
    const char *fail_reason;        /* interned: the change's reason, else DEPOSIT_REORGED */
};

/* Upstream calls and subscribes naming one request id. */
struct sim_counts {
    uint64_t status_polls;          /* GET /intents/status/v3?requestId= (any answer) */
    uint64_t requests_reads;        /* GET /requests/v3?id= (any answer) */
    uint64_t subscribes;            /* websocket subscribe messages, every connection */
};

enum sim_count_kind { SIM_COUNT_STATUS_POLL, SIM_COUNT_REQUESTS_READ, SIM_COUNT_SUBSCRIBE };

struct sim_hist {
    const char *status;
    int64_t updated_ms;
};

#define SIM_KEY_MAX 64
struct sim_req {
    uint64_t seq;                   /* creation order, from 1 */
    char id[SIM_ID_MAX];
    int64_t created_ms, quote_created_ms, updated_ms; /* wall ms */
    int64_t origin, dest;           /* chain ids */
    const char *status;             /* interned */
    const char *fail_reason;        /* as reported ("N/A" unless failure/fallback/refund) */
    const char *refund_fail_reason; /* as reported */
    const char *details;            /* NULL = null */
    const char *kept_fail_reason;   /* remembered reason (NULL = none yet) */
    const char *kept_refund_reason;
    struct sim_tx *in, *out;        /* heap arrays of at most SIM_MAX_TXS */
    int nin, nout;
    struct sim_deposit *dep;        /* NULL for ordinary requests */
    struct sim_reorg *reorg;        /* NULL until the deposit was reorged */
    struct sim_counts counts;
    char user[SIM_ADDR_MAX], recipient[SIM_ADDR_MAX];
    const char *referrer;           /* interned or NULL */
    char api_key[SIM_KEY_MAX];      /* the key it was made with ("": the sim's --api-key) */
    const char *lifecycle;          /* template name, or "scripted" */
    int64_t amount_wei;             /* for fees/route numbers in /requests/v3 */
    struct sim_step *steps;
    int nsteps, pos;                /* pos: index of the current step */
    int auto_hashes;
    int terminal;                   /* the path ended */
    uint64_t rng;
    /* timer */
    int64_t due_ms;
    int heap_idx;                   /* -1 when not scheduled */
    /* history */
    struct sim_hist *hist;
    int nhist, hist_cap;
    /* creation-order list */
    struct sim_req *prev, *next;
};

struct sim_model;
typedef void (*sim_change_cb)(void *arg, struct sim_req *r);

/* Create the model; cb is called after every status change. Never NULL. */
struct sim_model *sim_model_new(uint64_t seed, int64_t retain, sim_change_cb cb, void *arg);
/* Attach the lws context whose loop runs the timers (before any request is created). */
void sim_model_attach(struct sim_model *m, struct lws_context *ctx);
/* Free every request and timer; NULL-safe. Cancels its lws timer: call before destroying
 * the context, or after (the timer is then already gone: pass detached=1). */
void sim_model_free(struct sim_model *m, int detached);

/* Set the mix of generated lifecycles: "success:60,refund:10,..." (names from
 * sim_lifecycle.c's templates). Returns 0, or -1 with a reason in err. */
int sim_model_set_mix(struct sim_model *m, const char *mix, char *err, size_t errn);

/* What to create. Zero-initialise, then set what you need. */
struct sim_spec {
    const char *id;             /* NULL: generated 0x + 64 hex */
    const char *lifecycle;      /* template; NULL: steps, or a pick from the mix */
    const struct sim_step *steps; /* explicit path (strings need not be interned) */
    int nsteps;
    int64_t step_ms;            /* default delay between steps; 0 = manual advance only */
    int64_t origin, dest;       /* 0 = from the template / random */
    int deposit;                /* -1 = as the template says, 0 = no, 1 = yes */
    const char *deposit_type;   /* "open" | "strict" | NULL (random) */
    const char *referrer;       /* NULL = random or none */
    const char *user;
    int no_auto_hashes;         /* do not add tx hashes implied by statuses */
    int generated;              /* draws from the generated stream (load mode) */
};

/* Create a request at the first step of its path (which counts as a status change).
 * Returns it, or NULL with a static reason in *err (duplicate id, unknown lifecycle, ...). */
struct sim_req *sim_model_create(struct sim_model *m, const struct sim_spec *spec,
                                 const char **err);
/* Move to the next step of the path now. Returns 0, or -1 when the path has ended. */
int sim_model_advance(struct sim_model *m, struct sim_req *r);

/* An explicit status change (POST /_sim/requests/{id}/status). */
struct sim_set {
    const char *status;             /* required */
    const char *fail_reason, *refund_fail_reason; /* NULL = default rules */
    const char *details;            /* used when details_set */
    int details_set;
    const char *in_hashes[SIM_MAX_TXS];
    int nin;                        /* appended to inTxHashes */
    const char *out_hashes[SIM_MAX_TXS];
    int nout;                       /* appended to txHashes */
    int64_t updated_at;             /* 0 = now */
    int no_auto_hashes;
    int reorg;                      /* reorg the deposit (see sim_reorg) */
};
void sim_model_set_status(struct sim_model *m, struct sim_req *r, const struct sim_set *set);

/* Move every time of r (creation, quote, updatedAt, history, transactions, reorg) by_ms
 * into the past: for requests made at once but meant to look spread over a day (the bulk
 * create's "spanMs"). Call once its path has ended (no timer left to undo it). */
void sim_model_backdate(struct sim_model *m, struct sim_req *r, int64_t by_ms);

struct sim_req *sim_model_find(const struct sim_model *m, const char *id);
/* Oldest / newest request in creation order (NULL when none); walk with r->next / r->prev. */
struct sim_req *sim_model_oldest(const struct sim_model *m);
struct sim_req *sim_model_newest(const struct sim_model *m);
size_t sim_model_count(const struct sim_model *m);
/* Requests whose path has not ended. */
size_t sim_model_active(const struct sim_model *m);
/* Requests evicted so far (beyond --retain). */
uint64_t sim_model_evicted(const struct sim_model *m);
/* Count an upstream call or subscribe naming id: on the request, or (for an id not created
 * yet) in a side map of at most SIM_MAX_EARLY_COUNTS ids, handed over at creation. */
#define SIM_MAX_EARLY_COUNTS 4096
void sim_model_count_call(struct sim_model *m, const char *id, enum sim_count_kind kind);
/* Zero every request's counters and forget the early ones (POST /_sim/stats/reset). */
void sim_model_reset_counts(struct sim_model *m);
/* A short random id for a websocket connection (base36, 11 chars) into out (>= 12 bytes),
 * from the model's seeded stream of connection ids. */
void sim_model_socket_id(struct sim_model *m, char *out);

#endif
