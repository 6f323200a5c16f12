/* attempt.c - one webhook attempt: headers and signatures, the HTTP exchange through httpc,
 * its outcome (delivered, retry after the schedule or Retry-After, dead, gone) and the AIMD
 * window, the attempt log entry, and outcomes written in batches by store/wh_done.lua. The
 * first attempts of the fan-out report to it instead (dsp_finish). See dispatch.h.
 * runs on: core thread. */
#include "relay/delivery/dispatch_internal.h"
#include "protocol/addr.h"
#include "protocol/json.h"
#include "relay/core.h"
#include "relay/config.h"
#include "relay/common/httpc.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/delivery/endpoints.h"
#include "relay/delivery/wh_view.h"
#include "store/deliveries.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- attempt log JSON ------------------------------------------------------------------ */

/* One attempt of the deliveries listing as JSON text (malloc'd; aborts when out of memory,
 * like xmalloc). Strings go through protocol/'s one escaper: invalid UTF-8 (a body cut at
 * DISPATCH_RESPONSE_KEEP mid-character, a binary response) becomes \ufffd per bad byte, so
 * the text always reads back as JSON. */
static char *attempt_json(int64_t at, int att, long status, int64_t latency, const char *err,
                          const char *detail, const char *resp, size_t resp_len, int replay)
{
    struct pjson_buf b = {0};
    PJSON_PUT_LIT(&b, "{\"at\":");
    pjson_put_i64(&b, at);
    PJSON_PUT_LIT(&b, ",\"attempt\":");
    pjson_put_i64(&b, att);
    PJSON_PUT_LIT(&b, ",\"statusCode\":");
    if (status > 0)
        pjson_put_i64(&b, status);
    else
        PJSON_PUT_LIT(&b, "null");
    PJSON_PUT_LIT(&b, ",\"latencyMs\":");
    pjson_put_i64(&b, latency);
    PJSON_PUT_LIT(&b, ",\"error\":");
    pjson_put_str(&b, err); /* NULL: null */
    if (detail) {
        PJSON_PUT_LIT(&b, ",\"detail\":");
        pjson_put_str(&b, detail);
    }
    PJSON_PUT_LIT(&b, ",\"response\":");
    if (resp && resp_len > 0)
        pjson_put_strn(&b, resp, resp_len);
    else
        PJSON_PUT_LIT(&b, "null");
    if (replay)
        PJSON_PUT_LIT(&b, ",\"replay\":true");
    PJSON_PUT_LIT(&b, "}");
    size_t cap = b.cap;
    char *json = pjson_buf_finish(&b, NULL);
    if (json == NULL) {
        log_err("out of memory", "bytes=%zu", cap);
        abort();
    }
    return json;
}

/* ---- results --------------------------------------------------------------------------- */

void dsp_push_result(struct dispatch *d, struct dispatch_attempt *a)
{
    a->next = NULL;
    if (d->res_tail)
        d->res_tail->next = a;
    else
        d->res_head = a;
    d->res_tail = a;
    d->nres++;
    event_active(d->flush_ev, EV_TIMEOUT, 0);
}

/* The outcome of a is known: to the fan-out for its first attempts, else written by
 * wh_done.lua. */
static void dsp_finish(struct dispatch *d, struct dispatch_attempt *a)
{
    if (a->wh != NULL && a->outcome != DL_OUTCOME_LOCAL) /* says nothing of the endpoint */
        dsp_ep_of(d, a->wh)->failing = a->outcome != DL_OUTCOME_OK;
    if (a->first_cb != NULL) {
        a->first_cb(a->first_arg, a->outcome, a->json, a->next_ms);
        dsp_attempt_free(a);
    } else if (a->orphan) {
        dsp_attempt_free(a);
    } else {
        dsp_push_result(d, a);
    }
}

