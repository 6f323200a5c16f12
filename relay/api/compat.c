/* compat.c (api) - the upstream-compatible read surface: GET /intents/status/v3 (and the
 * unversioned GET /intents/status, the same answer) in the upstream's own shape, so that a
 * client of the upstream (its SDK, a browser page) can point at us.
 * runs on: core thread.
 *
 * Decisions (documented in README "Upstream-compatible surface"):
 *   - Public by default (route auth AUTH_READ, server.c): no admin token needed unless
 *     STATUSRELAY_STATUS_REQUIRE_TOKEN; CORS by STATUSRELAY_CORS_ORIGINS (server.c).
 *   - The upstream's error shape {"message","errorCode"} (besides our "error" object), with the
 *     simulator's codes: no or empty requestId 400 INVALID_INPUT_PARAMETERS; an id that cannot
 *     exist (malformed) 404 REQUEST_NOT_FOUND, as the upstream answers for any id it lacks.
 *   - Anonymous callers (x->anonymous, decided in server.c): those who did not prove who they
 *     are - without the admin token when one is set; when none is set, a request that carries
 *     an Origin (a web page) or comes from a peer that is not loopback.
 *   - A watched id (phase active or settled: tracked, or held by a dashboard subscription or a
 *     read lease) is answered from the cache, re-encoded from the stored record: its watch
 *     keeps it current.
 *   - Fresh reads: an id with a record that no watch follows is answered from the cache only
 *     when the upstream confirmed that state within STATUSRELAY_STATUS_MAX_AGE (the hash's
 *     "cf", store/apply.lua; records older than "cf": their observation time). Otherwise the
 *     upstream is asked (poller_fetch_now: concurrent reads of one id share one call) and its
 *     200 goes out verbatim; when it cannot be asked or answers anything else (budget spent,
 *     transport error, 429, 5xx, a refusal), the stored state goes out with the header
 *     "statusrelay-stale: <ms since the upstream last confirmed it>".
 *   - Read leases: a read of an id not tracked through the API that is answered with a
 *     confirmed state (watched, fresh, or the upstream's 200) holds the id for
 *     STATUSRELAY_WS_ANON_LEASE (anon_read, like an anonymous dashboard subscription), renewed
 *     by each read: an SDK polling through us costs one watch, not one upstream call per poll.
 *     A lease is never tracking: reads stop, the watch ends.
 *   - A miss (an id with neither a record nor a tracking mark) answers the upstream's status
 *     and body verbatim (503 upstream_unavailable when it could not be asked). Only a 200
 *     leaves anything behind: an authenticated caller's miss is tracked (the REST contract),
 *     an anonymous caller's is only read-leased; a refusal, a spent budget or a transport
 *     error leave nothing.
 *   - Each upstream call for an anonymous caller (a miss, or a stale record no watch follows)
 *     takes a token from its client address's bucket (STATUSRELAY_ANON_MISS_RATE a minute,
 *     IPv6 by /64): an empty bucket answers a miss 429 RATE_LIMITED with Retry-After, before
 *     any upstream call, and a record with its stale state. The call itself comes from the
 *     anonymous reads' share of the budget, after the urgent polls (relay/ingest/poller.h). A
 *     tracked id not observed yet is asked without a token, like any known id. */
#include "relay/api/internal.h"
#include "protocol/event.h"
#include "relay/common/log.h"
#include "relay/common/rate_table.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/ingest/anon.h"
#include "relay/ingest/poller.h"
#include "relay/ingest/track.h"
#include "store/requests.h"

#include <arpa/inet.h>
#include <event2/http.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---- GET /intents/status/v3?requestId= ------------------------------------------------------- */

enum read_kind {
    READ_MISS = 1, /* neither a record nor a tracking mark */
    READ_KNOWN,    /* tracked, or a record we cannot read: asked without a miss token */
    READ_STALE,    /* a record no watch follows, not confirmed within the max age */
};

