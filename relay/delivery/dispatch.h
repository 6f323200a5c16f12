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

/* Send one signed test event to wh now, outside the queue; cb gets the outcome. Returns 0
 * (cb called exactly once, later) or -1. */
typedef void dispatch_test_cb(void *arg, long status, const char *err, int64_t latency_ms,
                              const char *body, size_t body_len, const char *event_id);
int dispatch_test(struct dispatch *d, struct webhook *wh, dispatch_test_cb *cb, void *arg);

#endif
