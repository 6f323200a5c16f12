/* poller.c - see poller.h. runs on: core thread.
 *
 * Every upstream HTTP call is reserved first from the paced budget (a token bucket) shared by
 * all processes, and due polls are claimed most overdue first: both through store/polls.h,
 * which owns the scripts and the partitions.
 * A claimed request is pushed a lease into the future, so a crashed process only delays it.
 * 429/5xx/timeouts pause all polling with capped exponential backoff (Retry-After wins).
 * A key the upstream refuses (401/403 to any keyed call) is reported (warn line once a minute,
 * statusrelay_upstream_auth_failures_total, /readyz "upstreamAuth") and pauses polling with its
 * own backoff (1 s doubling to a minute); while refused, each pause ends with one probe (one
 * status poll), and the first accepted call resumes full polling. */
#include "relay/ingest/poller.h"
#include "relay/core.h"
#include "relay/common/httpc.h"
#include "relay/common/idmap.h"
#include "relay/ingest/anon.h"
#include "relay/ingest/chains.h"
#include "relay/ingest/facts.h"
#include "relay/ingest/feed.h"
#include "relay/ingest/ingest.h"
#include "relay/common/log.h"
#include "relay/ingest/upstream.h"
#include "relay/common/util.h"
#include "protocol/normalize.h"
#include "store/polls.h"
#include "store/store.h"

#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 100
#define MAX_INFLIGHT 32
#define CLAIM_LEASE_MS 30000
#define MAX_GAP_PAGES 20
#define POLL_MAX_RESPONSE (4 * 1024 * 1024) /* status and /requests/v3 answers kept */
#define BACKOFF_MAX_MS 60000
#define AUTH_BACKOFF_MIN_MS 1000
#define AUTH_LOG_EVERY_MS 60000
#define BITCOIN_CHAIN_ID 8253038 /* service-assigned (upstream-protocol.md) */

enum { PATH_STATUS = 0, PATH_REQUESTS, PATH_OTHER };
enum page_kind { PAGE_GAP = 0, PAGE_READ }; /* the changes feed: relay/ingest/feed.c */

#define MAX_READS 64 /* reversals waiting for their /requests/v3 read */
#define MAX_FACT_READS 1024 /* requests waiting for their facts read (first seen, settled) */

/* poller_fetch_now: one upstream read of an id and everyone waiting for its answer. */
struct fetch_wait {
    poller_fetch_cb *cb;
    void *arg;
    struct fetch_wait *next;
};

struct fetch {
    struct poller *p;
    char id[PROTO_MAX_ID + 1];
    struct fetch_wait *waiters; /* owned */
    struct fetch *next;         /* poller.fetches */
};

struct poller {
    struct core *c;
    struct event *tick_ev;
    unsigned rounds;           /* claims of polls so far (where a claim starts: polls.h) */
    char *api;                 /* base URL without trailing slash */
    char *key_header;          /* "x-api-key: ..." or NULL */
    int inflight;
    int claiming;
    int64_t backoff_until, backoff_ms; /* mono ms */
    /* gap repair through /requests/v3 */
    int gap_active, gap_pages;
    int64_t gap_since_s;
    char *gap_cont;
    int page_inflight;
    /* one /requests/v3 read per reversal (reorg details): ids waiting for the budget */
    char *reads[MAX_READS];
    int nreads, read_claiming;
    /* one /requests/v3 read by id for the facts of a request seen elsewhere (websocket,
     * webhook, polls) when first seen and when it settles: a ring, after the reads above and
     * only while the last claim of polls found no backlog (urgent polls first) */
    char *freads[MAX_FACT_READS];
    int freads_head, nfreads;
    struct idmap *fread_at;    /* id -> its index in freads (every non-NULL slot): O(1) */
    int polls_backlog;
    size_t claim_max;          /* the max of the claim in flight */
    /* the API key as the upstream last judged it (poller_auth_name) */
    enum poller_auth auth;
    int64_t auth_backoff_ms;
    int64_t auth_logged_at;    /* mono ms of the last warn line, 0 = none yet */
    uint64_t auth_unlogged;    /* refusals since that line */
    /* poller_fetch_now: the ids being fetched (owned; a fetch leaves when answered) */
    struct fetch *fetches;
    int nfetches;
};

struct poll_op {
    struct poller *p;
    char id[PROTO_MAX_ID + 1];
    int was_confirmed;
    poller_fetch_cb *cb;       /* poller_fetch_now */
    void *arg;
    enum page_kind kind;       /* pages */
    int64_t max_updated_s;
};