static void on_track_quiet(void *arg, const char *err, size_t created)
{
    /* best effort: the poller and the next miss retry; nothing to answer */
}

/* Answer the stored state ev in the upstream's shape; stale_ms >= 0 adds statusrelay-stale. */
static void send_state(struct ctx *x, const struct status_event *ev, int64_t stale_ms)
{
    size_t len;
    char *body = proto_event_status_v3(ev, &len);
    if (body == NULL) {
        api_reply_oom(x);
        return;
    }
    if (stale_ms >= 0 && x->req != NULL) {
        char v[24];
        snprintf(v, sizeof(v), "%lld", (long long)stale_ms);
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "statusrelay-stale", v);
    }
    api_send_body(x, 200, CT_JSON, body, len);
    free(body);
}

/* When the upstream last confirmed the stored state ev (ms): the hash's "cf", else (a record
 * written before "cf" existed) when ev was observed. */
static int64_t confirmed_at(const struct store_field *cf, const struct status_event *ev)
{
    if (cf->str != NULL && cf->len > 0 && cf->len < 20) {
        char *end;
        long long v = strtoll(cf->str, &end, 10);
        if (*end == '\0' && v > 0)
            return v;
    }
    return ev->observed_at;
}

static int64_t stale_age(int64_t confirmed, int64_t now)
{
    return now > confirmed ? now - confirmed : 0;
}

static void reply_no_upstream(struct ctx *x)
{
    if (x->req != NULL)
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", "1");
    api_reply_error(x, 503, "upstream_unavailable", NULL,
                    "request %s is not cached and the upstream could not be asked now (call "
                    "budget spent or transport error); retry shortly",
                    x->id);
}

/* r: rec and cf, read again after the upstream could not give a current state. */
static void on_stale_read(void *arg, const char *err, const struct store_request *r)
{
    struct ctx *x = arg;
    if (err != NULL || r->rec.str == NULL) {
        reply_no_upstream(x); /* Redis failed, or the record went meanwhile */
        return;
    }
    struct status_event ev;
    status_event_init(&ev);
    if (api_decode_record(r->rec.str, r->rec.len, &ev, x->id) != 0)
        reply_no_upstream(x);
    else
        send_state(x, &ev, stale_age(confirmed_at(&r->cf, &ev), wall_ms()));
    status_event_cleanup(&ev);
}

/* The upstream gave no current state for a stored record: answer the stored one, stale (read
 * again: it may have changed while the upstream was asked). */
static void answer_stored(struct ctx *x)
{
    if (x->req == NULL || x->api == NULL) { /* gone: nothing to read for */
        api_ctx_free(x);
        return;
    }
    if (store_request_get(x->api->c->store, x->id, SRF_REC | SRF_CF, on_stale_read, x) != 0)
        reply_no_upstream(x);
}

