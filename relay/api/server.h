/* server.h (api) - the REST API: evhttp on the core thread's event_base.
 *
 * Routes live in one table in routes.c ({method, path pattern, handler, auth}); a pattern segment
 * "{}" matches one path segment (percent-decoded) and hands it to the handler. Cross-cutting
 * rules, applied before any handler runs:
 *   - every request is judged on its head first (admit.c, asked by gate.c before evhttp reads
 *     a body): one that is refused anyway is answered without its body; bodies over
 *     API_BODY_MAX (admit.h: 1 MiB; 64 KiB, API_BODY_ANON_MAX, on the routes without the
 *     token) -> 413 with the JSON error shape, from Content-Length or the decoded chunked size; a request must arrive whole within
 *     STATUSRELAY_HTTP_REQUEST_TIMEOUT. evhttp's own limit is API_BODY_MAX too: the gate
 *     answers before it would.
 *   - with an admin token configured, every route except GET /healthz and GET /readyz needs
 *     "Authorization: Bearer <token>" (constant-time compare) -> else 401 "unauthorized".
 *     POST /v1/ingest/upstream is authenticated by its X-Signature-SHA256 instead (the upstream
 *     cannot send our token). Unknown paths need the token too (no path probing), unless the
 *     pass-through (STATUSRELAY_PASSTHROUGH, proxy.c) forwards them to the upstream. The status
 *     reads (GET /intents/status/v3, /intents/status: route auth AUTH_READ) need it only with
 *     STATUSRELAY_STATUS_REQUIRE_TOKEN; callers that did not prove who they are (no token
 *     when one is set; when none is set, an Origin or a peer beyond loopback) are
 *     "anonymous" there (compat.c).
 *   - errors are {"message","error":{"code","message"[,"field"]}} (plus the upstream's
 *     "errorCode" on the status reads); unknown path 404 "not_found", known path with another
 *     method 405 "method_not_allowed" with an Allow header.
 *   - CORS: Access-Control-Allow-Origin on every answer to an allowed Origin (status reads:
 *     STATUSRELAY_CORS_ORIGINS, default "*"; everything else: STATUSRELAY_ADMIN_CORS_ORIGINS,
 *     default none); where that setting lists origins, OPTIONS answers preflights (204, or 403
 *     "forbidden_origin" for another origin) before the token check.
 *   - every JSON answer carries Content-Type: application/json and Cache-Control: no-store.
 * Handlers that wait for Redis or the upstream keep their request in a pending list; a client
 * that disconnects first (connection close callback) or api_free marks it gone and the late
 * answer is dropped, never written to freed memory.
 * runs on: core thread. */
#ifndef RELAY_API_H
#define RELAY_API_H

struct core;
struct api;

/* Create the REST server on c->base (not yet listening). Never NULL (allocation aborts). */
struct api *api_new(struct core *c);
/* Bind c->cfg->http_listen. Returns 0, or -1 after one log line naming the address and the
 * reason (port in use, bad address). */
int api_start(struct api *a);
/* Stop accepting new connections (graceful shutdown); requests on open connections are still
 * answered. Idempotent. */
void api_stop_accepting(struct api *a);
/* Close every connection and free. Requests still waiting for Redis or the upstream are marked
 * gone: their callbacks complete later without touching the api. NULL-safe. */
void api_free(struct api *a);

#endif
