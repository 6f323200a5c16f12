/* compat.c (api) - the upstream-compatible read surface: GET /intents/status/v3 (and the
 * unversioned GET /intents/status, the same answer) from our cache in the upstream's own shape,
 * so that a client of the upstream (its SDK, a browser page) can point at us.
 * runs on: core thread.
 *
 * Decisions (documented in README "Upstream-compatible surface"):
 *   - Public by default (route auth AUTH_READ, server.c): no admin token needed unless
 *     STATUSRELAY_STATUS_REQUIRE_TOKEN; CORS by STATUSRELAY_CORS_ORIGINS (server.c).
 *   - The upstream's error shape {"message","errorCode"} (besides our "error" object), with the
 *     simulator's codes: no or empty requestId 400 INVALID_INPUT_PARAMETERS; an id that cannot
 *     exist (malformed) 404 REQUEST_NOT_FOUND, as the upstream answers for any id it lacks.
 *   - Cached answers are re-encoded from the stored record; a miss answers the upstream's own
 *     status and body verbatim and tracks the id unless the upstream refused it with a 4xx
 *     other than 429 - for an anonymous caller only when the upstream answered 200 (the id
 *     exists), so anonymous reads never make us track ids the upstream does not know.
 *   - A miss is an id with neither a record nor a tracking mark in Redis. An anonymous caller's
 *     misses (an admin token is set and the request lacks it) take a token from its client
 *     address's bucket (STATUSRELAY_ANON_MISS_RATE a minute, IPv6 by /64); an empty bucket is
 *     429 RATE_LIMITED with Retry-After, before any upstream call. Known ids are always
 *     answered. */
#include "relay/api/internal.h"
#include "protocol/event.h"
#include "relay/common/log.h"
#include "relay/common/rate_table.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/ingest/poller.h"
#include "relay/ingest/track.h"
#include "store/keys.h"
#include "store/store.h"

#include <arpa/inet.h>
#include <event2/http.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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
    if (x->anonymous && status != 200)
        refused = 1; /* anonymous reads track only ids the upstream knows */
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

/* The key of x's client address for the anonymous miss limit into x->peer: the IPv4 address,
 * or the /64 of an IPv6 one (one host usually holds a whole /64). The address is the one
 * server.c set (a trusted proxy's forwarded client, listen.c). */
static void peer_key(struct ctx *x)
{
    snprintf(x->peer, sizeof(x->peer), "?");
    if (x->client.family != 0)
        proto_ip_key(&x->client, x->peer, sizeof(x->peer));
}

/* r: HMGET rec trk. */
static void on_v3_cached(void *arg, const char *err, redisReply *reply)
{
    struct ctx *x = arg;
    if (err == NULL && (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2))
        err = "unexpected reply";
    if (err != NULL) {
        api_reply_unavailable(x, "cannot read");
        return;
    }
    if (x->req == NULL || x->api == NULL) { /* gone: do not spend an upstream call */
        api_ctx_free(x);
        return;
    }
    const redisReply *r = reply->element[0], *trk = reply->element[1];
    int known = r->type == REDIS_REPLY_STRING ||
                (trk->type == REDIS_REPLY_STRING && trk->len == 1 && trk->str[0] == '1');
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
    int wait =
        !known && x->anonymous ? rate_table_take(x->api->anon_misses, x->peer, mono_ms()) : 0;
    if (wait > 0) {
        char ra[16];
        snprintf(ra, sizeof(ra), "%d", wait);
        if (x->req != NULL)
            evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", ra);
        log_debug("anonymous status miss refused", "peer=%s request=%s retry_after=%d", x->peer,
                  x->id, wait);
        api_reply_error(x, 429, "rate_limited", NULL,
                        "too many reads of request ids unknown here from this address (at most "
                        "%lld a minute without the admin token); retry in %d s",
                        (long long)c->cfg->anon_miss_rate, wait);
        return;
    }
    if (c->poller == NULL || poller_fetch_now(c->poller, x->id, on_v3_fetched, x) != 0)
        api_reply_unavailable(x, "cannot ask the upstream");
}

void api_h_status_v3(struct ctx *x)
{
    x->upstream_shape = 1;
    const char *rid = api_query_get(x, "requestId");
    size_t len = rid != NULL ? strlen(rid) : 0;
    if (len == 0) { /* the upstream's own words (simulator) */
        api_reply_error(x, 400, "invalid_parameter", "requestId",
                        "querystring must have required property 'requestId'");
        return;
    }
    if (len > PROTO_MAX_ID || !proto_request_id_valid(rid, len)) { /* no such request */
        api_reply_error(x, 404, "request_not_found", "requestId", "Request not found");
        return;
    }
    memcpy(x->id, rid, len);
    x->id[len] = '\0';
    peer_key(x);
    struct core *c = x->api->c;
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag_of(c->store, x->id), "req", x->id, NULL);
    if (store_cmd(c->store, on_v3_cached, x, "HMGET %s rec trk", k) != 0)
        api_reply_unavailable(x, "cannot read");
}
