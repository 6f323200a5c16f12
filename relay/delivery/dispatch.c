/* dispatch.c - see dispatch.h. runs on: core thread.
 *
 * Life of an attempt: claimed (wh_claim.lua, leased in {P}:inflight) or handed over by the
 * fan-out as a first attempt (dispatch_first) -> struct dispatch_attempt owned by the
 * dispatcher -> queued on its endpoint (struct dispatch_ep q_head) until the window has
 * room -> sent (httpc; body and signature headers built once per attempt) ->
 * result queued -> written in a batch by wh_done.lua -> freed. The dispatcher outlives its
 * store commands and HTTP requests (pending and inflight counts), so shutdown never leaves
 * a callback pointing at freed memory; results not yet written are dropped then, and their
 * leases expire (the next holder sends them again: at least once).
 * This file: claims, the per-endpoint queues and windows, first attempts, the reaper and the
 * lifecycle; attempt.c sends one attempt and records outcomes.
 * No logging per delivery: counters in struct metrics. */
#include "relay/delivery/dispatch.h"
#include "relay/delivery/dispatch_internal.h"
#include "protocol/proto.h"
#include "relay/core.h"
#include "relay/config.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/delivery/endpoints.h"
#include "relay/delivery/wh_view.h"
#include "store/deliveries.h"
#include "store/facts.h"
#include "store/ratelimit.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DISPATCH_TICK_MS 25
#define DISPATCH_REAP_MS 1000
#define DISPATCH_REAP_MAX 1000 /* deliveries returned per partition and call */
#define DISPATCH_VERSION_MS 100 /* several partitions: the endpoint set's version read */
#define DISPATCH_MAX_HELD 4096 /* attempts claimed by this process: in flight + queued */
#define DISPATCH_CLAIM_MAX 500
#define DISPATCH_CWND_START 4 /* initial AIMD window of an endpoint (capped by the setting) */
/* rate limits ("rate limits" below): rateLimit counts sends per second; a granted send goes
 * out within DISPATCH_RL_SEND_MS of asking for it (or is handed back unsent), and the shared
 * log spaces grants by the second plus that and DISPATCH_RL_JITTER_MS (network delays that
 * differ between two sends), so a receiver never counts more than rateLimit arrivals in any
 * second */
#define DISPATCH_RL_SECOND_MS 1000
#define DISPATCH_RL_SEND_MS 100
#define DISPATCH_RL_JITTER_MS 50
#define DISPATCH_RL_LOG_MS (DISPATCH_RL_SECOND_MS + DISPATCH_RL_SEND_MS + DISPATCH_RL_JITTER_MS)
#define DISPATCH_RL_ERR_MS 1000 /* a failed take: ask again after this */
#define DISPATCH_RL_LOG_EVERY_MS 10000 /* one "grant too old" line at most this often */


/* wh's state, created on first sight. */
struct dispatch_ep *dsp_ep_of(struct dispatch *d, struct webhook *wh)
{
    if (wh->dispatch_x == NULL) {
        struct dispatch_ep *e = xcalloc(1, sizeof(*e));
        /* slow start: a new endpoint earns its window (a hostile one never holds more than
         * a few connections before its timeouts halve it) */
        e->cwnd = d->c->cfg->endpoint_concurrency < DISPATCH_CWND_START
                      ? (double)d->c->cfg->endpoint_concurrency
                      : DISPATCH_CWND_START;
        wh->dispatch_x = e;
    }
    return wh->dispatch_x;
}

struct dispatch_body *dispatch_body_new(const char *s, size_t n)
{
    struct dispatch_body *b = xmalloc(sizeof(*b) + n + 1);
    b->refs = 1;
    b->len = n;
    memcpy(b->p, s, n);
    b->p[n] = '\0';
    return b;
}

void dispatch_body_unref(struct dispatch_body *b)
{
    if (b != NULL && --b->refs == 0)
        free(b);
}

const char *dispatch_body_data(const struct dispatch_body *b, size_t *len)
{
    *len = b->len;
    return b->p;
}

void dsp_attempt_free(struct dispatch_attempt *a)
{
    if (a == NULL)
        return;
    webhook_unref(a->wh);
    free(a->did);
    dispatch_body_unref(a->b);
    free(a->json);
    free(a);
}

void dsp_list_free(struct dispatch_attempt *a)
{
    while (a) {
        struct dispatch_attempt *n = a->next;
        dsp_attempt_free(a);
        a = n;
    }
}

void dsp_maybe_free(struct dispatch *d)
{
    if (d->closing && d->pending == 0 && d->inflight == 0) {
        dsp_list_free(d->res_head);
        dsp_list_free(d->flushing);
        dsp_list_free(d->held);
        free(d);
    }
}