static int http_class(const struct httpc_resp *r)
{
    if (r->err)
        return 5;
    if (r->status == 429)
        return 3;
    return r->status >= 500 ? 4 : r->status >= 400 ? 2 : r->status >= 300 ? 1 : 0;
}

static const char *const path_names[] = {"status_v3", "requests_v3", "other"};

static int auth_refused(const struct httpc_resp *r)
{
    return r->err == NULL && (r->status == 401 || r->status == 403);
}

/* The upstream's judgement of the key: 401/403 refuse it (counted, a warn line once a minute,
 * polling paused with its own backoff); any other answer but 429/5xx accepts it. Calls without
 * a key tell nothing. */
static void note_auth(struct poller *p, int path, const struct httpc_resp *r)
{
    if (p->key_header == NULL || r->err != NULL || r->status == 429 || r->status >= 500)
        return;
    int64_t now = mono_ms();
    if (!auth_refused(r)) {
        if (p->auth == POLLER_AUTH_REJECTED)
            log_info("upstream API key accepted again", "status=%ld path=%s", r->status,
                     path_names[path]);
        p->auth = POLLER_AUTH_OK;
        p->auth_backoff_ms = 0;
        return;
    }
    p->c->metrics.upstream_auth_failures++;
    p->auth = POLLER_AUTH_REJECTED;
    p->auth_unlogged++;
    if (now >= p->backoff_until) { /* one escalation per pause */
        p->auth_backoff_ms = p->auth_backoff_ms ? p->auth_backoff_ms * 2 : AUTH_BACKOFF_MIN_MS;
        if (p->auth_backoff_ms > BACKOFF_MAX_MS)
            p->auth_backoff_ms = BACKOFF_MAX_MS;
        p->backoff_until = now + p->auth_backoff_ms;
    }
    if (p->auth_logged_at == 0 || now - p->auth_logged_at >= AUTH_LOG_EVERY_MS) {
        log_warn("upstream API key rejected: check STATUSRELAY_UPSTREAM_API_KEY; polling paused",
                 "status=%ld path=%s refusals=%llu pause_ms=%lld", r->status, path_names[path],
                 (unsigned long long)p->auth_unlogged, (long long)p->auth_backoff_ms);
        p->auth_logged_at = now;
        p->auth_unlogged = 0;
    }
}

static void count_http(struct poller *p, int path, const struct httpc_resp *r)
{
    p->c->metrics.upstream_http[path][http_class(r)]++;
    note_auth(p, path, r);
}

const char *poller_auth_name(const struct poller *p)
{
    if (p == NULL)
        return "unknown";
    return p->auth == POLLER_AUTH_OK ? "ok" : p->auth == POLLER_AUTH_REJECTED ? "rejected"
                                                                               : "unknown";
}

static int retryable(const struct httpc_resp *r)
{
    return r->err != NULL || r->status == 429 || r->status >= 500;
}

/* Pause every poll after a 429/5xx/timeout; a good answer resets the backoff. */
static void note_result(struct poller *p, const struct httpc_resp *r)
{
    if (!retryable(r)) {
        p->backoff_ms = 0;
        return;
    }
    if (mono_ms() < p->backoff_until)
        return; /* answers of calls started before the pause: one escalation per pause */
    p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : 500;
    if (p->backoff_ms > BACKOFF_MAX_MS)
        p->backoff_ms = BACKOFF_MAX_MS;
    int64_t d = p->backoff_ms / 2 + (int64_t)jitter_rand((uint64_t)p->backoff_ms / 2 + 1);
    if (r->retry_after_ms > d)
        d = r->retry_after_ms > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->retry_after_ms;
    p->backoff_until = mono_ms() + d;
    log_warn("upstream busy, polling paused", "status=%ld err=%s pause_ms=%lld", r->status,
             r->err ? r->err : "none", (long long)d);
}

/* Set the next poll of a watched request (store/poll_set.lua: a request whose watch ended
 * meanwhile stays unpolled). tier 0 keeps the request's tier. */
static void reschedule(struct poller *p, const char *id, char tier, int64_t at)
{
    polls_set(p->c->store, id, tier, at);
}

/* The poll period of a request unchanged for idle ms: the base period, growing with the
 * idle time (a twentieth of it) up to the settled poll period, so that a pile of old idle
 * requests cannot starve fresh ones. */
