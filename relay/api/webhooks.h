/* webhooks.h - the REST handlers of webhook endpoints, deliveries and replay, called by
 * relay/api/server.c's route table through a small adapter (server.c keeps auth, body limits,
 * path matching and the request lifetime; these handlers only parse, call the delivery
 * service (relay/delivery/: endpoints.h, dispatch.h, replay.h) or Redis, and answer).
 *
 * Routes (DESIGN.md "REST API" and "Pinned details"):
 *   POST   /v1/webhooks                        API_WH_CREATE   201 endpoint + secret
 *   GET    /v1/webhooks                        API_WH_LIST     200 {"webhooks": [...]}
 *   GET    /v1/webhooks/{}                     API_WH_GET      200 endpoint (no secret)
 *   PATCH  /v1/webhooks/{}                     API_WH_PATCH    200 endpoint
 *   DELETE /v1/webhooks/{}                     API_WH_DELETE   204
 *   POST   /v1/webhooks/{}/rotate-secret       API_WH_ROTATE   200 {secret,
 *                                                              previousSecretExpiresAt}
 *   POST   /v1/webhooks/{}/reveal-secret       API_WH_REVEAL   200 {secret}
 *   POST   /v1/webhooks/{}/test                API_WH_TEST     200 {ok, statusCode, ...}
 *   GET    /v1/webhooks/{}/deliveries          API_WH_DELIVERIES 200 {deliveries, cursor}
 *   POST   /v1/replay                          API_WH_REPLAY   202 {replayId, count} / 200 {count}
 * Unknown endpoint ids are 404 "not_found" everywhere.
 * runs on: core thread. */
#ifndef RELAY_API_WEBHOOKS_H
#define RELAY_API_WEBHOOKS_H

#include <jansson.h>
#include <stddef.h>

struct core;

enum api_wh_route {
    API_WH_CREATE = 0,
    API_WH_LIST,
    API_WH_GET,
    API_WH_PATCH,
    API_WH_DELETE,
    API_WH_ROTATE,
    API_WH_REVEAL,
    API_WH_TEST,
    API_WH_DELIVERIES,
    API_WH_REPLAY,
};

/* One request as relay/api/routes.c hands it over. Everything is read during
 * api_webhooks_handle except ctx and the callbacks, which are kept until the one answer:
 * exactly one of reply_json / reply_error / reply_empty is called per request, maybe later
 * (after Redis), maybe after the client went away (relay/api/server.c then drops the answer;
 * it must keep ctx valid until the call). */
struct api_wh_req {
    void *ctx;              /* relay/api/server.c: the request context */
    struct core *c;
    const char *id;         /* the "{}" path segment (decoded), NULL when none */
    size_t id_len;
    const char *body;       /* request body, valid during the call only; NULL/0 when none */
    size_t body_len;
    const char *(*query)(void *ctx, const char *key); /* query parameter or NULL */
    void (*reply_json)(void *ctx, int code, json_t *body); /* takes body (new reference) */
    void (*reply_error)(void *ctx, int code, const char *ecode, const char *field,
                        const char *message);
    void (*reply_empty)(void *ctx, int code);
};

/* Handle one request (r is copied). */
void api_webhooks_handle(enum api_wh_route route, const struct api_wh_req *r);

#endif
