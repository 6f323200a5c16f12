/* poller.h - upstream HTTP reads: GET /intents/status/v3 per request and GET /requests/v3
 * pages (gap repair and discovery) through httpc, every call drawn from the shared budget
 * (store/poll_claim.lua: a token bucket in Redis, paced so that all processes together spend
 * at most STATUSRELAY_UPSTREAM_BUDGET in any sliding minute), most urgent first (the poll set
 * is ordered by due time). Backoff on 429/5xx/timeouts.
 * runs on: core thread. */
#ifndef RELAY_POLLER_H
#define RELAY_POLLER_H

#include "protocol/event.h"
#include "relay/common/httpc.h"

#include <stdint.h>

struct core;
struct poller;

struct poller *poller_new(struct core *c);
void poller_free(struct poller *p);
void poller_start(struct poller *p);

/* Next poll time and tier for a watched request in state ev (apply policy: see
 * store/apply.h): settled -> 's' every STATUSRELAY_SETTLED_POLL_INTERVAL; unconfirmed by the
 * upstream websocket -> 'u' every STATUSRELAY_POLL_INTERVAL; else 'a' every
 * STATUSRELAY_POLL_SAFETY_INTERVAL. Both active periods grow with the time since the
 * upstream's last change (a twentieth of it, at most the settled period). */
int64_t poller_next_poll(void *poller, const struct status_event *ev, int64_t now_ms,
                         char *tier);

/* The share of the budget anonymous status reads may use: budget / POLLER_ANON_READ_DIV calls
 * a minute (at least 1), all addresses together (store/poll_claim.lua). */
#define POLLER_ANON_READ_DIV 4
/* At most this many ids fetched at once by poller_fetch_now (beyond: -1). */
#define POLLER_MAX_FETCHES 1024

/* Fetch one request's status now (a status read of /intents/status/v3 that must ask the
 * upstream): budget permitting. The observation is ingested; cb gets the HTTP status (0 on
 * transport error or no budget) and the raw upstream body (borrowed) so the caller can answer
 * exactly what upstream said. Concurrent fetches of one id share one upstream call: each cb
 * gets the same answer. anonymous: for a caller who did not prove who it is - served after
 * the urgent polls due now and from its own share of the budget (POLLER_ANON_READ_DIV);
 * otherwise reserved ahead of the polls, like a gap page. Returns 0 (cb runs exactly once,
 * later) or -1, cb not called. */
typedef void poller_fetch_cb(void *arg, long http_status, const char *body, size_t len);
int poller_fetch_now(struct poller *p, const char *id, int anonymous, poller_fetch_cb *cb,
                     void *arg);

/* One budgeted upstream GET besides the polls (the chain list: relay/ingest/chains.c). One
 * call is reserved from the shared budget (store/poll_claim.lua, the tier of gap pages), then
 * GET <STATUSRELAY_UPSTREAM_API_URL><path> is sent with the API key header, answers of at
 * most max_response bytes. The answer counts in statusrelay_upstream_http_total{path="other"}
 * ("requests_v3" for a /requests/v3 path) and a 429/5xx/timeout pauses polling like any other call. cb gets the response (borrowed
 * for the call); when no call was made (the budget was spent, or the request could not
 * start) r->err is poller_err_not_sent. Returns 0 (cb runs exactly once, later) or -1, cb not
 * called: Redis is not ready or polling is paused after a 429/5xx (try again later). */
extern const char poller_err_not_sent[];
int poller_get(struct poller *p, const char *path, size_t max_response, httpc_done_cb *cb,
               void *arg);

/* The upstream websocket has been down (or not up since this process took the lease) for the
 * grace of relay/ingest/upstream.c: every watched request (every poll tier) becomes due now, so
 * that the budget's priorities - not the 30 s safety schedule of requests it had confirmed -
 * decide when each is polled; their next polls are fast while it stays down
 * (poller_next_poll). */
void poller_ws_lost(struct poller *p);

/* The API key as the upstream last judged it: "unknown" (no keyed call answered yet, or no
 * key), "ok", "rejected" (the last keyed answer was 401/403). For /readyz "upstreamAuth". */
enum poller_auth { POLLER_AUTH_UNKNOWN = 0, POLLER_AUTH_OK, POLLER_AUTH_REJECTED };
const char *poller_auth_name(const struct poller *p);

/* The upstream websocket was down since since_wall_ms (wall clock) and is back: repair the
 * gap. With an API key: /requests/v3 sorted by updatedAt from since; else every active
 * watched request is made due now. An upstream_gap_cb (arg: the poller). */
void poller_gap(void *poller, int64_t since_wall_ms);

#endif