static int64_t backed_off(const struct config *cfg, int64_t base, int64_t idle)
{
    int64_t cap = cfg->settled_poll_interval_ms > base ? cfg->settled_poll_interval_ms : base;
    int64_t v = idle > 0 ? idle / 20 : 0;
    return v < base ? base : v > cap ? cap : v;
}

int64_t poller_next_poll(void *arg, const struct status_event *ev, int64_t now_ms, char *tier)
{
    struct poller *p = arg;
    const struct config *cfg = p->c->cfg;
    if (proto_status_settled(ev->st)) {
        *tier = 's';
        return now_ms + cfg->settled_poll_interval_ms;
    }
    int fast = p->c->upstream == NULL || !upstream_confirmed(p->c->upstream, ev->request_id);
    int64_t idle = ev->updated_at > 0 ? now_ms - ev->updated_at : 0;
    *tier = fast ? 'u' : 'a';
    return now_ms +
           backed_off(cfg, fast ? cfg->poll_interval_ms : cfg->poll_safety_interval_ms, idle);
}

/* ---- one status poll --------------------------------------------------------------------- */

static void on_poll_ingested(void *arg, const char *err, enum proto_verdict v,
                             const struct status_event *ev)
{
    struct poll_op *op = arg;
    /* accepted: apply.lua already set the next poll; otherwise it is ours to set */
    if (err != NULL)
        reschedule(op->p, op->id, 0, wall_ms() + op->p->c->cfg->poll_interval_ms);
    /* lagging: the poll found a status change the websocket never sent. The first
     * observation of a request is no such sign (the upstream sends no state on subscribe),
     * nor is an enrichment the websocket does not carry (quoteCreatedAt, ...). */
    if (err == NULL && v == PROTO_ACCEPT && op->was_confirmed && op->p->c->upstream &&
        ev->prev_status != NULL && strcmp(ev->prev_status, ev->status) != 0)
        upstream_lagging(op->p->c->upstream);
    free(op);
}

static void on_poll_done(void *arg, const struct httpc_resp *r)
{
    struct poll_op *op = arg;
    struct poller *p = op->p;
    p->inflight--;
    count_http(p, PATH_STATUS, r);
    note_result(p, r);
    if (op->cb)
        op->cb(op->arg, r->err ? 0 : r->status, r->body, r->body_len);
    int64_t now = wall_ms();
    if (r->err == NULL && r->status == 200) {
        struct status_event ev;
        struct proto_err perr;
        int rc = proto_normalize_status_v3(r->body, r->body_len, op->id, now, &ev, &perr);
        if (rc == 0) {
            char tier;
            int64_t next = poller_next_poll(p, &ev, now, &tier);
            reschedule(p, op->id, tier, next); /* provisional; an accepted event resets it */
            ingest_submit(p->c->ingest, &ev, 0, on_poll_ingested, op);
            status_event_cleanup(&ev);
            return;
        }
        status_event_cleanup(&ev);
        ingest_rejected(p->c->ingest, PROTO_SRC_POLL);
        log_warn("upstream status rejected", "request=%s err=%s field=%s", op->id,
                 proto_strerror(rc), perr.field);
        reschedule(p, op->id, 0, now + p->c->cfg->poll_safety_interval_ms);
    } else if (retryable(r)) {
        reschedule(p, op->id, 0, now + (p->backoff_ms > 1000 ? p->backoff_ms : 1000));
    } else if (auth_refused(r) && p->key_header != NULL) {
        /* the key, not the id: due again when the pause ends (note_auth) */
        reschedule(p, op->id, 0, now + p->auth_backoff_ms);
    } else {
        /* 4xx other than 429: the upstream does not know the id (yet), or refuses it */
        log_debug("upstream status call refused", "request=%s status=%ld body=\"%.120s\"", op->id,
                 r->status, r->body);
        reschedule(p, op->id, 0, now + p->c->cfg->poll_safety_interval_ms);
        if (r->status == 404)
            anon_upstream_404(p->c->anon, op->id); /* an anonymous watch ends after a few */
    }
    free(op);
}

/* One upstream GET within the budget (counted here). */
static int start_get(struct poller *p, const char *url, size_t max_response, httpc_done_cb *cb,
                     void *arg)
{
    const char *headers[] = {"accept: application/json", p->key_header, NULL};
    struct httpc_req req = {
        .method = "GET",
        .url = url,
        .headers = headers,
        .connect_timeout_ms = 5000,
        .total_timeout_ms = 10000,
        .max_response = max_response,
    };
    p->c->metrics.budget_used++;
    return httpc_request(p->c->httpc, &req, cb, arg);
}