int dsp_callback_enter(struct dispatch *d)
{
    d->pending--;
    if (!d->closing)
        return 0;
    dsp_maybe_free(d);
    return 1;
}

void dispatch_kick(struct dispatch *d)
{
    if (!d->closing)
        event_active(d->kick_ev, EV_TIMEOUT, 0);
}

/* ---- per-endpoint queues ---------------------------------------------------------------
 * A claim takes up to two windows per endpoint: one goes out at once, the other waits here
 * so that a finished exchange starts the next one without a Redis round trip. Deliveries of
 * one request to one endpoint are never claimed together (one is queued at a time, see
 * wh_fanout.lua), so the order of these queues never reorders a request's events. */

static void q_push(struct dispatch *d, struct webhook *wh, struct dispatch_attempt *a)
{
    struct dispatch_ep *e = dsp_ep_of(d, wh);
    a->next = NULL;
    if (e->q_tail)
        e->q_tail->next = a;
    else
        e->q_head = a;
    e->q_tail = a;
    e->queued++;
    d->queued++;
    if (!e->q_listed) {
        webhook_ref(wh);
        e->q_listed = 1;
        e->q_next = d->qlist;
        d->qlist = wh;
    }
}

static struct dispatch_attempt *q_pop(struct dispatch *d, struct webhook *wh)
{
    struct dispatch_ep *e = dsp_ep_of(d, wh);
    struct dispatch_attempt *a = e->q_head;
    if (a == NULL)
        return NULL;
    e->q_head = a->next;
    if (e->q_head == NULL)
        e->q_tail = NULL;
    a->next = NULL;
    e->queued--;
    d->queued--;
    return a;
}

/* Send queued attempts of wh while its window has room. An attempt is dropped instead when
 * its endpoint was deleted or disabled meanwhile, or when it waited so long that its lease
 * could run out before the exchange ends: the lease expires and wh_reap.lua queues it again
 * (at least once; never two holders at the same time). */
void dsp_pump(struct dispatch *d, struct webhook *wh)
{
    const struct config *cfg = d->c->cfg;
    /* lease > timeout (config checks it); keep a margin of up to 1 s for clock and loop */
    int64_t slack = cfg->delivery_lease_ms - cfg->delivery_timeout_ms;
    int64_t max_wait = slack - (slack / 2 < 1000 ? slack / 2 : 1000);
    int64_t now = mono_ms();
    struct dispatch_ep *e = dsp_ep_of(d, wh);
    while (e->q_head) {
        struct dispatch_attempt *a = e->q_head;
        /* a first attempt has no lease until the fan-out records it (detach) */
        int waited = !a->first_cb && !a->orphan && now - a->claimed_ms > max_wait;
        int drop = wh->deleted || !wh->enabled || waited;
        int late = a->rl_by != 0 && now > a->rl_by; /* its rate-limit grant is too old */
        if (!drop && !late && e->inflight >= (int)e->cwnd)
            break;
        q_pop(d, wh);
        if (drop && a->first_cb) {
            a->outcome = DL_OUTCOME_NONE; /* not attempted: the fan-out records it pending */
            a->first_cb(a->first_arg, DL_OUTCOME_NONE, NULL, 0);
            dsp_attempt_free(a);
        } else if (drop) {
            dsp_attempt_free(a);
        } else if (late) { /* back to its queue unsent, not an attempt (wh_done.lua "local") */
            if (d->rl_log_ms == 0 || now - d->rl_log_ms >= DISPATCH_RL_LOG_EVERY_MS) {
                log_warn("rate-limited delivery handed back unsent: its grant is too old (slow "
                         "Redis round trips or a busy process)",
                         "delivery=%s webhook=%s late_ms=%lld suppressed=%llu", a->did, a->whid,
                         (long long)(now - a->rl_by), (unsigned long long)d->rl_suppressed);
                d->rl_log_ms = now;
                d->rl_suppressed = 0;
            } else {
                d->rl_suppressed++;
            }
            a->outcome = DL_OUTCOME_LOCAL;
            a->next_ms = wall_ms();
            a->json = xstrdup("");
            dsp_push_result(d, a);
        } else {
            dsp_send(d, a);
        }
    }
}

