/* compat.c (api) - the upstream-compatible read surface: GET /intents/status/v3 answered from
 * our cache in the upstream's own shape, so that a client of the upstream can point at us.
 * runs on: core thread.
 *
 * Decisions (documented in README's API section):
 *   - GET /intents/status/v3 keeps the upstream's shape: cached answers are re-encoded from the
 *     stored record; a miss answers the upstream's own status and body verbatim and tracks the
 *     id unless the upstream refused it with a 4xx other than 429. Our own errors there carry
 *     the upstream's top-level {"message","errorCode"} besides "error". */
#include "relay/api/internal.h"
#include "protocol/event.h"
#include "relay/core.h"
#include "relay/ingest/poller.h"
#include "relay/ingest/track.h"
#include "store/keys.h"
#include "store/store.h"

#include <event2/http.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ---- GET /intents/status/v3?requestId= ------------------------------------------------------- */

static void on_track_quiet(void *arg, const char *err, size_t created)
{
    /* best effort: the poller and the next miss retry; nothing to answer */
}

static void on_v3_fetched(void *arg, long status, const char *body, size_t len)
{
    struct ctx *x = arg;
    /* Track unless the upstream refused the id outright (4xx other than 429). The api may be gone
     * (shutdown): then nothing more is started. */
    int refused = status >= 400 && status < 500 && status != 429;
    if (x->api != NULL && !refused) {
        const char *ids[] = {x->id};
        track_requests(x->api->c, ids, 1, NULL, on_track_quiet, NULL);
    }
    if (status == 0) {
        if (x->req != NULL)
            evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", "1");
        api_reply_error(x, 503, "upstream_unavailable", NULL,
                        "request %s is not cached and the upstream could not be asked "
                        "now (call "
                        "budget spent or transport error); retry shortly",
                        x->id);
        return;
    }
    if (status < 200 || status > 599) {
        api_reply_error(x, 502, "upstream_error", NULL, "the upstream answered HTTP %ld", status);
        return;
    }
    json_t *probe = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
    if (probe == NULL) { /* not JSON (a proxy's HTML page?): our error shape */
        api_reply_error(x, status == 200 ? 502 : (int)status, "upstream_error", NULL,
                        "the upstream answered HTTP %ld without a JSON body", status);
        return;
    }
    json_decref(probe);
    api_send_body(x, (int)status, CT_JSON, body, len);
}

static void on_v3_cached(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (err != NULL) {
        api_reply_unavailable(x, "cannot read");
        return;
    }
    if (x->req == NULL || x->api == NULL) { /* gone: do not spend an upstream call */
        api_ctx_free(x);
        return;
    }
    if (r->type == REDIS_REPLY_STRING) {
        struct status_event ev;
        status_event_init(&ev);
        if (api_decode_record(r->str, r->len, &ev, x->id) == 0) {
            size_t len;
            char *body = proto_event_status_v3(&ev, &len);
            status_event_cleanup(&ev);
            if (body == NULL) {
                api_reply_oom(x);
                return;
            }
            api_send_body(x, 200, CT_JSON, body, len);
            free(body);
            return;
        }
        status_event_cleanup(&ev); /* unreadable: ask the upstream instead */
    }
    struct core *c = x->api->c;
    if (c->poller == NULL || poller_fetch_now(c->poller, x->id, on_v3_fetched, x) != 0)
        api_reply_unavailable(x, "cannot ask the upstream");
}

void api_h_status_v3(struct ctx *x)
{
    x->upstream_shape = 1;
    const char *rid = api_query_get(x, "requestId");
    if (api_take_id(x, rid, rid != NULL ? strlen(rid) : 0, "requestId") != 0)
        return;
    struct core *c = x->api->c;
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag(c->store), "req", x->id, NULL);
    if (store_cmd(c->store, on_v3_cached, x, "HGET %s rec", k) != 0)
        api_reply_unavailable(x, "cannot read");
}