static void poll_one(struct poller *p, const char *id, poller_fetch_cb *cb, void *arg)
{
    struct poll_op *op = xcalloc(1, sizeof(*op));
    op->p = p;
    snprintf(op->id, sizeof(op->id), "%s", id);
    op->cb = cb;
    op->arg = arg;
    op->was_confirmed = p->c->upstream && upstream_confirmed(p->c->upstream, id);
    char url[2048];
    snprintf(url, sizeof(url), "%s/intents/status/v3?requestId=%s", p->api, id);
    p->inflight++;
    if (start_get(p, url, POLL_MAX_RESPONSE, on_poll_done, op) != 0) {
        p->inflight--;
        if (cb)
            cb(arg, 0, "", 0);
        free(op);
    }
}

/* ---- /requests/v3 pages: gap repair and discovery ------------------------------------------ */

static void facts_read_drop(struct poller *p, const char *id);

static void on_page_item(void *arg, int rc, struct status_event *ev, const struct proto_err *e,
                         const char *facts, size_t facts_len)
{
    struct poll_op *op = arg;
    struct poller *p = op->p;
    if (rc != 0) {
        ingest_rejected(p->c->ingest, PROTO_SRC_REQUESTS);
        return;
    }
    if (ev->updated_at / 1000 > op->max_updated_s)
        op->max_updated_s = ev->updated_at / 1000;
    if (facts != NULL)
        facts_read_drop(p, ev->request_id); /* this item brings them */
    if (op->kind == PAGE_READ) {
        facts_submit(p->c, ev, 0, facts, facts_len); /* reorg details, facts: enrichments */
    } else if (p->c->upstream && upstream_tracked(p->c->upstream, ev->request_id)) {
        facts_submit(p->c, ev, 0, facts, facts_len); /* stale/duplicates are dropped */
    }
}

static void gap_fallback_all(struct poller *p);

/* The answer of a reversal's /requests/v3 read: its item is ingested like any other. */
static void on_read_done(struct poll_op *op, const struct httpc_resp *r)
{
    struct poller *p = op->p;
    count_http(p, PATH_REQUESTS, r);
    note_result(p, r);
    if (r->err == NULL && r->status == 200) {
        char *next = NULL;
        struct proto_err perr;
        int rc = proto_normalize_requests_page_facts(r->body, r->body_len, wall_ms(),
                                                     chains_explorers(p->c->chains),
                                                     on_page_item, op, &next, &perr);
        free(next);
        if (rc != 0)
            log_warn("upstream request read rejected", "request=%s err=%s field=%s", op->id,
                     proto_strerror(rc), perr.field);
    } else {
        log_warn("upstream request read failed", "request=%s status=%ld err=%s", op->id,
                 r->status, r->err ? r->err : "none");
    }
    free(op);
}

static void on_page_done(void *arg, const struct httpc_resp *r)
{
    struct poll_op *op = arg;
    struct poller *p = op->p;
    if (op->kind == PAGE_READ) {
        on_read_done(op, r);
        return;
    }
    p->page_inflight = 0;
    count_http(p, PATH_REQUESTS, r);
    note_result(p, r);
    char **cont = &p->gap_cont;
    if (r->err == NULL && r->status == 200) {
        char *next = NULL;
        struct proto_err perr;
        int rc = proto_normalize_requests_page_facts(r->body, r->body_len, wall_ms(),
                                                     chains_explorers(p->c->chains),
                                                     on_page_item, op, &next, &perr);
        free(*cont);
        *cont = rc == 0 ? next : NULL;
        if (rc != 0) {
            free(next);
            log_warn("upstream requests page rejected", "err=%s field=%s", proto_strerror(rc),
                     perr.field);
        }
        {
            if (*cont == NULL || rc != 0) {
                log_info("gap repaired from /requests/v3", "pages=%d", p->gap_pages);
                p->gap_active = 0;
                if (rc != 0)
                    gap_fallback_all(p);
            } else if (++p->gap_pages >= MAX_GAP_PAGES) {
                p->gap_active = 0;
                free(*cont);
                *cont = NULL;
                gap_fallback_all(p);
            }
        }
    } else if (!retryable(r)) {
        log_warn("upstream requests call refused", "status=%ld body=\"%.120s\"", r->status,
                 r->body);
        p->gap_active = 0;
        gap_fallback_all(p);
    }
    free(op);
}

