/* server.c (api) - see server.h. The REST server on evhttp: setup and teardown, and dispatch:
 * each request is judged by admission (admit.c: route, Host, Origin, token, media type - the
 * same verdict the gate used to cap its body) and answered by that verdict, or handed to its
 * route's handler (routes.c) or the pass-through (proxy.c). The ctx's life, the replies and the
 * parsers are reply.c's. runs on: core thread.
 *
 * A connection's close (listen.c tells us through its hook) marks its requests gone: their
 * handlers' callbacks then free them without answering (internal.h).
 *
 * The handlers live by resource: health.c, requests.c, events.c, compat.c, ingest.c, webhooks.c;
 * each file's opening comment lists its decisions (documented in README's API section). */
#include "relay/api/server.h"
#include "relay/api/admit.h"
#include "relay/api/internal.h"
#include "relay/api/listen.h"
#include "relay/api/proxy.h"
#include "protocol/proto.h"
#include "protocol/rest_req.h"
#include "protocol/sign.h"
#include "relay/common/cors.h"
#include "relay/common/log.h"
#include "relay/common/rate_table.h"
#include "relay/common/util.h"
#include "relay/config.h"
#include "relay/core.h"
#include "store/store.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORS_MAX_AGE "7200"    /* preflight cache, seconds (Chromium's own cap) */
#define ANON_MISS_SLOTS 4096   /* client addresses remembered by the anonymous miss limit */

/* The connection is being freed (client gone, error, shutdown): its requests go with it
 * (listen.c's close hook, after the listener counted it closed). libevent 2.1
 * (evhttp_connection_free) calls this first, then frees the requests still queued on the
 * connection. A request a handler holds (not yet answered) is not among them when the
 * connection failed on a timeout or EOF (a client gone, the gate's close, the request deadline):
 * evhttp_connection_incoming_fail unlinks it and sets its connection to NULL, and from then on
 * nobody but us holds it - evhttp would free it only when answered (evhttp_send on a request
 * without a connection frees it). So a request with no connection is freed here; one still on
 * the connection is evhttp's to free. Either way the ctx answers nothing (x->req = NULL). */
static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct api *a = arg;
    api_proxy_conn_closed(a, evcon); /* pass-through answers still being written (proxy.c) */
    for (struct ctx *x = a->pending; x != NULL; x = x->next)
        if (x->evcon == evcon) {
            if (x->req != NULL && evhttp_request_get_connection(x->req) == NULL)
                evhttp_request_free(x->req);
            x->req = NULL;
            x->body = NULL;
            x->body_len = 0;
        }
}

/* ---- dispatch -------------------------------------------------------------------------------- */

/* Answer an OPTIONS request on a path whose CORS setting lists origins: 204 with Allow and, for
 * a preflight from an allowed origin, the Access-Control-* answer (the requested headers are
 * echoed back when they are plain header names). A preflight from another origin is 403. */
static void answer_options(struct ctx *x, const struct admit *ad)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(x->req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(x->req);
    char list[96];
    admit_allow_list(ad->allow, 1, list, sizeof(list));
    evhttp_add_header(out, "Allow", list);
    const char *rm = evhttp_find_header(in, "Access-Control-Request-Method");
    if (ad->origin == NULL || rm == NULL) { /* a plain OPTIONS, not a preflight */
        api_reply_empty(x, 204);
        return;
    }
    evhttp_add_header(out, "Vary", "Origin, Access-Control-Request-Method, "
                                   "Access-Control-Request-Headers");
    if (ad->acao == NULL) {
        api_reply_error(x, 403, "forbidden_origin", NULL, /* the origin is not echoed: any bytes */
                        "cross-origin requests from this origin are not allowed on this path");
        return;
    }
    const char *rh = evhttp_find_header(in, "Access-Control-Request-Headers");
    evhttp_add_header(out, "Access-Control-Allow-Methods", list);
    if (rh != NULL && rh[0] != '\0' && cors_headers_ok(rh))
        evhttp_add_header(out, "Access-Control-Allow-Headers", rh);
    evhttp_add_header(out, "Access-Control-Max-Age", CORS_MAX_AGE);
    api_reply_empty(x, 204);
}

/* CORS: the header goes on every answer, errors included, so that a page can read why it
 * failed (the pass-through takes them off again: its answers are the upstream's). */