/* Pump every endpoint with a queue and forget those whose queue is empty. */
static void sweep(struct dispatch *d)
{
    struct webhook **pp = &d->qlist;
    while (*pp) {
        struct webhook *wh = *pp;
        struct dispatch_ep *e = dsp_ep_of(d, wh);
        if (!d->closing)
            dsp_pump(d, wh);
        if (e->q_head == NULL || d->closing) {
            struct dispatch_attempt *a;
            while ((a = q_pop(d, wh)) != NULL)
                dsp_attempt_free(a); /* closing: the lease expires, the next holder sends it */
            *pp = e->q_next;
            e->q_next = NULL;
            e->q_listed = 0;
            webhook_unref(wh);
        } else {
            pp = &e->q_next;
        }
    }
}

/* Queue claimed attempts on their endpoint and start what the windows allow; attempts of
 * endpoints unknown here belong to deleted endpoints (their lease entry is reaped). */
static void start_held(struct dispatch *d)
{
    struct dispatch_attempt *a = d->held;
    d->held = NULL;
    while (a) {
        struct dispatch_attempt *next = a->next;
        a->next = NULL;
        struct webhook *wh = webhooks_find(d->w, a->whid);
        if (wh == NULL) {
            dsp_attempt_free(a);
        } else {
            webhook_ref(wh);
            a->wh = wh;
            if (a->kind == DL_CLAIM_EXPIRED) {
                dsp_fail_now(d, a, "event_expired", DL_OUTCOME_DEAD, 0);
            } else if (a->kind == DL_CLAIM_RECORD) { /* body key expired: encode from it */
                struct status_event ev;
                struct proto_err pe;
                status_event_init(&ev);
                char *body = NULL;
                size_t blen = 0;
                if (proto_event_from_record(a->b->p, a->b->len, &ev, &pe) == 0)
                    body = proto_event_webhook_body(&ev, &blen);
                status_event_cleanup(&ev);
                dispatch_body_unref(a->b);
                a->b = NULL;
                if (body == NULL) {
                    dsp_fail_now(d, a, "event_unreadable", DL_OUTCOME_DEAD, 0);
                } else {
                    a->b = dispatch_body_new(body, blen);
                    free(body);
                    q_push(d, wh, a);
                }
            } else {
                q_push(d, wh, a);
            }
        }
        a = next;
    }
    for (struct webhook *wh = d->qlist; wh; wh = dsp_ep_of(d, wh)->q_next)
        dsp_pump(d, wh);
}

static void on_held_reloaded(void *arg, const char *err)
{
    struct dispatch *d = arg;
    if (d->closing)
        return;
    d->claiming = 0;
    start_held(d);
    dispatch_kick(d);
}

/* ---- rate limits -----------------------------------------------------------------------
 * An endpoint with a rateLimit gets no first attempts from the fan-out (dispatch_first_ok):
 * all its sends are claimed, and a claim takes only as many of its deliveries as this
 * process holds grants for, no more than its window can send at once. Grants come from the
 * endpoint's log in Redis (store/ratelimit.h), shared by every process, a few at a time
 * (a quarter of the limit, at most what is due and what the window has room for): each
 * claim reports how many due deliveries it left in a limited endpoint's queue (rl_want);
 * then rl_turn takes grants, the claim it kicks uses them, and what it did not use goes
 * back at the end of the claim sweep (or once DISPATCH_RL_SEND_MS have passed). A full log
 * answers when it has room again: no take before then (no busy loop). Waiting deliveries
 * stay in Redis: they hold no slot, no lease and never block other endpoints' claims. */

/* Give wh's unused grants back. */
static void rl_give_back(struct dispatch *d, struct webhook *wh, struct dispatch_ep *e)
{
    if (e->rl_tokens > 0)
        ratelimit_give(d->c->store, wh->id, e->rl_at, e->rl_tokens);
    e->rl_tokens = 0;
    e->rl_offered = 0;
}

struct rl_take_op {
    struct dispatch *d;
    struct webhook *wh; /* a reference */
    int64_t sent_ms;    /* mono: the grant is at least this recent */
};

static void on_rl_taken(void *arg, const char *err, long granted, int64_t at, int64_t wait_ms)
{
    struct rl_take_op *op = arg;
    struct dispatch *d = op->d;
    struct webhook *wh = op->wh;
    int64_t sent = op->sent_ms;
    free(op);
    if (dsp_callback_enter(d)) {
        webhook_unref(wh);
        return;
    }
    struct dispatch_ep *e = dsp_ep_of(d, wh);
    int64_t now = mono_ms();
    e->rl_taking = 0;
    if (err != NULL) {
        e->rl_next = now + DISPATCH_RL_ERR_MS;
        if (err == store_err_server || err == ratelimit_err_reply)
            log_warn("webhook rate limit take failed", "webhook=%s err=%s", wh->id, err);
    } else {
        if (wait_ms > 0)
            e->rl_next = now + wait_ms;
        if (granted > 0 && (wh->deleted || !wh->enabled || wh->rate_limit <= 0)) {
            ratelimit_give(d->c->store, wh->id, at, granted);
        } else if (granted > 0) {
            e->rl_tokens = granted;
            e->rl_at = at;
            e->rl_use_by = sent + DISPATCH_RL_SEND_MS;
            dispatch_kick(d);
        } else {
            d->c->metrics.wh_rate_limited++;
        }
    }
    webhook_unref(wh);
}