static void fetch_page(struct poller *p, enum page_kind kind)
{
    struct poll_op *op = xcalloc(1, sizeof(*op));
    op->p = p;
    op->kind = kind;
    const char *cont = p->gap_cont;
    int64_t since = p->gap_since_s;
    char url[4096];
    int n = snprintf(url, sizeof(url),
                     "%s/requests/v3?sortBy=updatedAt&sortDirection=asc&limit=50"
                     "&startTimestamp=%lld",
                     p->api, (long long)since);
    if (cont) {
        char *esc = url_escape(cont);
        snprintf(url + n, sizeof(url) - (size_t)n, "&continuation=%s", esc);
        free(esc);
    }
    p->page_inflight = 1;
    if (start_get(p, url, POLL_MAX_RESPONSE, on_page_done, op) != 0) {
        p->page_inflight = 0;
        free(op);
    }
}

static void gap_fallback_all(struct poller *p)
{
    polls_due_now(p->c->store, POLLS_TIERS_ACTIVE);
}

void poller_ws_lost(struct poller *p)
{
    polls_due_now(p->c->store, POLLS_TIERS_ALL);
}

void poller_gap(void *poller, int64_t since_wall_ms)
{
    struct poller *p = poller;
    if (p->key_header == NULL) {
        gap_fallback_all(p);
        return;
    }
    int64_t since = since_wall_ms / 1000 - 5; /* margin for clock skew; dedupe absorbs it */
    if (!p->gap_active || since < p->gap_since_s)
        p->gap_since_s = since;
    free(p->gap_cont);
    p->gap_cont = NULL;
    p->gap_pages = 0;
    p->gap_active = 1;
}

static void read_request(struct poller *p, const char *id)
{
    struct poll_op *op = xcalloc(1, sizeof(*op));
    op->p = p;
    op->kind = PAGE_READ;
    snprintf(op->id, sizeof(op->id), "%s", id);
    char *esc = url_escape(id);
    char url[2048];
    snprintf(url, sizeof(url), "%s/requests/v3?id=%s&limit=1", p->api, esc);
    free(esc);
    if (start_get(p, url, POLL_MAX_RESPONSE, on_page_done, op) != 0)
        free(op);
}

/* Does an accepted event need one /requests/v3 read (what only that API says)? A reversal
 * (reorg details: inTxs[].status, metadata.reorg); a change to failure with DEPOSIT_REORGED out
 * of any status (the same details; DESIGN "More upstream rules"); a change to pending of a
 * Bitcoin-origin request (the mempool flag, PROTO_F_UNCONFIRMED_DEPOSIT). Not for what
 * /requests/v3 itself said, nor when its answer is known already. */
static const char *read_reason(const struct status_event *ev)
{
    if (ev->flags & PROTO_F_REVERSAL)
        return "reversal";
    if (ev->source == PROTO_SRC_REQUESTS ||
        (ev->prev_status != NULL && strcmp(ev->prev_status, ev->status) == 0))
        return NULL;
    if (ev->st == PROTO_ST_FAILURE && ev->reorg == NULL && ev->fail_reason != NULL &&
        strcmp(ev->fail_reason, "DEPOSIT_REORGED") == 0)
        return "reorg";
    if (ev->st == PROTO_ST_PENDING && ev->origin_chain_id == BITCOIN_CHAIN_ID &&
        !(ev->flags & PROTO_F_UNCONFIRMED_DEPOSIT))
        return "bitcoin_pending";
    return NULL;
}

/* Does an accepted event call for a facts read (DESIGN "Request facts": one read by id when
 * a request is first seen and one when it settles)? Not for what /requests/v3 said (its
 * item carried the facts). */
static int facts_read_wanted(const struct status_event *ev)
{
    if (ev->source == PROTO_SRC_REQUESTS)
        return 0;
    if (ev->prev_status == NULL)
        return 1; /* first seen */
    return proto_status_settled(ev->st) &&
           !proto_status_settled(proto_status_parse(ev->prev_status));
}

/* The slot of id in the facts read ring, or NULL. Slots of reads made unnecessary are NULL
 * (skipped when popped). A lookup in fread_at, not a scan: with an API key every first-seen
 * request queues a read, the ring is full under load and a scan of 1,024 ids per accepted
 * event cost ~12,000 instructions (issue 26). */
static char **facts_read_find(struct poller *p, const char *id)
{
    uint32_t at;
    if (p->fread_at == NULL || !idmap_get(p->fread_at, id, &at) || at >= MAX_FACT_READS)
        return NULL;
    char **slot = &p->freads[at];
    return *slot != NULL && strcmp(*slot, id) == 0 ? slot : NULL;
}

