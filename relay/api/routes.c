/* routes.c (api) - the route table: every endpoint of the REST API in one place, and the adapter
 * that lets handlers written without evhttp (webhooks.c) sit in it. server.c matches a request
 * against the table (on_request); the handlers live by resource in the other files of api/.
 * runs on: core thread. */
#include "relay/api/internal.h"
#include "relay/api/webhooks.h"
#include "relay/common/util.h"

/* The route table: {method, pattern, handler, auth, handler argument}; an endpoint is one row.
 * A request whose path matches a row but not its method is 405 with the methods that match. */
const struct route api_routes[] = {
    /* relay/api/health.c */
    {EVHTTP_REQ_GET, "/healthz", api_h_healthz, AUTH_NONE, 0},
    {EVHTTP_REQ_GET, "/readyz", api_h_readyz, AUTH_NONE, 0},
    {EVHTTP_REQ_GET, "/metrics", api_h_metrics, AUTH_TOKEN, 0},
    /* relay/api/requests.c */
    {EVHTTP_REQ_POST, "/v1/requests", api_h_track, AUTH_TOKEN, 0},
    {EVHTTP_REQ_GET, "/v1/requests", api_h_list, AUTH_TOKEN, 0},
    {EVHTTP_REQ_GET, "/v1/requests/{}", api_h_get, AUTH_TOKEN, 0},
    {EVHTTP_REQ_DELETE, "/v1/requests/{}", api_h_untrack, AUTH_TOKEN, 0},
    /* relay/api/events.c, compat.c, ingest.c */
    {EVHTTP_REQ_GET, "/v1/events", api_h_events, AUTH_TOKEN, 0},
    {EVHTTP_REQ_GET, "/intents/status/v3", api_h_status_v3, AUTH_READ, 0},
    {EVHTTP_REQ_GET, "/intents/status", api_h_status_v3, AUTH_READ, 0},
    {EVHTTP_REQ_POST, "/v1/ingest/upstream", api_h_ingest, AUTH_SIGNATURE, 0},
    {EVHTTP_REQ_GET, "/v1/chains", api_h_chains, AUTH_TOKEN, 0}, /* relay/api/chains.c */
    {EVHTTP_REQ_GET, "/v1/partitions", api_h_partitions, AUTH_TOKEN, 0}, /* partitions.c */
    {EVHTTP_REQ_POST, "/v1/backfill", api_h_backfill_post, AUTH_TOKEN, 0}, /* backfill.c */
    {EVHTTP_REQ_GET, "/v1/backfill/{}", api_h_backfill_get, AUTH_TOKEN, 0},
    /* relay/api/webhooks.c */
    {EVHTTP_REQ_POST, "/v1/webhooks", api_h_webhooks, AUTH_TOKEN, API_WH_CREATE},
    {EVHTTP_REQ_GET, "/v1/webhooks", api_h_webhooks, AUTH_TOKEN, API_WH_LIST},
    {EVHTTP_REQ_GET, "/v1/webhooks/{}", api_h_webhooks, AUTH_TOKEN, API_WH_GET},
    {EVHTTP_REQ_PATCH, "/v1/webhooks/{}", api_h_webhooks, AUTH_TOKEN, API_WH_PATCH},
    {EVHTTP_REQ_DELETE, "/v1/webhooks/{}", api_h_webhooks, AUTH_TOKEN, API_WH_DELETE},
    {EVHTTP_REQ_POST, "/v1/webhooks/{}/rotate-secret", api_h_webhooks, AUTH_TOKEN, API_WH_ROTATE},
    {EVHTTP_REQ_POST, "/v1/webhooks/{}/reveal-secret", api_h_webhooks, AUTH_TOKEN, API_WH_REVEAL},
    {EVHTTP_REQ_POST, "/v1/webhooks/{}/test", api_h_webhooks, AUTH_TOKEN, API_WH_TEST},
    {EVHTTP_REQ_GET, "/v1/webhooks/{}/deliveries", api_h_webhooks, AUTH_TOKEN, API_WH_DELIVERIES},
    {EVHTTP_REQ_POST, "/v1/replay", api_h_webhooks, AUTH_TOKEN, API_WH_REPLAY},
};

const size_t api_routes_len = ARRAY_LEN(api_routes);

/* ---- webhook endpoints, deliveries, replay: adapter to relay/api/webhooks.c ------------- */

static const char *wh_query(void *ctx, const char *key)
{
    return api_query_get(ctx, key);
}

/* The read token sees no secrets: a custom header's value (often the receiver's own
 * credential) reads "****" in each endpoint object of the answer. */
static void redact_headers(json_t *wh)
{
    json_t *h = json_object_get(wh, "headers");
    for (void *it = json_object_iter(h); it != NULL; it = json_object_iter_next(h, it))
        json_object_iter_set_new(h, it, json_string("****"));
}

static void wh_reply_json(void *ctx, int code, json_t *body)
{
    struct ctx *x = ctx;
    if (x->read_only && body != NULL) { /* GETs only: the rest is refused (admit.c) */
        json_t *list = json_object_get(body, "webhooks"), *wh;
        size_t i;
        redact_headers(body);
        json_array_foreach(list, i, wh)
            redact_headers(wh);
    }
    api_reply_json(ctx, code, body);
}

static void wh_reply_error(void *ctx, int code, const char *ecode, const char *field,
                           const char *message)
{
    api_reply_error(ctx, code, ecode, field, "%s", message);
}

static void wh_reply_empty(void *ctx, int code)
{
    api_reply_empty(ctx, code);
}

void api_h_webhooks(struct ctx *x)
{
    struct api_wh_req r = {
        .ctx = x,
        .c = x->api->c,
        .id = x->param[0],
        .id_len = x->param_len[0],
        .body = x->body,
        .body_len = x->body_len,
        .query = wh_query,
        .reply_json = wh_reply_json,
        .reply_error = wh_reply_error,
        .reply_empty = wh_reply_empty,
    };
    api_webhooks_handle((enum api_wh_route)x->route->arg, &r);
}
