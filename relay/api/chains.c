/* chains.c (api) - GET /v1/chains: the upstream's chain list as the upstream sent it (its
 * GET /chains body, verbatim), from the cache every process shares ({P}:chains, refreshed by
 * relay/ingest/chains.c). Last-Modified is when it was fetched. 503 chains_unavailable (with
 * Retry-After) until a first fetch succeeded. Admin token rules as every /v1 path.
 * runs on: core thread. */
#include "relay/api/internal.h"
#include "relay/core.h"
#include "store/keys.h"
#include "store/store.h"

#include <event2/http.h>
#include <stdlib.h>
#include <time.h>

static void on_chains(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        api_reply_unavailable(x, "cannot read");
        return;
    }
    const redisReply *body = r->element[0], *at = r->element[1];
    if (body->type != REDIS_REPLY_STRING) {
        if (x->req != NULL)
            evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", "5");
        api_reply_error(x, 503, "chains_unavailable", NULL,
                        "the upstream chain list has not been fetched yet (GET /chains, "
                        "within the upstream budget); retry shortly");
        return;
    }
    if (x->req != NULL && at->type == REDIS_REPLY_STRING) {
        time_t t = (time_t)(strtoll(at->str, NULL, 10) / 1000);
        struct tm tm;
        char date[64];
        if (gmtime_r(&t, &tm) != NULL &&
            strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm) > 0)
            evhttp_add_header(evhttp_request_get_output_headers(x->req), "Last-Modified", date);
    }
    api_send_body(x, 200, CT_JSON, body->str, body->len);
}

void api_h_chains(struct ctx *x)
{
    struct core *c = x->api->c;
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag(c->store), "chains", NULL, NULL);
    if (store_cmd(c->store, on_chains, x, "HMGET %s body at", k) != 0)
        api_reply_unavailable(x, "cannot read");
}