/* Take the id out of its slot (the caller frees or uses the returned string). */
static char *facts_read_take(struct poller *p, char **slot)
{
    char *id = *slot;
    *slot = NULL;
    if (id != NULL)
        idmap_del(p->fread_at, id);
    return id;
}

/* A /requests/v3 answer for id is here or on its way (a page item, a reversal read): its
 * waiting facts read would say the same again. */
static void facts_read_drop(struct poller *p, const char *id)
{
    char **slot = facts_read_find(p, id);
    if (slot != NULL)
        free(facts_read_take(p, slot));
    while (p->nfreads > 0 && p->freads[p->freads_head] == NULL) { /* no empty reads at the head */
        p->freads_head = (p->freads_head + 1) % MAX_FACT_READS;
        p->nfreads--;
    }
}

/* Queue id's facts read once (dropped, counted in the log, when the ring is full: the facts
 * then come with the next read, page or settle). Not when a reversal read of id waits. */
static void queue_facts_read(struct poller *p, const char *id)
{
    if (facts_read_find(p, id) != NULL)
        return;
    for (int i = 0; i < p->nreads; i++)
        if (strcmp(p->reads[i], id) == 0)
            return;
    if (p->nfreads == MAX_FACT_READS) {
        log_debug("facts read skipped: too many waiting", "request=%s", id);
        return;
    }
    int at = (p->freads_head + p->nfreads++) % MAX_FACT_READS;
    p->freads[at] = xstrdup(id);
    idmap_put(p->fread_at, id, (uint32_t)at);
}

/* An accepted event that needs its /requests/v3 read (read_reason, with an API key): queued
 * once per request until the budget grants it (on_tick). */
static void on_event(void *arg, enum proto_verdict v, const struct status_event *ev,
                     const char *stream_id)
{
    struct poller *p = arg;
    if (p->key_header != NULL && facts_read_wanted(ev))
        queue_facts_read(p, ev->request_id);
    const char *why = p->key_header != NULL ? read_reason(ev) : NULL;
    if (why == NULL)
        return;
    for (int i = 0; i < p->nreads; i++)
        if (strcmp(p->reads[i], ev->request_id) == 0)
            return;
    if (p->nreads == MAX_READS) {
        log_warn("request read skipped: too many waiting", "request=%s reason=%s",
                 ev->request_id, why);
        return;
    }
    p->reads[p->nreads++] = xstrdup(ev->request_id);
    facts_read_drop(p, ev->request_id); /* the same read brings the facts */
}

/* ---- claims ------------------------------------------------------------------------------- */

struct claim_op {
    struct poller *p;
    enum { CLAIM_PAGE, CLAIM_FETCH, CLAIM_READ, CLAIM_GET } what;
    enum page_kind kind;
    char id[PROTO_MAX_ID + 1];
    poller_fetch_cb *cb;
    void *arg;
    int anon; /* CLAIM_FETCH: an anonymous status read (its share of the budget) */
    /* CLAIM_GET: poller_get */
    char *path;
    size_t max_response;
    httpc_done_cb *get_cb;
};

/* ---- poller_get: one budgeted GET beyond the polls --------------------------------------- */

const char poller_err_not_sent[] = "not_sent";

static void get_not_sent(struct claim_op *op)
{
    struct httpc_resp r = {.err = poller_err_not_sent, .body = "", .retry_after_ms = -1};
    op->get_cb(op->arg, &r);
}

static void on_get_done(void *arg, const struct httpc_resp *r)
{
    struct claim_op *op = arg;
    count_http(op->p, strncmp(op->path, "/requests/v3", 12) == 0 ? PATH_REQUESTS : PATH_OTHER,
               r); /* feed and backfill pages (relay/ingest/feed.c) are requests_v3 */
    note_result(op->p, r);
    op->get_cb(op->arg, r);
    free(op->path);
    free(op);
}

/* The budget granted the call: send it. Takes op. */
static void get_one(struct claim_op *op)
{
    struct poller *p = op->p;
    char *url = xasprintf("%s%s", p->api, op->path);
    int rc = start_get(p, url, op->max_response, on_get_done, op);
    free(url);
    if (rc != 0) {
        get_not_sent(op);
        free(op->path);
        free(op);
    }
}

/* ---- poller_fetch_now: one call per id, shared by everyone waiting --------------------------- */

