/* dispatch_internal.h - what dispatch.c (claims, per-endpoint queues, first attempts,
 * reaper, lifecycle) and attempt.c (sending one attempt, its outcome, writing outcomes with
 * wh_done.lua) share. Private to relay/delivery/: nobody else includes it.
 * runs on: core thread. */
#ifndef RELAY_DELIVERY_DISPATCH_INTERNAL_H
#define RELAY_DELIVERY_DISPATCH_INTERNAL_H

#include "relay/delivery/dispatch.h"
#include "protocol/proto.h"
#include "protocol/sign.h"
#include "relay/delivery/endpoint.h"
#include "store/deliveries.h"
#include "store/keys.h"

#include <event2/util.h>
#include <stddef.h>
#include <stdint.h>

#define DISPATCH_DONE_MAX 1000
#define DISPATCH_RESPONSE_KEEP 1024
#define DISPATCH_DRAIN (64 * 1024)
#define DISPATCH_RETRY_AFTER_MAX_MS (24LL * 3600 * 1000)

/* A webhook body, shared by the attempts of one event claimed together (100 endpoints: one
 * copy, not 100). */
struct dispatch_body {
    int refs;
    size_t len;
    char p[]; /* NUL-terminated */
};

struct dispatch_attempt {
    struct dispatch_attempt *next;
    struct dispatch *d;
    struct webhook *wh; /* reference, from start to free */
    char whid[WH_ID_MAX];
    char *did;
    char ev[PROTO_EVENT_ID_MAX + 16];
    int att, replay;
    unsigned part;              /* the partition of its request (its delivery keys) */
    struct dispatch_body *b;    /* reference; dropped when the HTTP exchange completes */
    int64_t claimed_ms; /* monotonic: the lease runs from here */
    int64_t rl_by;      /* monotonic: a rate-limited send goes out by then or is handed
                           back unsent (its grant is old: dispatch.c "rate limits"); 0 none */
    enum dl_claim_kind kind; /* BODY, RECORD or EXPIRED (a claim's SAME shares a body) */
    /* headers of this attempt (httpc copies them) */
    char h_id[PROTO_EVENT_ID_MAX + 32], h_ts[48], h_sig[2 * PROTO_SIG_MAX + 32];
    char h_xts[64], h_xsig[96], h_trace[96];
    /* result */
    enum dl_outcome outcome; /* NONE until known; LOCAL: not an attempt (a local resource ran
                                out before anything was sent; again at next_ms) */
    char *json;          /* the attempt log entry */
    int64_t next_ms;
    /* test sends */
    dispatch_test_cb *test_cb;
    void *test_arg;
    /* first attempts of the fan-out (dispatch_first): reported to first_cb instead of
     * wh_done.lua until detached; orphan: forgotten, the result is dropped */
    dispatch_first_cb *first_cb;
    void *first_arg;
    int orphan;
};

struct dispatch {
    struct core *c;
    struct webhooks *w;
    struct event *tick_ev, *kick_ev, *flush_ev, *reap_ev, *pump_ev;
    int closing;
    int pending;     /* store commands in flight */
    size_t inflight; /* HTTP attempts in flight */
    size_t queued;   /* claimed attempts waiting in their endpoint's queue */
    struct webhook *qlist; /* endpoints with a queue (one reference each) */
    int claiming, reaping;
    int kick_again; /* kicked while a claim was in flight: claim again after it */
    int ahead;      /* windows claimed per endpoint: 2 (one queued), 1 with short leases */
    struct dispatch_attempt *res_head, *res_tail; /* results waiting to be written */
    size_t nres;
    struct dispatch_attempt *flushing; /* batch being written */
    struct dispatch_attempt *held;     /* claimed, waiting for an endpoint reload */
    /* partitions (docs/partitions.md): a claim asks one partition, the next claim the next
     * one, and a tick's claim goes on through every partition (claim_part: the one asked,
     * claim_force / claim_got: the tick's force flag and what the sweep claimed so far);
     * outcomes are written in batches of one partition; every partition is reaped */
    unsigned np, cpart, claim_part;
    int claim_force, probing; /* probing: version_probe's GET in flight */
    int64_t probe_ms;         /* mono ms of the last version_probe GET; 0 = never */
    size_t claim_got;
    int rl_any;               /* the last claim saw a rate-limited endpoint (or grants) */
    int64_t rl_log_ms;        /* mono ms of the last "grant too old" line; 0 = never */
    uint64_t rl_suppressed;   /* such hand-backs not logged since */
    int local_streak;         /* attempts failed locally in a row (attempt.c: backoff) */
    int64_t local_log_ms;     /* mono ms of the last "failed locally" line; 0 = never */
    uint64_t local_suppressed; /* such failures not logged since */
};