/* Grants: give back the stale ones, take for limited endpoints with due deliveries. */
static void rl_turn(struct dispatch *d)
{
    if (d->closing || d->c->shutting_down || !store_ready(d->c->store))
        return;
    int64_t now = mono_ms();
    size_t nwh = webhooks_count(d->w);
    for (size_t i = 0; i < nwh; i++) {
        struct webhook *wh = webhooks_at(d->w, i);
        struct dispatch_ep *e = wh->dispatch_x;
        if (e == NULL)
            continue;
        if (e->rl_tokens > 0 && (wh->rate_limit <= 0 || !wh->enabled || now > e->rl_use_by))
            rl_give_back(d, wh, e);
        if (wh->rate_limit <= 0 || !wh->enabled || e->rl_taking || e->rl_tokens > 0 ||
            e->rl_want <= 0 || now < e->rl_next)
            continue;
        long room = (long)e->cwnd - e->inflight - e->queued;
        long k = (wh->rate_limit + 3) / 4;
        if (k > e->rl_want)
            k = e->rl_want;
        if (k > room)
            k = room;
        if (k <= 0)
            continue;
        struct rl_take_op *op = xcalloc(1, sizeof(*op));
        op->d = d;
        webhook_ref(wh);
        op->wh = wh;
        op->sent_ms = now;
        d->pending++;
        if (ratelimit_take(d->c->store, wh->id, wh->rate_limit, DISPATCH_RL_LOG_MS, k,
                           on_rl_taken, op) != 0) {
            d->pending--;
            webhook_unref(wh);
            free(op);
        } else {
            e->rl_taking = 1;
        }
    }
}

/* A claim's answer for the limited endpoints: grants used by what it claimed (each such
 * attempt must go out while its grant is fresh), the due deliveries it left; at the end of
 * a sweep over the partitions, grants offered and not used go back. */
static void rl_claimed(struct dispatch *d, struct dispatch_attempt *head,
                       const struct dl_claim_res *res, int sweep_done)
{
    if (!d->rl_any)
        return; /* no endpoint has a limit or holds grants: nothing to do */
    for (struct dispatch_attempt *a = head; a; a = a->next) {
        struct webhook *wh = webhooks_find(d->w, a->whid);
        if (wh == NULL || wh->dispatch_x == NULL || wh->rate_limit <= 0)
            continue;
        struct dispatch_ep *e = wh->dispatch_x;
        if (e->rl_tokens > 0)
            e->rl_tokens--;
        a->rl_by = e->rl_use_by ? e->rl_use_by : mono_ms();
    }
    for (size_t i = 0; i < res->ndue; i++) {
        struct webhook *wh = webhooks_find(d->w, res->due[i].whid);
        if (wh != NULL)
            dsp_ep_of(d, wh)->rl_seen += res->due[i].n;
    }
    if (!sweep_done)
        return;
    size_t nwh = webhooks_count(d->w);
    for (size_t i = 0; i < nwh; i++) {
        struct webhook *wh = webhooks_at(d->w, i);
        struct dispatch_ep *e = wh->dispatch_x;
        if (e == NULL)
            continue;
        e->rl_want = e->rl_seen;
        e->rl_seen = 0;
        if (e->rl_offered)
            rl_give_back(d, wh, e);
    }
    rl_turn(d);
}

static void claim(struct dispatch *d, int force);

static void claim_go(struct dispatch *d, const char *ver);

/* Body keys expired (DL_CLAIM_RECORD): the body is encoded again from the event's record,
 * with the facts version of its seq (store/facts.h), as the fan-out made it: the same bytes. */
struct rec_facts {
    struct dispatch *d;
    char ver[64];
};