static struct fetch *fetch_find(struct poller *p, const char *id)
{
    for (struct fetch *f = p->fetches; f != NULL; f = f->next)
        if (strcmp(f->id, id) == 0)
            return f;
    return NULL;
}

static void fetch_wait_add(struct fetch *f, poller_fetch_cb *cb, void *arg)
{
    struct fetch_wait *w = xcalloc(1, sizeof(*w));
    w->cb = cb;
    w->arg = arg;
    w->next = f->waiters;
    f->waiters = w;
}

/* Unlink f from the poller (a later fetch of its id starts a new call). */
static void fetch_unlink(struct poller *p, struct fetch *f)
{
    for (struct fetch **pp = &p->fetches; *pp != NULL; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            p->nfetches--;
            return;
        }
}

/* The answer of f's call (a poller_fetch_cb; arg: f): every waiter gets it, then f goes. A
 * waiter that fetches the id again starts a new call. */
static void fetch_done(void *arg, long status, const char *body, size_t len)
{
    struct fetch *f = arg;
    fetch_unlink(f->p, f);
    struct fetch_wait *w = f->waiters;
    f->waiters = NULL;
    while (w != NULL) {
        struct fetch_wait *next = w->next;
        w->cb(w->arg, status, body, len);
        free(w);
        w = next;
    }
    free(f);
}

/* The budget's answer to a reservation of one call (reserve). */
static void on_reserved(void *arg, const char *err, int granted)
{
    struct claim_op *op = arg;
    struct poller *p = op->p;
    int ok = err == NULL;
    if (op->what == CLAIM_GET) {
        if (granted > 0) {
            get_one(op); /* takes op */
            return;
        }
        if (ok)
            p->c->metrics.budget_denied++;
        get_not_sent(op);
        free(op->path);
    } else if (op->what == CLAIM_READ) {
        p->read_claiming = 0;
        if (granted > 0 && p->nreads > 0) {
            read_request(p, p->reads[0]);
            free(p->reads[0]);
            memmove(p->reads, p->reads + 1, (size_t)(--p->nreads) * sizeof(p->reads[0]));
        } else if (granted > 0) { /* a facts read: the first one still wanted */
            while (p->nfreads > 0) {
                char *id = facts_read_take(p, &p->freads[p->freads_head]);
                p->freads_head = (p->freads_head + 1) % MAX_FACT_READS;
                p->nfreads--;
                if (id != NULL) {
                    read_request(p, id);
                    free(id);
                    break;
                }
            }
        }
    } else if (op->what == CLAIM_PAGE) {
        if (granted > 0)
            fetch_page(p, op->kind);
        else
            p->page_inflight = 0;
    } else if (granted > 0) { /* CLAIM_FETCH */
        poll_one(p, op->id, op->cb, op->arg); /* op->cb is fetch_done */
    } else {
        if (ok)
            p->c->metrics.budget_denied++;
        op->cb(op->arg, 0, "", 0);
    }
    free(op);
}

/* Reserve one call besides the polls (store/polls.h: from the shared budget, an anonymous
 * status read from its own share too). Takes op: freed here on -1 (Redis not ready). */
