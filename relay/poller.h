/* poller.h - upstream HTTP reads: GET /intents/status/v3 per request and GET /requests/v3
 * pages (gap repair and discovery) through httpc, every call drawn from the shared budget
 * (store/budget: all processes together spend at most STATUSRELAY_UPSTREAM_BUDGET a minute),
 * most urgent first (the poll set is ordered by due time). Backoff on 429/5xx/timeouts.
 * runs on: core thread. */
#ifndef RELAY_POLLER_H
#define RELAY_POLLER_H

#include "protocol/event.h"

#include <stdint.h>

struct core;
struct poller;

struct poller *poller_new(struct core *c);
void poller_free(struct poller *p);
void poller_start(struct poller *p);

/* Next poll time for a request in state ev (apply policy: see store/apply.h), or -1 to stop
 * polling (terminal, or failure older than the failure tail). */
int64_t poller_next_poll(void *poller, const struct status_event *ev, int64_t now_ms);

/* Fetch one request's status now (REST miss on /intents/status/v3): budget permitting. The
 * observation is ingested; cb gets the HTTP status (0 on transport error or no budget) and
 * the raw upstream body (borrowed) so the caller can answer exactly what upstream said. */
typedef void poller_fetch_cb(void *arg, long http_status, const char *body, size_t len);
int poller_fetch_now(struct poller *p, const char *id, poller_fetch_cb *cb, void *arg);

/* The upstream websocket went down at since_ms (wall clock) or came back: repair the gap.
 * With an API key: /requests/v3 sorted by updatedAt from since; else every tracked request
 * is made due now. */
void poller_gap(struct poller *p, int64_t since_wall_ms);

#endif