static void on_record_facts(void *arg, const char *err, char **texts, size_t n)
{
    struct rec_facts *rf = arg;
    struct dispatch *d = rf->d;
    if (dsp_callback_enter(d)) {
        free(rf);
        return;
    }
    size_t i = 0;
    for (struct dispatch_attempt **pp = &d->held, *a; (a = *pp) != NULL;) {
        if (a->kind != DL_CLAIM_RECORD) {
            pp = &a->next;
            continue;
        }
        struct status_event ev;
        struct proto_err pe;
        status_event_init(&ev);
        if (proto_event_from_record(a->b->p, a->b->len, &ev, &pe) != 0) {
            pp = &a->next; /* start_held fails it: event_unreadable */
            status_event_cleanup(&ev);
            continue;
        }
        if (err != NULL || i >= n) { /* no facts to be had: the lease runs out, sent later */
            *pp = a->next;
            dsp_attempt_free(a);
            status_event_cleanup(&ev);
            continue;
        }
        ev.facts = texts[i];
        texts[i++] = NULL;
        size_t blen = 0;
        char *body = proto_event_webhook_body(&ev, &blen);
        status_event_cleanup(&ev);
        if (body != NULL) {
            dispatch_body_unref(a->b);
            a->b = dispatch_body_new(body, blen);
            a->kind = DL_CLAIM_BODY;
            free(body);
        }
        pp = &a->next;
    }
    char ver[64];
    snprintf(ver, sizeof(ver), "%s", rf->ver);
    free(rf);
    claim_go(d, ver);
}

/* Ask for the facts of the held attempts that must be encoded from their record: 0 when
 * asked (on_record_facts goes on), -1 when there are none (or the store is away: they are
 * encoded without). */
static int with_facts(struct dispatch *d, const char *ver)
{
    size_t n = 0, cap = 0;
    const char **ids = NULL;
    uint64_t *seqs = NULL;
    struct status_event *evs = NULL;
    for (struct dispatch_attempt *a = d->held; a != NULL; a = a->next) {
        if (a->kind != DL_CLAIM_RECORD)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            evs = xrealloc(evs, cap * sizeof(*evs));
        }
        struct proto_err pe;
        status_event_init(&evs[n]);
        if (proto_event_from_record(a->b->p, a->b->len, &evs[n], &pe) != 0)
            status_event_cleanup(&evs[n]);
        else
            n++;
    }
    int rc = -1;
    if (n > 0) {
        ids = xcalloc(n, sizeof(*ids));
        seqs = xcalloc(n, sizeof(*seqs));
        for (size_t i = 0; i < n; i++) {
            ids[i] = evs[i].request_id;
            seqs[i] = evs[i].seq;
        }
        struct rec_facts *rf = xcalloc(1, sizeof(*rf));
        rf->d = d;
        snprintf(rf->ver, sizeof(rf->ver), "%s", ver);
        d->pending++;
        rc = store_facts_at(d->c->store, ids, seqs, n, on_record_facts, rf);
        if (rc != 0) {
            d->pending--;
            free(rf);
        }
    }
    for (size_t i = 0; i < n; i++)
        status_event_cleanup(&evs[i]);
    free(evs);
    free(ids);
    free(seqs);
    return rc;
}

static void on_claim(void *arg, const char *err, const char *msg,
                     const struct dl_claim_res *res)
{
    struct dispatch *d = arg;
    if (dsp_callback_enter(d))
        return;
    if (err != NULL) {
        d->claiming = 0;
        if (err == store_err_server)
            log_warn("webhook claim failed", "err=\"%s\"", msg);
        return;
    }
    size_t n = res->n;
    struct dispatch_attempt *head = NULL, **tail = &head;
    struct dispatch_attempt **byidx = xcalloc(n ? n : 1, sizeof(*byidx));
    int64_t now = mono_ms();
    for (size_t i = 0; i < n; i++) {
        const struct dl_claimed *e = &res->v[i];
        struct dispatch_attempt *a = xcalloc(1, sizeof(*a));
        a->d = d;
        a->claimed_ms = now;
        a->part = d->claim_part;
        a->did = xstrdup(e->did);
        str_copy(a->whid, sizeof(a->whid), e->whid);
        str_copy(a->ev, sizeof(a->ev), e->event_id);
        a->att = e->attempt;
        a->replay = e->replay;
        a->kind = e->kind == DL_CLAIM_SAME ? DL_CLAIM_BODY : e->kind;
        if (e->kind == DL_CLAIM_SAME) { /* the same body as an earlier delivery of this claim */
            size_t at = e->same_as;
            if (at < i && byidx[at]->b != NULL) {
                a->b = byidx[at]->b;
                a->b->refs++;
            } else {
                a->kind = DL_CLAIM_EXPIRED; /* cannot happen with wh_claim.lua: fail visibly */
            }
        }
        if (a->b == NULL)
            a->b = dispatch_body_new(e->body, e->body_len);
        byidx[i] = a;
        *tail = a;
        tail = &a->next;
    }
    free(byidx);
    d->cpart = (d->claim_part + 1) % d->np; /* the next claim asks the next partition */
    rl_claimed(d, head, res, d->cpart == 0);
    *tail = d->held;
    d->held = head;
    d->claim_got += n;
    if (with_facts(d, res->version) == 0)
        return; /* claiming stays set until the facts are in (on_record_facts) */
    claim_go(d, res->version);
}