static void on_done(void *arg, const char *err, const char *msg, const struct dl_pairs *res)
{
    struct dispatch *d = arg;
    if (dsp_callback_enter(d))
        return;
    struct dispatch_attempt *batch = d->flushing;
    d->flushing = NULL;
    if (err != NULL) {
        /* unknown whether it ran: the script is idempotent, write the batch again */
        struct dispatch_attempt *last = batch;
        size_t n = 1;
        while (last && last->next)
            last = last->next, n++;
        if (last) {
            last->next = d->res_head;
            d->res_head = batch;
            if (d->res_tail == NULL)
                d->res_tail = last;
            d->nres += n;
        }
        return; /* retried from the tick */
    }
    dsp_list_free(batch);
    wh_view_health(d->c, res); /* endpoints disabled: logged, counted, the set reloaded */
    if (d->res_head)
        dsp_flush(d);
}

void dsp_flush(struct dispatch *d)
{
    if (d->closing || d->flushing || d->res_head == NULL || !store_ready(d->c->store))
        return;
    const struct config *cfg = d->c->cfg;
    /* one batch = one partition's outcomes (the head's), in their order; the others wait */
    unsigned part = d->res_head->part;
    size_t n = 0;
    for (struct dispatch_attempt *x = d->res_head; x != NULL && n < DISPATCH_DONE_MAX;
         x = x->next)
        n += x->part == part;
    struct dl_result *res = xcalloc(n, sizeof(*res));
    size_t i = 0;
    for (struct dispatch_attempt *a = d->res_head; i < n; a = a->next) {
        if (a->part != part)
            continue;
        res[i++] = (struct dl_result){.did = a->did, .whid = a->whid, .outcome = a->outcome,
                                      .json = a->json, .next_ms = a->next_ms};
    }
    d->pending++;
    if (dl_done(d->c->store, part, wh_view_of(d->c, d->w), wall_ms(), cfg->disable_after_ms,
                WH_RETENTION_MS, res, n, on_done, d) == 0) {
        /* detach those n results as the batch in flight; the rest stay in order */
        struct dispatch_attempt **pp = &d->res_head, **bt = &d->flushing, *last = NULL;
        size_t moved = 0;
        while (*pp != NULL && moved < n) {
            struct dispatch_attempt *a = *pp;
            if (a->part != part) {
                last = a;
                pp = &a->next;
                continue;
            }
            *pp = a->next;
            a->next = NULL;
            *bt = a;
            bt = &a->next;
            moved++;
        }
        if (*pp == NULL)
            d->res_tail = last;
        d->nres -= n;
    } else {
        d->pending--;
    }
    free(res);
}

void dsp_on_flush(evutil_socket_t fd, short what, void *arg)
{
    dsp_flush(arg);
}

/* ---- outcome of one HTTP exchange ------------------------------------------------------ */

static int64_t retry_delay(const struct config *cfg, int att)
{
    if (att >= cfg->retry_schedule.n)
        return -1;
    int64_t dl = cfg->retry_schedule.ms[att];
    if (dl > 0)
        dl += (int64_t)jitter_rand((uint64_t)dl / 5 + 1);
    return dl;
}

static void aimd(struct dispatch *d, struct webhook *wh, const struct httpc_resp *resp)
{
    struct dispatch_ep *e = dsp_ep_of(d, wh);
    double max = (double)d->c->cfg->endpoint_concurrency;
    int congested = resp->err == httpc_err_timeout ||
                    (resp->err == NULL && (resp->status == 429 || resp->status == 502 ||
                                           resp->status == 503 || resp->status == 504));
    if (congested) {
        int64_t now = mono_ms();
        if (now - e->last_decrease_ms >= resp->latency_ms) {
            e->cwnd = e->cwnd / 2 < 1 ? 1 : e->cwnd / 2;
            e->last_decrease_ms = now;
        }
    } else if (resp->err == NULL && resp->status >= 200 && resp->status < 300) {
        e->cwnd += 1.0 / e->cwnd;
        if (e->cwnd > max)
            e->cwnd = max;
    }
}

