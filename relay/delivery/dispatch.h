/* dispatch.h - webhook delivery: claims due deliveries with a lease (store/wh_claim.lua),
 * sends them through httpc (libcurl multi on the core loop), records outcomes in batches
 * (store/wh_done.lua), and reaps expired leases of crashed processes (store/wh_reap.lua).
 *
 * Per endpoint: an AIMD concurrency window (starts at 4, grows by one per window of
 * successes up to STATUSRELAY_ENDPOINT_CONCURRENCY, halves on 429/502/503/504 or a timeout
 * at most once per round trip, never below 1). A claim takes at most two windows per endpoint
 * (one when the lease is short): one goes out, the other waits in the endpoint's local queue
 * so that a finished exchange starts the next without a Redis round trip. A slow endpoint's
 * backlog stays in Redis and never holds leases or slots of others. This per-endpoint state
 * is private to dispatch.c (struct dispatch_ep, hung on struct webhook's dispatch_x).
 * Outcomes: 2xx delivered; 410 dead and the endpoint disabled; forbidden_target dead at
 * once; anything else retried after the schedule's next delay (+0..20% jitter; Retry-After
 * on 429/503 when longer), dead after the last attempt. An endpoint failing continuously
 * for STATUSRELAY_DISABLE_AFTER is disabled.
 * runs on: core thread. */
#ifndef RELAY_DISPATCH_H
#define RELAY_DISPATCH_H

#include "store/deliveries.h" /* enum dl_outcome */

#include <stddef.h>
#include <stdint.h>

struct core;
struct webhooks;
struct dispatch;
struct webhook;
struct status_event;

struct dispatch *dispatch_new(struct core *c, struct webhooks *w);
/* Stop claiming; attempts in flight complete into nothing (their leases expire). */
void dispatch_free(struct dispatch *d);
/* 1 while attempts are in flight or their outcomes are still being written (graceful
 * shutdown waits for 0; claiming stops once core->shutting_down is set). */
int dispatch_busy(const struct dispatch *d);
/* New due work may exist: claim now (coalesced). */
void dispatch_kick(struct dispatch *d);

/* A webhook body shared by several attempts (one event to many endpoints): refcounted. */
struct dispatch_body;
/* A copy of s (n bytes), one reference. */
struct dispatch_body *dispatch_body_new(const char *s, size_t n);
void dispatch_body_unref(struct dispatch_body *b); /* NULL is fine */
const char *dispatch_body_data(const struct dispatch_body *b, size_t *len);

/* First attempts (the delivery log, relay/delivery/fanout.c): the fan-out sends the first
 * attempt of a delivery that has no record yet and records only its outcome.
 * dispatch_first_ok: 1 when wh should get first attempts now (enabled, all-events mode, its
 * last attempt here did not fail, its local queue is short); otherwise the fan-out records
 * the delivery as pending and the claim path sends it.
 * dispatch_first: queue the attempt (attempt 1 of delivery did, body b: a reference is
 * taken) on wh's window. cb runs exactly once, later (never inside this call), with the
 * outcome (OK, RETRY with next_ms, DEAD, GONE) and the attempt log entry, or with outcome
 * NONE when it was not attempted (endpoint deleted or disabled meanwhile) or LOCAL when it
 * could not start here (not an attempt) - unless the handle is detached or forgotten first. Returns the handle, NULL when closing.
 * dispatch_first_detach: the fan-out recorded the attempt as in flight (lease in {P}:inflight;
 * the commit has landed): its outcome now goes to wh_done.lua like a claimed delivery's; cb
 * will not run.
 * dispatch_first_forget: the fan-out goes away; cb will not run, the outcome is dropped. */
struct dispatch_attempt;
typedef void dispatch_first_cb(void *arg, enum dl_outcome outcome, const char *json,
                               int64_t next_ms);
int dispatch_first_ok(struct dispatch *d, struct webhook *wh);
struct dispatch_attempt *dispatch_first(struct dispatch *d, struct webhook *wh, const char *did,
                                        const char *event_id, struct dispatch_body *b,
                                        unsigned part, dispatch_first_cb *cb, void *arg);
void dispatch_first_detach(struct dispatch *d, struct dispatch_attempt *a);
void dispatch_first_forget(struct dispatch *d, struct dispatch_attempt *a);
/* The outcome of a first attempt that ended while the fan-out's commit recording it as in
 * flight was being written (that commit has landed since): written by wh_done.lua like a
 * claimed delivery's. outcome OK, RETRY, DEAD or GONE; json copied. */
void dispatch_report(struct dispatch *d, struct webhook *wh, const char *did, unsigned part,
                     enum dl_outcome outcome, const char *json, int64_t next_ms);

/* Due deliveries of rate-limited endpoint wh that this process's last claims saw waiting
 * for its rateLimit (0 when none, or not limited). */
long dispatch_rate_waiting(const struct webhook *wh);

/* Send one signed test event to wh now, outside the queue; cb gets the outcome. Returns 0
 * (cb called exactly once, later) or -1. */
typedef void dispatch_test_cb(void *arg, long status, const char *err, int64_t latency_ms,
                              const char *body, size_t body_len, const char *event_id);
int dispatch_test(struct dispatch *d, struct webhook *wh, dispatch_test_cb *cb, void *arg);

#endif