/* The claim's attempts are queued: start them (after a reload of the endpoint set when the
 * claim saw another version), then go on with the sweep. */
static void claim_go(struct dispatch *d, const char *ver)
{
    if (strcmp(ver, "*") != 0 && strcmp(ver, webhooks_version(d->w)) != 0) {
        webhooks_reload(d->w, on_held_reloaded, d); /* claiming stays set until then */
        return;
    }
    d->claiming = 0;
    start_held(d);
    if (d->cpart != 0) { /* the sweep goes on through the other partitions */
        claim(d, d->claim_force);
        return;
    }
    if (d->claim_got > 0 || d->kick_again) {
        d->kick_again = 0;
        dispatch_kick(d);
    }
}

/* Claim what the endpoints' windows (plus one window queued ahead) have free. force: claim
 * even when no enabled endpoint has room (the tick: disabled endpoints' queues are turned
 * into skipped deliveries by the claim script). */
static void claim(struct dispatch *d, int force)
{
    if (d->closing || d->c->shutting_down || !store_ready(d->c->store) ||
        strcmp(webhooks_version(d->w), "-") == 0)
        return;
    if (d->claiming) {
        d->kick_again = 1;
        return;
    }
    size_t held = d->inflight + d->queued;
    if (held >= DISPATCH_MAX_HELD)
        return;
    size_t room = DISPATCH_MAX_HELD - held;
    if (room > DISPATCH_CLAIM_MAX)
        room = DISPATCH_CLAIM_MAX;
    const struct config *cfg = d->c->cfg;
    unsigned part = d->cpart;
    size_t nwh = webhooks_count(d->w);
    long def = d->ahead * (long)cfg->endpoint_concurrency;
    struct dl_free *fr = xmalloc(sizeof(*fr) * (nwh ? nwh : 1));
    size_t nfr = 0;
    int room_somewhere = 0;
    int64_t now = mono_ms();
    d->rl_any = 0;
    for (size_t i = 0; i < nwh; i++) {
        struct webhook *wh = webhooks_at(d->w, i);
        struct dispatch_ep *e = dsp_ep_of(d, wh);
        if (part == 0)
            e->rl_seen = 0; /* a sweep starts: its claims count the due deliveries anew */
        d->rl_any |= wh->rate_limit > 0 || e->rl_tokens > 0 || e->rl_want > 0;
        if (wh->rate_limit > 0 && wh->enabled) {
            /* only what its grants cover and its window sends now (rate limits, above) */
            long f = (long)e->cwnd - e->inflight - e->queued;
            long t = now <= e->rl_use_by ? e->rl_tokens : 0;
            if (f > t)
                f = t;
            if (f > 0)
                room_somewhere = e->rl_offered = 1;
            fr[nfr++] = (struct dl_free){.whid = wh->id, .free = f > 0 ? f : 0, .limited = 1};
            continue;
        }
        long f = d->ahead * (long)e->cwnd - e->inflight - e->queued;
        if (f < 0)
            f = 0;
        /* under load, claim in half-window steps rather than after every exchange: fewer,
         * larger claims cost Redis less per delivery, and the queued window hides the wait */
        long step = (long)e->cwnd / 2;
        if (f >= (step > 1 ? step : 1) && wh->enabled)
            room_somewhere = 1;
        if (f >= def)
            continue;
        fr[nfr++] = (struct dl_free){.whid = wh->id, .free = f};
    }
    if (room_somewhere || force) {
        d->claiming = 1;
        d->claim_part = part;
        if (part == 0) { /* a sweep over the partitions starts */
            d->claim_force = force;
            d->claim_got = 0;
        }
        /* several partitions: the version is a deployment key, checked by version_probe */
        struct dl_claim_req q = {
            .part = part,
            .view = wh_view_of(d->c, d->w),
            .now_ms = wall_ms(),
            .lease_ms = cfg->delivery_lease_ms,
            .retention_ms = WH_RETENTION_MS,
            .max = room,
            .def_free = def,
            .free = fr,
            .nfree = nfr,
        };
        d->pending++;
        if (dl_claim(d->c->store, &q, on_claim, d) != 0) {
            d->pending--;
            d->claiming = 0;
        }
    }
    free(fr);
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    claim(arg, 0);
}