/* The attempt could not even start here (out of descriptors or memory, resp->err
 * httpc_err_local): not an attempt. It goes back to its queue after a backoff shared by
 * every such failure (1 s doubling to DISPATCH_LOCAL_BACKOFF_MAX_MS, reset by any attempt
 * that reaches a server), without an attempt log entry, without using a retry of the
 * schedule and without counting against the endpoint's health. One warn line per
 * DISPATCH_LOCAL_LOG_MS at most. */
#define DISPATCH_LOCAL_BACKOFF_MS 1000
#define DISPATCH_LOCAL_BACKOFF_MAX_MS 10000
#define DISPATCH_LOCAL_LOG_MS 10000
static void local_failure(struct dispatch *d, struct dispatch_attempt *a,
                          const struct httpc_resp *resp, int64_t now)
{
    int shift = d->local_streak < 4 ? d->local_streak : 4;
    int64_t dl = (int64_t)DISPATCH_LOCAL_BACKOFF_MS << shift;
    if (dl > DISPATCH_LOCAL_BACKOFF_MAX_MS)
        dl = DISPATCH_LOCAL_BACKOFF_MAX_MS;
    d->local_streak++;
    d->c->metrics.wh_local_failures++;
    int64_t mono = mono_ms();
    if (d->local_log_ms == 0 || mono - d->local_log_ms >= DISPATCH_LOCAL_LOG_MS) {
        log_warn("webhook attempt failed locally, rescheduled without counting",
                 "delivery=%s webhook=%s detail=\"%s\" retry_ms=%lld suppressed=%llu", a->did,
                 a->whid, resp->detail ? resp->detail : "", (long long)dl,
                 (unsigned long long)d->local_suppressed);
        d->local_log_ms = mono;
        d->local_suppressed = 0;
    } else {
        d->local_suppressed++;
    }
    a->outcome = DL_OUTCOME_LOCAL;
    a->next_ms = now + dl;
    a->json = xstrdup(""); /* nothing is logged for it */
}

static void on_http_done(void *arg, const struct httpc_resp *resp)
{
    struct dispatch_attempt *a = arg;
    struct dispatch *d = a->d;
    struct webhook *wh = a->wh;
    d->inflight--;
    dsp_ep_of(d, wh)->inflight--;
    dispatch_body_unref(a->b);
    a->b = NULL;
    if (a->test_cb) {
        if (!d->closing)
            a->test_cb(a->test_arg, resp->status, resp->err, resp->latency_ms, resp->body,
                       resp->body_len, a->ev);
        else
            a->test_cb(a->test_arg, 0, httpc_err_shutdown, 0, "", 0, a->ev);
        dsp_attempt_free(a);
        dsp_maybe_free(d);
        return;
    }
    if (d->closing) {
        dsp_attempt_free(a);
        dsp_maybe_free(d);
        return;
    }
    webhook_ref(wh); /* a may be written and freed before dsp_pump() below is done with wh */
    const struct config *cfg = d->c->cfg;
    struct metrics *m = &d->c->metrics;
    int64_t now = wall_ms();
    a->next_ms = 0;
    if (resp->err == httpc_err_local) {
        local_failure(d, a, resp, now);
        dsp_finish(d, a);
        dsp_pump(d, wh);
        webhook_unref(wh);
        dispatch_kick(d);
        return;
    }
    d->local_streak = 0;
    m->wh_attempts++;
    aimd(d, a->wh, resp);
    /* a 2xx is delivered even when its (ignored) response body was too long to drain */
    if ((resp->err == NULL || resp->err == httpc_err_too_large) && resp->status >= 200 &&
        resp->status < 300) {
        a->outcome = DL_OUTCOME_OK;
        m->wh_delivered++;
        metrics_observe_delivery(m, resp->latency_ms);
    } else if (resp->err == NULL && resp->status == 410) {
        a->outcome = DL_OUTCOME_GONE;
        m->wh_dead++;
    } else if (resp->err == httpc_err_forbidden) {
        a->outcome = DL_OUTCOME_DEAD;
        m->wh_dead++;
        m->wh_forbidden++;
    } else {
        int64_t dl = retry_delay(cfg, a->att);
        if (dl < 0) {
            a->outcome = DL_OUTCOME_DEAD;
            m->wh_dead++;
        } else {
            if (resp->err == NULL && (resp->status == 429 || resp->status == 503) &&
                resp->retry_after_ms > dl)
                dl = resp->retry_after_ms < DISPATCH_RETRY_AFTER_MAX_MS
                         ? resp->retry_after_ms
                         : DISPATCH_RETRY_AFTER_MAX_MS;
            a->outcome = DL_OUTCOME_RETRY;
            a->next_ms = now + dl;
            m->wh_retries++;
        }
    }
    a->json = attempt_json(now - resp->latency_ms, a->att, resp->status,
                           resp->latency_ms, resp->err,
                           resp->err && resp->detail ? resp->detail : NULL, resp->body,
                           resp->body_len, a->replay);
    dsp_finish(d, a);
    dsp_pump(d, wh);       /* a slot is free: the next claimed attempt goes out now */
    webhook_unref(wh);
    dispatch_kick(d); /* and the queue is refilled */
}