/* The dispatcher's state of one endpoint, hung on struct webhook's dispatch_x (opaque outside
 * this file) by ep_of. It lives exactly as long as the endpoint: reloads update the endpoint
 * in place, so the window survives them, and attempts in flight keep a deleted endpoint (and
 * its counters) alive until they end. webhook_unref free()s it: by then the queue is empty
 * and the endpoint is off qlist, since both hold references on the endpoint. */
struct dispatch_ep {
    double cwnd;     /* AIMD concurrency window, 1 .. endpoint_concurrency */
    int inflight;    /* attempts in flight from this process */
    int64_t last_decrease_ms;
    struct dispatch_attempt *q_head, *q_tail; /* claimed ahead, waiting for a window slot */
    int queued;
    int q_listed;    /* on the dispatcher's list of endpoints with a queue (d->qlist) */
    struct webhook *q_next;
    int failing;     /* the last attempt here failed: the fan-out records, not sends */
    /* rateLimit (dispatch.c "rate limits"): sends granted by store/ratelimit and not used
     * yet, the grant's Redis time (its id), when they go back unused (mono ms), no take
     * before rl_next (mono ms: the shared log is full), the due deliveries the last claim
     * sweep left in Redis (rl_seen: counted during the sweep in progress), a take in
     * flight, tokens offered to the claim in progress */
    long rl_tokens;
    int64_t rl_at, rl_use_by, rl_next;
    long rl_want, rl_seen;
    int rl_taking, rl_offered;
};

/* wh's per-endpoint state, created on first sight (dispatch.c). */
struct dispatch_ep *dsp_ep_of(struct dispatch *d, struct webhook *wh);
/* Free one attempt / a list of them (dispatch.c). NULL is fine. */
void dsp_attempt_free(struct dispatch_attempt *a);
void dsp_list_free(struct dispatch_attempt *a);
/* Free d once it is closing and nothing is in flight (dispatch.c). */
void dsp_maybe_free(struct dispatch *d);
/* Every store callback starts here: 1 when d is closing (and maybe freed now) (dispatch.c). */
int dsp_callback_enter(struct dispatch *d);
/* Send queued attempts of wh while its window has room (dispatch.c). */
void dsp_pump(struct dispatch *d, struct webhook *wh);

/* Start a's HTTP exchange; on a failure before any exchange a is handed on (attempt.c). */
void dsp_send(struct dispatch *d, struct dispatch_attempt *a);
/* a failed before any exchange; retry (if that is the outcome) after delay_ms. a is handed
 * on (and may be freed) here (attempt.c). */
void dsp_fail_now(struct dispatch *d, struct dispatch_attempt *a, const char *err,
                  enum dl_outcome outcome, int64_t delay_ms);
/* Queue a's outcome for wh_done.lua / write a batch of outcomes now (attempt.c). */
void dsp_push_result(struct dispatch *d, struct dispatch_attempt *a);
void dsp_flush(struct dispatch *d);
void dsp_on_flush(evutil_socket_t fd, short what, void *arg);

#endif