static void add_cors_headers(struct ctx *x, const struct admit *ad, enum evhttp_cmd_type m)
{
    if (ad->acao == NULL)
        return;
    struct evkeyvalq *out = evhttp_request_get_output_headers(x->req);
    evhttp_add_header(out, "Access-Control-Allow-Origin", ad->acao);
    if (strcmp(ad->acao, "*") != 0 && m != EVHTTP_REQ_OPTIONS)
        evhttp_add_header(out, "Vary", "Origin");
    if (ad->read_path)
        evhttp_add_header(out, "Access-Control-Expose-Headers", "Retry-After, statusrelay-stale");
}

/* Run the route's handler on a request admitted to it: its query parsed, its body attached. */
static void run_route(struct ctx *x, const struct admit *ad)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(x->req);
    const char *query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
    if (query != NULL &&
        (strstr(query, "%00") != NULL || evhttp_parse_query_str(query, &x->query) != 0)) {
        api_reply_error(x, 400, "invalid_parameter", NULL, "the query string is malformed");
        return;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(x->req);
    size_t blen = evbuffer_get_length(in);
    if (blen > 0) {
        x->body = (const char *)evbuffer_pullup(in, -1);
        x->body_len = blen;
    }
    ad->route->fn(x);
}

/* Answer x by admission's verdict (or run its route). */
static void answer(struct ctx *x, const struct admit *ad)
{
    char list[96];
    switch (ad->verdict) {
    case ADMIT_PROXY:
        api_proxy(x); /* proxy.c: the client's own credentials, no admin token */
        return;
    case ADMIT_OPTIONS:
        answer_options(x, ad); /* preflights carry no credentials */
        return;
    case ADMIT_FORBIDDEN_HOST:
        api_reply_error(x, 403, "forbidden_host", NULL,
                        "Host %.200s is not this relay (STATUSRELAY_ALLOWED_HOSTS adds names)",
                        ad->host);
        return;
    case ADMIT_FORBIDDEN_ORIGIN:
        api_reply_error(x, 403, "forbidden_origin", NULL,
                        "requests from Origin %.200s are refused "
                        "(STATUSRELAY_ADMIN_CORS_ORIGINS lists the allowed ones)",
                        ad->origin);
        return;
    case ADMIT_UNAUTHORIZED:
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "WWW-Authenticate",
                          "Bearer realm=\"statusrelay\"");
        api_reply_error(x, 401, "unauthorized", NULL,
                        "Authorization: Bearer <admin token> required");
        return;
    case ADMIT_READ_ONLY:
        api_reply_error(x, 403, "read_only_token", NULL,
                        "the read token (STATUSRELAY_READ_TOKEN) may only GET; this request "
                        "needs the admin token");
        return;
    case ADMIT_MEDIA_TYPE:
        api_reply_error(x, 415, "unsupported_media_type", NULL,
                        "Content-Type: application/json required");
        return;
    case ADMIT_NOT_FOUND:
        api_reply_error(x, 404, "not_found", NULL, "no such endpoint");
        return;
    case ADMIT_METHOD:
        admit_allow_list(ad->allow, ad->cors_on, list, sizeof(list));
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "Allow", list);
        api_reply_error(x, 405, "method_not_allowed", NULL, "allowed: %s", list);
        return;
    case ADMIT_GO:
        run_route(x, ad);
        return;
    }
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct api *a = arg;
    struct ctx *x = api_ctx_new(a, req);
    api_listen_watch(a->lsn, x->evcon);
    api_client_addr(a, req, &x->client); /* the peer, or a trusted proxy's forwarded client */
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    x->head = m == EVHTTP_REQ_HEAD;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct admit_req q = {m, uri != NULL ? (path != NULL ? path : "") : NULL, in, &x->client};
    struct admit ad;
    admit_decide(a->rules, &q, &ad);
    x->route = ad.route;
    for (int i = 0; i < ROUTE_MAX_PARAMS; i++) { /* x takes the parameters */
        x->param[i] = ad.param[i];
        x->param_len[i] = ad.param_len[i];
        ad.param[i] = NULL;
    }
    x->upstream_shape = ad.read_path;
    x->anonymous = ad.anonymous;
    x->read_only = ad.cred == ADMIT_CRED_READ;
    add_cors_headers(x, &ad, m);
    const char *gate = evhttp_find_header(in, API_GATE_HEADER);
    if (gate != NULL && strcmp(gate, API_GATE_BUSY) == 0) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        api_reply_error(x, 503, "server_busy", NULL, /* listen.c: a head in the reserve */
                        "every connection slot is taken; the last ones are kept for the "
                        "upstream's webhooks and the admin token: retry shortly");
    } else if (gate != NULL) {
        api_reply_error(x, 413, "body_too_large", NULL, /* gate.c: declared or chunked */
                        "request bodies are limited to %d bytes (%d without the admin token)",
                        API_BODY_MAX, API_BODY_ANON_MAX);
    } else if (evbuffer_get_length(evhttp_request_get_input_buffer(req)) > API_BODY_MAX) {
        api_reply_error(x, 413, "body_too_large", NULL, "request bodies are limited to %d bytes",
                        API_BODY_MAX);
    } else {
        answer(x, &ad);
    }
    admit_cleanup(&ad);
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