/* ---- sending --------------------------------------------------------------------------- */

/* Header lines are built by copying, not with snprintf (~1,700 instructions a call, four
 * calls per attempt: issue 26). Each h_* buffer of struct dispatch_attempt is sized for its
 * longest line (dispatch_internal.h); the callers below stay within it. */
static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static char *put_i64(char *p, int64_t v)
{
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *p++ = '-';
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

static char *put_hex64(char *p, uint64_t v)
{
    static const char hexd[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--)
        *p++ = hexd[(v >> (4 * i)) & 0xf];
    return p;
}

static int forbid_private(void *arg, const struct sockaddr *sa, socklen_t len)
{
    return proto_addr_forbidden(sa, len);
}

/* a failed before any exchange; retry (if that is the outcome) after delay_ms. a is handed
 * on (and may be freed) here. */
void dsp_fail_now(struct dispatch *d, struct dispatch_attempt *a, const char *err,
                  enum dl_outcome outcome, int64_t delay_ms)
{
    a->outcome = outcome;
    a->next_ms = wall_ms() + delay_ms;
    a->json = attempt_json(wall_ms(), a->att, 0, 0, err, NULL, NULL, 0, a->replay);
    dsp_finish(d, a);
}

void dsp_send(struct dispatch *d, struct dispatch_attempt *a)
{
    struct webhook *wh = a->wh;
    const struct config *cfg = d->c->cfg;
    int64_t now = wall_ms(), ts = now / 1000;
    const char *hdrs[12 + WH_MAX_HEADERS + 1];
    int nh = 0;
    hdrs[nh++] = "Content-Type: application/json";
    *put_str(put_str(a->h_id, "webhook-id: "), a->ev) = '\0';
    hdrs[nh++] = a->h_id;
    *put_i64(put_str(a->h_ts, "webhook-timestamp: "), ts) = '\0';
    hdrs[nh++] = a->h_ts;
    if (wh->scheme != WH_SCHEME_UPSTREAM) {
        char s1[PROTO_SIG_MAX], s2[PROTO_SIG_MAX];
        int prev = wh->prev_secret && now < wh->prev_expires;
        int r;
        s2[0] = '\0';
        if (wh->ed25519) {
            r = proto_sw_sign_ed25519(wh->seed, a->ev, ts, a->b->p, a->b->len, s1, sizeof(s1));
            if (r == 0 && prev &&
                proto_sw_sign_ed25519(wh->prev_seed, a->ev, ts, a->b->p, a->b->len, s2,
                                      sizeof(s2)) != 0)
                s2[0] = '\0'; /* the new secret's signature alone */
        } else {
            r = proto_sw_sign(wh->hmac, a->ev, ts, a->b->p, a->b->len, s1, sizeof(s1));
            if (r == 0 && prev && wh->prev_hmac &&
                proto_sw_sign(wh->prev_hmac, a->ev, ts, a->b->p, a->b->len, s2,
                              sizeof(s2)) != 0)
                s2[0] = '\0';
        }
        if (r != 0) {
            dsp_fail_now(d, a, "signing_failed", DL_OUTCOME_DEAD, 0);
            return;
        }
        char *p = put_str(put_str(a->h_sig, "webhook-signature: "), s1);
        if (s2[0] != '\0')
            p = put_str(put_str(p, " "), s2);
        *p = '\0';
        hdrs[nh++] = a->h_sig;
    }
    if (wh->scheme != WH_SCHEME_STANDARD && wh->up_hmac) {
        char xts[24], hex[65];
        snprintf(xts, sizeof(xts), "%lld", (long long)now);
        if (proto_upstream_sign(wh->up_hmac, xts, a->b->p, a->b->len, hex) != 0) {
            dsp_fail_now(d, a, "signing_failed", DL_OUTCOME_DEAD, 0);
            return;
        }
        snprintf(a->h_xts, sizeof(a->h_xts), "X-Signature-Timestamp: %s", xts);
        snprintf(a->h_xsig, sizeof(a->h_xsig), "X-Signature-SHA256: %s", hex);
        hdrs[nh++] = a->h_xts;
        hdrs[nh++] = a->h_xsig;
    }
    /* W3C trace context: the trace is the event (its id is 128 random-looking bits), the
     * span this attempt */
    const char *hex = strncmp(a->ev, "evt_", 4) == 0 && strlen(a->ev) == 36 ? a->ev + 4 : NULL;
    uint64_t span = jitter_rand(UINT64_MAX) | 1;
    char *tp = put_str(a->h_trace, "traceparent: 00-");
    tp = put_str(tp, hex ? hex : "00000000000000000000000000000001");
    *put_str(put_hex64(put_str(tp, "-"), span), "-01") = '\0';
    hdrs[nh++] = a->h_trace;
    if (a->replay)
        hdrs[nh++] = "statusrelay-replay: 1";
    if (a->test_cb)
        hdrs[nh++] = "statusrelay-test: 1";
    for (char **p = wh->header_lines; p && *p && nh < (int)ARRAY_LEN(hdrs) - 2; p++)
        hdrs[nh++] = *p;
    hdrs[nh++] = "Expect:";
    hdrs[nh] = NULL;
    struct httpc_req req = {
        .method = "POST",
        .url = wh->target,
        .headers = hdrs,
        .body = a->b->p,
        .body_len = a->b->len,
        .connect_timeout_ms = cfg->connect_timeout_ms,
        .total_timeout_ms = cfg->delivery_timeout_ms,
        .max_response = DISPATCH_RESPONSE_KEEP,
        .max_drain = DISPATCH_DRAIN,
        .addr_check = cfg->allow_private_targets ? NULL : forbid_private,
    };
    if (httpc_request(d->c->httpc, &req, on_http_done, a) != 0) {
        if (a->test_cb) {
            a->test_cb(a->test_arg, 0, httpc_err_internal, 0, "", 0, a->ev);
            dsp_attempt_free(a);
            return;
        }
        int64_t dl = retry_delay(cfg, a->att);
        dsp_fail_now(d, a, httpc_err_internal, dl < 0 ? DL_OUTCOME_DEAD : DL_OUTCOME_RETRY,
                     dl < 0 ? 0 : dl);
        return;
    }
    d->inflight++;
    dsp_ep_of(d, wh)->inflight++;
}
