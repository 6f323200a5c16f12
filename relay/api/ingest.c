/* ingest.c (api) - POST /v1/ingest/upstream: the upstream's signed webhooks, verified and handed
 * to relay/ingest (the apply step). runs on: core thread.
 *
 * Decisions (documented in README's API section):
 *   - POST /v1/ingest/upstream answers 200 {"result": accepted|duplicate|stale|ignored} only
 *     once Redis holds the observation; "ignored" is a well-formed event type we do not handle
 *     (acknowledged so that the upstream does not retry it). */
#include "relay/api/internal.h"
#include "protocol/event.h"
#include "protocol/lifecycle.h"
#include "protocol/normalize.h"
#include "protocol/proto.h"
#include "protocol/sign.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/ingest/ingest.h"

#include <event2/http.h>
#include <jansson.h>
#include <string.h>

/* ---- POST /v1/ingest/upstream ---------------------------------------------------------------- */

enum { WI_OK = 0, WI_BAD_SIGNATURE, WI_STALE, WI_MALFORMED };

static void on_ingested(void *arg, const char *err, enum proto_verdict v,
                        const struct status_event *ev)
{
    struct ctx *x = arg;
    if (err != NULL) { /* nothing stored: the upstream retries */
        api_reply_unavailable(x, "observation not stored");
        return;
    }
    if (x->api != NULL)
        x->api->c->metrics.webhook_ingest[WI_OK]++;
    api_reply_json(x, 200, json_pack("{s:s}", "result", proto_verdict_name(v)));
}

void api_h_ingest(struct ctx *x)
{
    struct api *a = x->api;
    struct core *c = a->c;
    if (a->ingest_key == NULL) {
        api_reply_error(x, 503, "not_configured", NULL,
                        "no upstream API key is configured (STATUSRELAY_UPSTREAM_API_KEY)");
        return;
    }
    struct evkeyvalq *h = evhttp_request_get_input_headers(x->req);
    const char *ts = evhttp_find_header(h, "X-Signature-Timestamp"),
               *sig = evhttp_find_header(h, "X-Signature-SHA256");
    if (ts == NULL || sig == NULL) {
        c->metrics.webhook_ingest[WI_BAD_SIGNATURE]++;
        api_reply_error(x, 401, "bad_signature", NULL,
                        "X-Signature-Timestamp and X-Signature-SHA256 are required");
        return;
    }
    int64_t tol_s = c->cfg->ingest_tolerance_ms / 1000;
    int rc = proto_upstream_verify(a->ingest_key, ts, sig, x->body != NULL ? x->body : "",
                                   x->body_len, wall_ms(), tol_s > 0 ? tol_s : 1);
    if (rc == PROTO_ESTALE) {
        c->metrics.webhook_ingest[WI_STALE]++;
        api_reply_error(x, 401, "stale_signature", NULL,
                        "X-Signature-Timestamp is outside the accepted window of %lld s",
                        (long long)(tol_s > 0 ? tol_s : 1));
        return;
    }
    if (rc != 0) {
        c->metrics.webhook_ingest[WI_BAD_SIGNATURE]++;
        api_reply_error(x, 401, "bad_signature", NULL, "the signature does not verify");
        return;
    }
    struct status_event ev;
    struct proto_err perr;
    memset(&perr, 0, sizeof(perr));
    rc =
        proto_normalize_webhook(x->body != NULL ? x->body : "", x->body_len, wall_ms(), &ev, &perr);
    if (rc == PROTO_EEVENT) { /* well-formed, an event we do not handle: acknowledge */
        status_event_cleanup(&ev);
        c->metrics.webhook_ingest[WI_OK]++;
        api_reply_json(x, 200, json_pack("{s:s}", "result", "ignored"));
        return;
    }
    if (rc != 0) {
        status_event_cleanup(&ev);
        c->metrics.webhook_ingest[WI_MALFORMED]++;
        ingest_rejected(c->ingest, PROTO_SRC_WEBHOOK);
        api_reply_error(x, 400, "invalid_body", perr.field, "%s: %s", proto_strerror(rc),
                        perr.msg[0] != '\0' ? perr.msg : "malformed upstream webhook");
        return;
    }
    int64_t ahead = 0;
    if (ingest_refuse_future(c->ingest, &ev, &ahead)) { /* counted and logged there */
        status_event_cleanup(&ev);
        c->metrics.webhook_ingest[WI_MALFORMED]++;
        api_reply_error(x, 400, "invalid_body", "data.updatedAt",
                        "updatedAt is %lld s ahead of this relay's clock (more than "
                        "STATUSRELAY_MAX_CLOCK_SKEW, %lld s)",
                        (long long)(ahead / 1000), (long long)(c->cfg->max_clock_skew_ms / 1000));
        return;
    }
    /* takes ev's members (ev is left empty); the callback may run before it returns */
    ingest_submit_take(c->ingest, &ev, 1, on_ingested, x);
    status_event_cleanup(&ev);
}