/* When the claims do not read the endpoint set's version (several partitions: a deployment
 * key the claim script cannot touch) the store reads it here, every DISPATCH_VERSION_MS
 * (every fourth tick), and a change reloads the set as a claim's answer does (with one
 * partition nothing is sent: store/deliveries.h dl_version_probe). Meanwhile claims leave
 * the queues of endpoints the copy does not know alone (store/wh_claim.lua). */
static void on_version(void *arg, const char *err, const char *msg, const char *ver)
{
    struct dispatch *d = arg;
    if (dsp_callback_enter(d))
        return;
    d->probing = 0;
    if (err != NULL)
        return;
    if (strcmp(ver, webhooks_version(d->w)) != 0)
        webhooks_reload(d->w, NULL, NULL);
}

static void version_probe(struct dispatch *d)
{
    if (d->probing || d->closing || !store_ready(d->c->store))
        return;
    int64_t now = mono_ms();
    if (d->probe_ms != 0 && now - d->probe_ms < DISPATCH_VERSION_MS)
        return;
    d->probe_ms = now;
    d->pending++;
    if (dl_version_probe(d->c->store, on_version, d) == 0)
        d->probing = 1;
    else /* not sent, or not needed */
        d->pending--;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct dispatch *d = arg;
    version_probe(d);
    sweep(d);
    claim(d, 1);
    dsp_flush(d);
}

static void on_reap_reply(void *arg, const char *err, const char *msg, long long n)
{
    struct dispatch *d = arg;
    if (dsp_callback_enter(d))
        return;
    d->reaping--; /* one call per partition */
    if (err == NULL && n > 0) {
        d->c->metrics.wh_leases_reaped += (uint64_t)n;
        log_info("webhook deliveries returned to the queue (lease expired)", "count=%lld", n);
        dispatch_kick(d);
    }
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    struct dispatch *d = arg;
    if (d->reaping || !store_ready(d->c->store))
        return;
    dl_disabled_flush(d->c->store); /* endpoint.disabled records a crash left queued */
    int64_t now = wall_ms();
    for (unsigned p = 0; p < d->np; p++) {
        d->pending++;
        if (dl_reap(d->c->store, p, now, DISPATCH_REAP_MAX, on_reap_reply, d) == 0)
            d->reaping++;
        else
            d->pending--;
    }
}

/* ---- first attempts for the fan-out --------------------------------------------------- */

int dispatch_first_ok(struct dispatch *d, struct webhook *wh)
{
    if (d->closing || !wh->enabled || wh->deleted || wh->latest || wh->rate_limit > 0)
        return 0; /* a rate-limited endpoint's sends are all claimed (rate limits, above) */
    struct dispatch_ep *e = dsp_ep_of(d, wh);
    return !e->failing && e->queued < 4 * (int)d->c->cfg->endpoint_concurrency;
}

/* A first attempt of delivery did to wh in partition part (it holds a reference on wh). */
static struct dispatch_attempt *first_new(struct dispatch *d, struct webhook *wh,
                                          const char *did, unsigned part)
{
    struct dispatch_attempt *a = xcalloc(1, sizeof(*a));
    a->d = d;
    webhook_ref(wh);
    a->wh = wh;
    str_copy(a->whid, sizeof(a->whid), wh->id);
    a->did = xstrdup(did);
    a->att = 1;
    a->part = part;
    a->kind = DL_CLAIM_BODY;
    return a;
}

struct dispatch_attempt *dispatch_first(struct dispatch *d, struct webhook *wh, const char *did,
                                        const char *event_id, struct dispatch_body *b,
                                        unsigned part, dispatch_first_cb *cb, void *arg)
{
    if (d->closing)
        return NULL;
    struct dispatch_attempt *a = first_new(d, wh, did, part);
    str_copy(a->ev, sizeof(a->ev), event_id);
    a->b = b;
    b->refs++;
    a->claimed_ms = mono_ms();
    a->first_cb = cb;
    a->first_arg = arg;
    q_push(d, wh, a);
    event_active(d->pump_ev, EV_TIMEOUT, 0); /* sent from the loop: cb never runs in here */
    return a;
}

void dispatch_first_detach(struct dispatch *d, struct dispatch_attempt *a)
{
    a->first_cb = NULL;
    a->first_arg = NULL;
    a->claimed_ms = mono_ms(); /* its lease starts now (the fan-out wrote it) */
}

void dispatch_first_forget(struct dispatch *d, struct dispatch_attempt *a)
{
    a->first_cb = NULL;
    a->first_arg = NULL;
    a->orphan = 1;
}