static int reserve(struct poller *p, struct claim_op *op)
{
    struct polls_reserve q = {.budget = p->c->cfg->upstream_budget, .calls = 1};
    if (op->what == CLAIM_FETCH && op->anon) {
        int64_t sh = q.budget / POLLER_ANON_READ_DIV;
        q.anon_share = sh > 0 ? sh : 1;
    }
    op->p = p;
    if (polls_reserve(p->c->store, &q, on_reserved, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

static void on_polls_claimed(void *arg, const char *err, const char *const *ids, size_t n)
{
    struct poller *p = arg;
    p->claiming = 0;
    p->polls_backlog = err != NULL || n >= p->claim_max; /* facts reads wait for none */
    for (size_t i = 0; i < n; i++) /* claimed even when the claim failed half-way */
        poll_one(p, ids[i], NULL, NULL);
}

/* Claim up to max due polls (store/polls.h); p->claiming stays set until the answer. */
static void claim_polls(struct poller *p, int max)
{
    struct polls_claim q = {.budget = p->c->cfg->upstream_budget,
                            .max = max,
                            .lease_ms = CLAIM_LEASE_MS,
                            .round = p->rounds++,
                            /* a healthy changes feed reports the changes of the requests it
                             * sees: their polls wait (store/poll_claim.lua) */
                            .skip_feed_ms = feed_healthy(p->c->feed)
                                                ? p->c->cfg->settled_poll_interval_ms
                                                : 0};
    p->claiming = 1;
    p->claim_max = (size_t)max;
    if (polls_claim(p->c->store, &q, on_polls_claimed, p) != 0)
        p->claiming = 0;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct poller *p = arg;
    if (!store_ready(p->c->store) || p->c->shutting_down || mono_ms() < p->backoff_until)
        return;
    if (p->auth == POLLER_AUTH_REJECTED) {
        /* a refused key: one probe per pause (a due poll), nothing else until it is accepted */
        if (!p->claiming && p->inflight == 0)
            claim_polls(p, 1);
        return;
    }
    if (!p->page_inflight && p->gap_active) {
        struct claim_op *op = xcalloc(1, sizeof(*op));
        op->what = CLAIM_PAGE;
        op->kind = PAGE_GAP;
        p->page_inflight = 1;
        if (reserve(p, op) != 0)
            p->page_inflight = 0;
    }
    if ((p->nreads > 0 || (p->nfreads > 0 && !p->polls_backlog)) && !p->read_claiming) {
        struct claim_op *op = xcalloc(1, sizeof(*op));
        op->what = CLAIM_READ;
        p->read_claiming = 1;
        if (reserve(p, op) != 0)
            p->read_claiming = 0;
    }
    if (!p->claiming && p->inflight < MAX_INFLIGHT)
        claim_polls(p, MAX_INFLIGHT - p->inflight);
}

int poller_fetch_now(struct poller *p, const char *id, int anonymous, poller_fetch_cb *cb,
                     void *arg)
{
    struct fetch *f = fetch_find(p, id);
    if (f != NULL) { /* a call for id is under way: its answer is ours too */
        fetch_wait_add(f, cb, arg);
        return 0;
    }
    if (p->nfetches >= POLLER_MAX_FETCHES)
        return -1;
    f = xcalloc(1, sizeof(*f));
    f->p = p;
    snprintf(f->id, sizeof(f->id), "%s", id);
    f->next = p->fetches;
    p->fetches = f;
    p->nfetches++;
    fetch_wait_add(f, cb, arg);
    struct claim_op *op = xcalloc(1, sizeof(*op));
    op->what = CLAIM_FETCH;
    snprintf(op->id, sizeof(op->id), "%s", id);
    op->cb = fetch_done;
    op->arg = f;
    op->anon = anonymous;
    if (reserve(p, op) != 0) { /* reserve freed op; cb is not called */
        fetch_unlink(p, f);
        free(f->waiters); /* ours alone: nobody could join meanwhile */
        free(f);
        return -1;
    }
    return 0;
}

int poller_get(struct poller *p, const char *path, size_t max_response, httpc_done_cb *cb,
               void *arg)
{
    if (!store_ready(p->c->store) || mono_ms() < p->backoff_until)
        return -1;
    struct claim_op *op = xcalloc(1, sizeof(*op));
    op->what = CLAIM_GET;
    op->path = xstrdup(path);
    op->max_response = max_response;
    op->get_cb = cb;
    op->arg = arg;
    char *keep = op->path;
    if (reserve(p, op) != 0) { /* reserve freed op */
        free(keep);
        return -1;
    }
    return 0;
}

struct poller *poller_new(struct core *c)
{
    struct poller *p = xcalloc(1, sizeof(*p));
    p->c = c;
    const char *api = c->cfg->upstream_api_url;
    size_t n = strlen(api);
    while (n > 0 && api[n - 1] == '/')
        n--;
    p->api = xstrndup(api, n);
    if (c->cfg->upstream_api_key)
        p->key_header = xasprintf("x-api-key: %s", c->cfg->upstream_api_key);
    p->tick_ev = event_new(c->base, -1, EV_PERSIST, on_tick, p);
    p->fread_at = idmap_new();
    ingest_on_event(c->ingest, on_event, p);
    return p;
}

void poller_start(struct poller *p)
{
    struct timeval tv = {0, TICK_MS * 1000};
    evtimer_add(p->tick_ev, &tv);
}

void poller_free(struct poller *p)
{
    if (p == NULL)
        return;
    event_free(p->tick_ev);
    free(p->api);
    free(p->key_header);
    free(p->gap_cont);
    for (int i = 0; i < p->nreads; i++)
        free(p->reads[i]);
    for (int i = 0; i < p->nfreads; i++)
        free(p->freads[(p->freads_head + i) % MAX_FACT_READS]);
    idmap_free(p->fread_at);
    free(p);
}
