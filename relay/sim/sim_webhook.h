/* sim_webhook.h - the upstream's own webhooks, as the simulator sends them: every status
 * change POSTed as {"event","timestamp","data"} to one URL, signed the upstream's way:
 * X-Signature-Timestamp (unix ms of the attempt) and X-Signature-SHA256 = lowercase hex
 * HMAC-SHA256(key, timestamp + "." + body), keyed by the API key. Best effort like the
 * upstream: a failed attempt (non-2xx, timeout, connection error) is retried with
 * exponential backoff (1 s doubling, at most 60 s) up to --webhook-retries times.
 *
 * A worker thread with libcurl multi does the sending, so a slow receiver never stalls the
 * simulator's lws loop; the lws thread only hands it finished bodies through a
 * mutex-guarded queue (bounded: beyond 100,000 waiting bodies new ones are dropped and
 * counted).
 * runs on: sim_webhook_new/post/stats/free on the lws thread; the sending on its own thread. */
#ifndef RELAY_SIM_WEBHOOK_H
#define RELAY_SIM_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>

struct sim_webhook;

struct sim_webhook_stats {
    uint64_t queued;    /* bodies handed over */
    uint64_t attempts;  /* POSTs started */
    uint64_t delivered; /* answered 2xx */
    uint64_t failed;    /* attempts that failed */
    uint64_t retries;   /* attempts after the first */
    uint64_t gave_up;   /* bodies dropped after the last retry */
    uint64_t dropped;   /* bodies dropped because the queue was full */
    uint64_t pending;   /* waiting or in flight now */
};

/* Start the worker. key signs (may be ""); retries: attempts after the first. Returns NULL
 * (after logging) when the thread or curl cannot start. */
struct sim_webhook *sim_webhook_new(const char *url, const char *key, int64_t retries,
                                    int64_t timeout_ms);
/* Queue one body (heap, len bytes); takes it on every path. */
void sim_webhook_post(struct sim_webhook *w, char *body, size_t len);
void sim_webhook_stats(struct sim_webhook *w, struct sim_webhook_stats *out);
void sim_webhook_reset_stats(struct sim_webhook *w);
/* Stop the worker (in-flight attempts are abandoned), free everything. NULL-safe. */
void sim_webhook_free(struct sim_webhook *w);

#endif
