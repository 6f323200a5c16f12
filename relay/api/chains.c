/* chains.c (api) - GET /v1/chains: the upstream's chain list as the upstream sent it (its
 * GET /chains body, verbatim), from the cache every process shares ({P}:chains, refreshed by
 * relay/ingest/chains.c). Last-Modified is when it was fetched. 503 chains_unavailable (with
 * Retry-After) until a first fetch succeeded. Admin token rules as every /v1 path.
 * runs on: core thread. */
#include "relay/api/internal.h"
#include "relay/core.h"
#include "store/chain_list.h"

#include <event2/http.h>
#include <stdlib.h>
#include <time.h>

static void on_chains(void *arg, const char *err, const struct store_chain_list *cl)
{
    struct ctx *x = arg;
    if (err != NULL) {
        api_reply_unavailable(x, "cannot read");
        return;
    }
    if (cl->body == NULL) {
        if (x->req != NULL)
            evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", "5");
        api_reply_error(x, 503, "chains_unavailable", NULL,
                        "the upstream chain list has not been fetched yet (GET /chains, "
                        "within the upstream budget); retry shortly");
        return;
    }
    if (x->req != NULL && cl->has_at) {
        time_t t = (time_t)(cl->at_ms / 1000);
        struct tm tm;
        char date[64];
        if (gmtime_r(&t, &tm) != NULL &&
            strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm) > 0)
            evhttp_add_header(evhttp_request_get_output_headers(x->req), "Last-Modified", date);
    }
    api_send_body(x, 200, CT_JSON, cl->body, cl->body_len);
}

void api_h_chains(struct ctx *x)
{
    if (store_chain_list_get(x->api->c->store, on_chains, x) != 0)
        api_reply_unavailable(x, "cannot read");
}