static void on_v3_fetched(void *arg, long status, const char *body, size_t len)
{
    struct ctx *x = arg;
    struct core *c = x->api != NULL ? x->api->c : NULL; /* the api may be gone (shutdown) */
    json_t *probe = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
    int json = probe != NULL;
    json_decref(probe);
    if (x->read_kind == READ_STALE) {
        if (status == 200 && json) {
            if (c != NULL)
                anon_read(c->anon, x->id); /* a read lease: renewed by the next reads */
            api_send_body(x, 200, CT_JSON, body, len);
        } else {
            answer_stored(x);
        }
        return;
    }
    /* A miss leaves something only when the upstream answered 200 (the id exists): tracked
     * for an authenticated caller, a read lease for an anonymous one. A tracked id (known)
     * is watched already. */
    if (status == 200 && json && c != NULL && x->read_kind == READ_MISS) {
        if (x->anonymous) {
            anon_read(c->anon, x->id);
        } else {
            const char *ids[] = {x->id};
            track_requests(c, ids, 1, NULL, on_track_quiet, NULL);
        }
    }
    if (status == 0) {
        reply_no_upstream(x);
        return;
    }
    if (status < 200 || status > 599) {
        api_reply_error(x, 502, "upstream_error", NULL, "the upstream answered HTTP %ld", status);
        return;
    }
    if (!json) { /* not JSON (a proxy's HTML page?): our error shape */
        api_reply_error(x, status == 200 ? 502 : (int)status, "upstream_error", NULL,
                        "the upstream answered HTTP %ld without a JSON body", status);
        return;
    }
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

/* The anonymous caller x may not ask the upstream for another id now: 429 with Retry-After. */
static void reply_rate_limited(struct ctx *x, int wait)
{
    char ra[16];
    snprintf(ra, sizeof(ra), "%d", wait);
    if (x->req != NULL)
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", ra);
    log_debug("anonymous status miss refused", "peer=%s request=%s retry_after=%d", x->peer,
              x->id, wait);
    api_reply_error(x, 429, "rate_limited", NULL,
                    "too many reads of request ids unknown here from this address (at most "
                    "%lld a minute without the admin token); retry in %d s",
                    (long long)x->api->c->cfg->anon_miss_rate, wait);
}

/* A stored record no watch follows (ev, confirmed by the upstream at conf): answered from the
 * cache when confirmed within the max age, else asked again (within the caller's miss rate). */
static void read_unwatched(struct ctx *x, const struct status_event *ev, int64_t conf,
                           int tracked)
{
    struct core *c = x->api->c;
    int64_t now = wall_ms();
    if (now - conf <= c->cfg->status_max_age_ms) {
        if (!tracked)
            anon_read(c->anon, x->id);
        send_state(x, ev, -1);
        return;
    }
    int wait = x->anonymous ? rate_table_take(x->api->anon_misses, x->peer, mono_ms()) : 0;
    x->read_kind = READ_STALE;
    if (wait == 0 && c->poller != NULL &&
        poller_fetch_now(c->poller, x->id, x->anonymous, on_v3_fetched, x) == 0)
        return;
    send_state(x, ev, stale_age(conf, now)); /* not asked: the miss rate, budget or Redis */
}

/* r: rec, trk, watch and cf. */
static void on_v3_cached(void *arg, const char *err, const struct store_request *r)
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
    int tracked = r->tracked;
    int watched = r->watch.str != NULL &&
                  (strcmp(r->watch.str, "active") == 0 || strcmp(r->watch.str, "settled") == 0);
    struct core *c = x->api->c;
    if (r->rec.str != NULL) {
        struct status_event ev;
        status_event_init(&ev);
        if (api_decode_record(r->rec.str, r->rec.len, &ev, x->id) == 0) {
            if (!watched) {
                read_unwatched(x, &ev, confirmed_at(&r->cf, &ev), tracked);
            } else {
                if (!tracked)
                    anon_read(c->anon, x->id); /* held anonymously: read-leased too */
                send_state(x, &ev, -1);
            }
            status_event_cleanup(&ev);
            return;
        }
        status_event_cleanup(&ev); /* unreadable: ask the upstream instead */
    }
    int known = r->rec.str != NULL || tracked;
    int wait =
        !known && x->anonymous ? rate_table_take(x->api->anon_misses, x->peer, mono_ms()) : 0;
    if (wait > 0) {
        reply_rate_limited(x, wait);
        return;
    }
    x->read_kind = known ? READ_KNOWN : READ_MISS;
    if (c->poller == NULL ||
        poller_fetch_now(c->poller, x->id, x->anonymous, on_v3_fetched, x) != 0)
        reply_no_upstream(x);
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
    if (store_request_get(x->api->c->store, x->id, SRF_REC | SRF_TRK | SRF_WATCH | SRF_CF,
                          on_v3_cached, x) != 0)
        api_reply_unavailable(x, "cannot read");
}