struct api *api_new(struct core *c)
{
    struct api *a = xcalloc(1, sizeof(*a));
    a->c = c;
    a->http = evhttp_new(c->base);
    if (a->http == NULL) {
        log_err("evhttp_new failed", "");
        abort();
    }
    evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_max_body_size(a->http, API_BODY_MAX);  /* gate.c answers first, in JSON */
    evhttp_set_max_headers_size(a->http, PROTO_REST_HEAD_MAX);
    struct timeval idle = {(time_t)(c->cfg->http_request_timeout_ms / 1000),
                           (suseconds_t)(c->cfg->http_request_timeout_ms % 1000) * 1000};
    evhttp_set_timeout_tv(a->http, &idle); /* per read: bounds idle keep-alive connections */
    /* each connection's bufferevent is the request gate's filter (gate.c), made by the
     * listener's bufferevent callback (listen.c), which also counts the connection */
    evhttp_set_gencb(a->http, on_request, a);
    const char *key = c->cfg->upstream_api_key;
    if (key != NULL && key[0] != '\0') {
        a->ingest_key = proto_hmac_new((const unsigned char *)key, strlen(key));
        if (a->ingest_key == NULL) {
            log_err("out of memory", "what=ingest_hmac");
            abort();
        }
    }
    a->anon_misses = rate_table_new(c->cfg->anon_miss_rate, ANON_MISS_SLOTS);
    a->rules = xcalloc(1, sizeof(*a->rules));
    *a->rules = (struct admit_rules){
        .routes = api_routes,
        .nroutes = api_routes_len,
        .admin_token = c->cfg->admin_token,
        .allowed_hosts = c->cfg->allowed_hosts,
        .cors_origins = c->cfg->cors_origins,
        .admin_cors_origins = c->cfg->admin_cors_origins,
        .status_require_token = c->cfg->status_require_token,
        .passthrough = c->cfg->passthrough,
        .read_token = c->cfg->read_token,
    };
    admit_rules_keys(a->rules);
    return a;
}

int api_start(struct api *a)
{
    const char *listen = a->c->cfg->http_listen;
    char host[256];
    int port;
    if (parse_hostport(listen, host, sizeof(host), &port) != 0) {
        log_err("REST API cannot listen: bad address", "listen=%s", listen);
        return -1;
    }
    if (api_listen_start(a, host, port, on_conn_close, a) != 0) /* sets a->sock; logs why not */
        return -1;
    int tok = a->c->cfg->admin_token && a->c->cfg->admin_token[0];
    int rtok = a->c->cfg->read_token && a->c->cfg->read_token[0];
    log_info("REST API listening",
             "listen=%s max_connections=%lld auth=%s ingest=%s status_reads=%s", listen,
             (long long)a->c->cfg->http_max_connections,
             tok ? (rtok ? "token+read_token" : "token") : "none",
             a->ingest_key ? "on" : "off",
             tok && a->c->cfg->status_require_token ? "token" : "public");
    return 0;
}

void api_stop_accepting(struct api *a)
{
    if (a == NULL || a->sock == NULL)
        return;
    api_listen_stop(a->lsn);
    evhttp_del_accept_socket(a->http, a->sock);
    a->sock = NULL;
}

void api_free(struct api *a)
{
    if (a == NULL)
        return;
    /* Requests still waiting complete later (store/poller callbacks): cut them loose first,
     * evhttp_free frees their evhttp requests. */
    for (struct ctx *x = a->pending, *n; x != NULL; x = n) {
        n = x->next;
        x->req = NULL;
        x->body = NULL;
        x->api = NULL;
        x->linked = 0;
        x->prev = x->next = NULL;
    }
    a->pending = NULL;
    evhttp_free(a->http);
    api_proxy_free(a); /* after evhttp_free: its connections' closes released their answers */
    api_listen_free(a->lsn); /* after evhttp_free: its connections' closes are counted */
    proto_hmac_free(a->ingest_key);
    rate_table_free(a->anon_misses);
    free(a->rules);
    free(a);
}