void dispatch_report(struct dispatch *d, struct webhook *wh, const char *did, unsigned part,
                     enum dl_outcome outcome, const char *json, int64_t next_ms)
{
    if (d->closing)
        return;
    struct dispatch_attempt *a = first_new(d, wh, did, part);
    a->outcome = outcome;
    a->json = xstrdup(json ? json : "{}");
    a->next_ms = next_ms;
    dsp_push_result(d, a);
}

long dispatch_rate_waiting(const struct webhook *wh)
{
    const struct dispatch_ep *e = wh->dispatch_x;
    return e != NULL && wh->rate_limit > 0 ? e->rl_want : 0;
}

static void on_pump(evutil_socket_t fd, short what, void *arg)
{
    sweep(arg);
}

/* ---- test sends ------------------------------------------------------------------------ */

int dispatch_test(struct dispatch *d, struct webhook *wh, dispatch_test_cb *cb, void *arg)
{
    if (d->closing)
        return -1;
    struct status_event ev;
    status_event_init(&ev);
    unsigned char rnd[16];
    os_random(rnd, sizeof(rnd));
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
    int64_t now = wall_ms();
    ev.request_id = xasprintf("0xtest%s", hex);
    ev.status = xstrdup("success");
    ev.st = PROTO_ST_SUCCESS;
    ev.updated_at = now;
    ev.origin_chain_id = 1;
    ev.destination_chain_id = 8453;
    ev.fail_reason = xstrdup("N/A");
    ev.refund_fail_reason = xstrdup("N/A");
    ev.source = PROTO_SRC_WS;
    ev.observed_at = now;
    ev.created_at = now;
    ev.seq = 1;
    snprintf(ev.event_id, sizeof(ev.event_id), "evt_%s", hex);
    struct dispatch_attempt *a = xcalloc(1, sizeof(*a));
    a->d = d;
    size_t blen = 0;
    char *body = proto_event_webhook_body(&ev, &blen);
    str_copy(a->ev, sizeof(a->ev), ev.event_id);
    status_event_cleanup(&ev);
    if (body == NULL) {
        free(a);
        return -1;
    }
    a->b = dispatch_body_new(body, blen);
    free(body);
    webhook_ref(wh);
    a->wh = wh;
    str_copy(a->whid, sizeof(a->whid), wh->id);
    a->att = 1;
    a->test_cb = cb;
    a->test_arg = arg;
    a->kind = DL_CLAIM_BODY;
    dsp_send(d, a); /* on failure to start, cb runs now and a is freed */
    return 0;
}

/* ---- lifecycle ------------------------------------------------------------------------- */

struct dispatch *dispatch_new(struct core *c, struct webhooks *w)
{
    struct dispatch *d = xcalloc(1, sizeof(*d));
    d->c = c;
    d->w = w;
    /* claiming a window ahead needs room in the lease for the wait: with a lease barely
     * longer than the delivery timeout a queued delivery would miss its lease under load,
     * be dropped and wait for the reaper again and again */
    d->ahead = c->cfg->delivery_lease_ms - c->cfg->delivery_timeout_ms >= 10000 ? 2 : 1;
    d->np = store_partitions(c->store);
    d->tick_ev = event_new(c->base, -1, EV_PERSIST, on_tick, d);
    d->reap_ev = event_new(c->base, -1, EV_PERSIST, on_reap, d);
    d->kick_ev = event_new(c->base, -1, 0, on_kick, d);
    d->flush_ev = event_new(c->base, -1, 0, dsp_on_flush, d);
    d->pump_ev = event_new(c->base, -1, 0, on_pump, d);
    struct timeval tt = {0, DISPATCH_TICK_MS * 1000}, rt = {DISPATCH_REAP_MS / 1000, 0};
    event_add(d->tick_ev, &tt);
    event_add(d->reap_ev, &rt);
    return d;
}

void dispatch_free(struct dispatch *d)
{
    if (d == NULL)
        return;
    d->closing = 1;
    sweep(d); /* claimed but not started: dropped, their leases expire */
    event_free(d->tick_ev);
    event_free(d->reap_ev);
    event_free(d->kick_ev);
    event_free(d->flush_ev);
    event_free(d->pump_ev);
    d->tick_ev = d->reap_ev = d->kick_ev = d->flush_ev = d->pump_ev = NULL;
    dsp_maybe_free(d);
}

int dispatch_busy(const struct dispatch *d)
{
    return d != NULL &&
           (d->inflight > 0 || d->queued > 0 || d->pending > 0 || d->res_head != NULL);
}
