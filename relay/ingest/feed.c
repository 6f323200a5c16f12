/* feed.c - see feed.h. runs on: core thread.
 *
 * A "run" reads one window of the feed page by page: the sweep (at most one per process, only
 * while this process holds the lease) or a backfill (any number). One page at a time per run:
 * the GET (poller_get: one call from the shared budget), then for the sweep the overlap's
 * dedupe (feed_seen: items applied by an earlier page are counted as skipped, not applied
 * again), the apply of each item (ingest_submit, tracked), and for the sweep the commit
 * (feed_commit: the cursor moves to the page's newest updatedAt only once every item of the
 * page is applied, so a crash re-reads the page, never skips it). Ownership: the feed owns its
 * runs; a run owns its page's events (moved out of the page walker), its continuation and its
 * item copies until the page ends. A run is freed only when nothing of it is in flight.
 * Pages of one run are paced to at most half of STATUSRELAY_UPSTREAM_BUDGET. */
#include "relay/ingest/feed.h"
#include "relay/core.h"
#include "relay/common/httpc.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/ingest/chains.h"
#include "relay/ingest/facts.h"
#include "relay/ingest/ingest.h"
#include "relay/ingest/poller.h"
#include "relay/ingest/upstream.h"
#include "protocol/normalize.h"
#include "store/feed.h"
#include "store/polls.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_MS 200
#define FEED_MARKED_SLOTS 4096 /* 32 KB */
#define FEED_RESTORE_MAX 500 /* watch entries read per tick while the feed is down */
#define PAGE_LIMIT 50
#define FEED_OVERLAP_MS 5000            /* a sweep starts this far before the cursor */
#define PAGE_MAX_RESPONSE (4 * 1024 * 1024)
#define BACKFILL_TTL_MS (24 * 3600 * 1000LL) /* progress kept after its last write */
#define BACKFILL_MAX_FAILURES 5         /* consecutive failed pages before a backfill gives up */
#define RETRY_MS 1000

struct run;
struct item_ctx { /* an apply's answer names its item: r->evs[i] */
    struct run *r;
    size_t i;
};

struct run {
    struct feed *f;
    struct run *next; /* f->backfills */
    int backfill;
    char id[FEED_BACKFILL_ID_MAX];
    int64_t since_ms, until_ms; /* until < 0: none */
    int64_t created_ms;
    char *cont;         /* continuation of the next page (owned), NULL = first page */
    char *last_cont;    /* the sweep: the continuation of the last page with items (owned) */
    int last_first;     /* ... which was the first page (no continuation) */
    int busy;           /* a page is under way (call, dedupe, apply or commit) */
    int64_t retry_at;   /* mono ms: no page before */
    int64_t page_at;    /* mono ms of the last page call */
    int64_t page_prev;  /* ... of the one before: a call the budget refused is not one */
    int failures;
    int finished;       /* the window is read (or given up): free when not busy */
    /* the page under way */
    struct status_event *evs; /* owned, moved out of the walker */
    char **fx;                /* fx[i]: evs[i]'s facts text (owned; NULL: none) */
    size_t *fx_len;
    size_t nev, cap;
    struct feed_item *items;  /* ids borrowed from evs */
    struct item_ctx *ictx;    /* owned: the applies' callback args, one per item */
    size_t pending;           /* applies not answered yet */
    int page_err;
    int64_t top_ms;
    char *next_cont;          /* owned */
    /* progress */
    int64_t pages, nitems, applied, skipped;
    char error[64];
};

struct feed {
    struct core *c;
    struct event *tick_ev;
    int on;             /* discovery: an API key and STATUSRELAY_DISCOVER */
    char *scope;        /* the key, URL-escaped: apiKey= */
    int leasing;
    int64_t lease_next; /* mono ms */
    int held, healthy;
    int was_healthy; /* the feed was healthy once in this process (feed_restore's due) */
    int64_t cursor_ms;  /* -1 = none yet */
    int64_t sweep_next; /* mono ms */
    /* where the next sweep resumes: the query and continuation of the previous sweep's last
     * page with items, so that an idle feed costs one page a sweep however many items sit
     * within the overlap (NULL: from the cursor) */
    char *resume_cont;
    int64_t resume_since;
    struct run *sweep;
    struct run *backfills;
    /* ids this process marked (store/feed_mark.lua) for items that made no event, by a 64-bit
     * hash in a direct-mapped table: such an item comes back with every change the websocket
     * saw first, and is marked once, not per change (a collision only costs a mark call; a
     * hash shared by two ids leaves one unmarked: polled as before the mark) */
    uint64_t marked[FEED_MARKED_SLOTS];
};

int feed_healthy(const struct feed *f)
{
    return f != NULL && f->healthy;
}

/* ---- runs ---------------------------------------------------------------------------------- */

static void page_reset(struct run *r)
{
    for (size_t i = 0; i < r->nev; i++) {
        status_event_cleanup(&r->evs[i]);
        free(r->fx[i]);
    }
    free(r->evs);
    free(r->fx);
    free(r->fx_len);
    r->fx = NULL;
    r->fx_len = NULL;
    free(r->items);
    free(r->ictx);
    free(r->next_cont);
    r->evs = NULL;
    r->items = NULL;
    r->ictx = NULL;
    r->next_cont = NULL;
    r->nev = r->cap = r->pending = 0;
    r->page_err = 0;
    r->top_ms = 0;
}

static void run_free(struct run *r)
{
    page_reset(r);
    free(r->cont);
    free(r->last_cont);
    free(r);
}

static void backfill_save(struct run *r)
{
    struct feed_backfill b = {.since_ms = r->since_ms,
                              .until_ms = r->until_ms,
                              .created_ms = r->created_ms,
                              .pages = r->pages,
                              .items = r->nitems,
                              .applied = r->applied,
                              .done = r->finished,
                              .error = r->error};
    feed_backfill_put(r->f->c->store, r->id, &b, BACKFILL_TTL_MS);
}

/* The window is read (err NULL) or given up. The run is freed by the tick once not busy. */
static void run_finish(struct run *r, const char *err)
{
    struct feed *f = r->f;
    r->finished = 1;
    if (err != NULL)
        snprintf(r->error, sizeof(r->error), "%s", err);
    if (r->backfill) {
        backfill_save(r);
        log_info("backfill done", "id=%s pages=%lld items=%lld applied=%lld error=%s", r->id,
                 (long long)r->pages, (long long)r->nitems, (long long)r->applied,
                 err ? err : "none");
    } else {
        f->sweep_next = mono_ms() + f->c->cfg->discover_interval_ms;
        if (err != NULL)
            log_warn("changes feed page failed", "err=%s pages=%lld", err, (long long)r->pages);
        if (err != NULL || (r->last_cont == NULL && r->last_first)) {
            /* after an error, or when the window's items fit one page: from the cursor */
            free(f->resume_cont);
            f->resume_cont = NULL;
        } else if (r->last_cont != NULL) {
            free(f->resume_cont);
            f->resume_cont = xstrdup(r->last_cont);
            f->resume_since = r->since_ms;
        }
    }
}

/* A page failed: a sweep ends (the next one starts again from the cursor); a backfill tries
 * the same page again a little later, up to BACKFILL_MAX_FAILURES in a row. */
static void page_failed(struct run *r, const char *why)
{
    page_reset(r);
    r->busy = 0;
    if (!r->backfill || ++r->failures >= BACKFILL_MAX_FAILURES) {
        run_finish(r, why);
        return;
    }
    r->retry_at = mono_ms() + RETRY_MS * r->failures;
}

/* The page is applied (and committed for the sweep): on to the next one, or the end. */
static void page_next(struct run *r)
{
    if (!r->backfill && r->nev > 0) { /* the position of the last page with items */
        free(r->last_cont);
        r->last_cont = r->cont != NULL ? xstrdup(r->cont) : NULL;
        r->last_first = r->cont == NULL;
    }
    free(r->cont);
    r->cont = r->next_cont;
    r->next_cont = NULL;
    page_reset(r);
    r->busy = 0;
    r->failures = 0;
    if (r->backfill)
        backfill_save(r);
    if (r->cont == NULL)
        run_finish(r, NULL);
}

static void on_commit(void *arg, const char *err, int ok)
{
    struct run *r = arg;
    struct feed *f = r->f;
    if (err != NULL) {
        page_failed(r, "store");
        return;
    }
    if (!ok) { /* another process holds the lease now: its sweep goes on from the cursor */
        log_info("changes feed lease lost", "pages=%lld", (long long)r->pages);
        f->held = 0;
        free(f->resume_cont);
        f->resume_cont = NULL;
        page_reset(r);
        r->busy = 0;
        run_finish(r, NULL);
        return;
    }
    if (r->top_ms > f->cursor_ms)
        f->cursor_ms = r->top_ms;
    f->healthy = 1;
    f->was_healthy = 1;
    f->c->metrics.feed_healthy = 1;
    page_next(r);
}

static void page_applied(struct run *r)
{
    struct feed *f = r->f;
    if (r->page_err) {
        page_failed(r, "apply");
        return;
    }
    if (r->backfill) {
        page_next(r);
        return;
    }
    /* the seen set keeps the overlap behind the cursor and this page's items (the next sweep
     * may start with this page again) */
    int64_t cur = r->top_ms > f->cursor_ms ? r->top_ms : f->cursor_ms;
    int64_t trim = cur - FEED_OVERLAP_MS - 1000;
    for (size_t i = 0; i < r->nev; i++)
        if (r->evs[i].updated_at < trim)
            trim = r->evs[i].updated_at;
    struct feed_commit q = {.holder = f->c->instance_id,
                            .top_ms = r->top_ms,
                            .trim_ms = trim,
                            .health_ms = 2 * f->c->cfg->discover_interval_ms,
                            .items = r->items,
                            .n = r->nev};
    if (feed_commit(f->c->store, &q, on_commit, r) != 0)
        page_failed(r, "store");
}

/* feed_mark for id unless this process marked it already (f->marked). */
static void mark_once(struct feed *f, const char *id)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)id; *p != '\0'; p++)
        h = (h ^ *p) * 1099511628211ULL;
    h |= 1; /* 0 = an empty slot */
    uint64_t *slot = &f->marked[h % FEED_MARKED_SLOTS];
    if (*slot == h)
        return;
    if (feed_mark(f->c->store, id) == 0)
        *slot = h;
}

static void on_applied(void *arg, const char *err, enum proto_verdict v,
                       const struct status_event *ev)
{
    struct item_ctx *x = arg;
    struct run *r = x->r;
    if (err != NULL) {
        r->page_err = 1;
    } else {
        if (ev != NULL) {
            if (v == PROTO_ACCEPT)
                r->applied++;
            r->f->c->metrics.feed_items[v == PROTO_ACCEPT ? 0 : 1]++;
        }
        /* of the key: the feed sees it (store/feed_mark.lua: nothing written when marked
         * already). Also an item that made no event (it repeats what polls or the websocket
         * stored first, as every change of a request the websocket follows): such a request
         * was never marked before; once per id and process */
        if (ev != NULL && v == PROTO_ACCEPT)
            feed_mark(r->f->c->store, ev->request_id);
        else
            mark_once(r->f, r->evs[x->i].request_id);
    }
    if (--r->pending == 0)
        page_applied(r);
}

/* Apply the page's items but those seen[i] (NULL: all). */
static void apply_page(struct run *r, const unsigned char *seen)
{
    free(r->ictx);
    r->ictx = xcalloc(r->nev + 1, sizeof(*r->ictx));
    r->pending = 1; /* held while submitting: a synchronous answer cannot end the page */
    for (size_t i = 0; i < r->nev; i++) {
        if (seen != NULL && seen[i]) {
            r->skipped++;
            r->f->c->metrics.feed_items[2]++;
            continue;
        }
        r->pending++;
        /* the item's facts first (the event its status makes carries them), then the apply */
        r->ictx[i].r = r;
        r->ictx[i].i = i;
        facts_submit_cb(r->f->c, &r->evs[i], 1, r->fx[i], r->fx[i] != NULL ? r->fx_len[i] : 0,
                        on_applied, &r->ictx[i]);
    }
    if (--r->pending == 0)
        page_applied(r);
}

static void on_seen(void *arg, const char *err, const unsigned char *seen, size_t n)
{
    struct run *r = arg;
    if (err != NULL || n != r->nev) {
        page_failed(r, "store");
        return;
    }
    apply_page(r, seen);
}

static void on_item(void *arg, int rc, struct status_event *ev, const struct proto_err *e,
                    const char *facts, size_t facts_len)
{
    struct run *r = arg;
    (void)e;
    if (rc != 0) {
        ingest_rejected(r->f->c->ingest, PROTO_SRC_REQUESTS);
        return;
    }
    if (r->nev == r->cap) {
        r->cap = r->cap ? 2 * r->cap : PAGE_LIMIT;
        r->evs = xrealloc(r->evs, r->cap * sizeof(*r->evs));
        r->fx = xrealloc(r->fx, r->cap * sizeof(*r->fx));
        r->fx_len = xrealloc(r->fx_len, r->cap * sizeof(*r->fx_len));
    }
    r->fx[r->nev] = facts != NULL ? xstrndup(facts, facts_len) : NULL;
    r->fx_len[r->nev] = facts != NULL ? facts_len : 0;
    r->evs[r->nev++] = *ev; /* moved out */
    status_event_init(ev);
    if (r->evs[r->nev - 1].updated_at > r->top_ms)
        r->top_ms = r->evs[r->nev - 1].updated_at;
}

static void on_page(void *arg, const struct httpc_resp *resp)
{
    struct run *r = arg;
    struct feed *f = r->f;
    if (resp->err == poller_err_not_sent) { /* the budget is spent for now: not an error */
        /* with several partitions a claim round holds the tokens it may use for a moment
         * (store/polls.c): ask again at the next tick rather than a second later */
        log_debug("changes feed page waits for the budget", "backfill=%d", r->backfill);
        r->busy = 0;
        r->retry_at = mono_ms() + TICK_MS;
        /* nothing was sent: the pacing of pages does not hold the next try back (the budget
         * keeps a call for it meanwhile: store/poll_claim.lua {P}:budgetw, for a second) */
        r->page_at = r->page_prev;
        return;
    }
    if (resp->err != NULL || resp->status != 200) {
        char why[48];
        if (resp->err != NULL)
            snprintf(why, sizeof(why), "upstream: %.30s", resp->err);
        else
            snprintf(why, sizeof(why), "upstream status %ld", resp->status);
        page_failed(r, why);
        return;
    }
    struct proto_err perr;
    int rc = proto_normalize_requests_page_facts(resp->body, resp->body_len, wall_ms(),
                                                 chains_explorers(f->c->chains), on_item, r,
                                                 &r->next_cont, &perr);
    if (rc != 0) {
        log_warn("changes feed page rejected", "err=%s field=%s", proto_strerror(rc),
                 perr.field);
        page_failed(r, "malformed page");
        return;
    }
    r->pages++;
    f->c->metrics.feed_pages++;
    r->nitems += (int64_t)r->nev;
    r->items = xcalloc(r->nev + 1, sizeof(*r->items));
    for (size_t i = 0; i < r->nev; i++) {
        r->items[i].id = r->evs[i].request_id;
        r->items[i].updated_ms = r->evs[i].updated_at;
    }
    if (r->backfill || r->nev == 0) {
        apply_page(r, NULL);
        return;
    }
    if (feed_seen(f->c->store, r->items, r->nev, on_seen, r) != 0)
        page_failed(r, "store");
}

/* The next page of r when due. */
static void run_step(struct run *r)
{
    struct feed *f = r->f;
    int64_t now = mono_ms();
    /* pages follow each other at most at half the budget (a first start's day of requests,
     * a long backfill), so that the polls the feed does not cover keep the other half */
    int64_t budget = f->c->cfg->upstream_budget > 0 ? f->c->cfg->upstream_budget : 1;
    if (r->busy || r->finished || now < r->retry_at ||
        (r->page_at > 0 && now - r->page_at < 120000 / budget))
        return;
    r->page_prev = r->page_at;
    r->page_at = now;
    char path[4096];
    int n = snprintf(path, sizeof(path),
                     "/requests/v3?sortBy=updatedAt&sortDirection=asc&limit=%d"
                     "&startTimestamp=%lld&apiKey=%s",
                     PAGE_LIMIT, (long long)(r->since_ms / 1000), f->scope);
    if (r->until_ms >= 0)
        n += snprintf(path + n, sizeof(path) - (size_t)n, "&endTimestamp=%lld",
                      (long long)(r->until_ms / 1000));
    if (r->cont != NULL) {
        char *esc = url_escape(r->cont);
        snprintf(path + n, sizeof(path) - (size_t)n, "&continuation=%s", esc);
        free(esc);
    }
    r->busy = 1;
    if (poller_get(f->c->poller, path, PAGE_MAX_RESPONSE, on_page, r) != 0) {
        log_debug("changes feed page waits: polling paused", "backfill=%d", r->backfill);
        r->busy = 0; /* paused (429/5xx backoff) or Redis not ready: later */
        r->retry_at = mono_ms() + RETRY_MS;
    }
}

static struct run *run_new(struct feed *f, int64_t since_ms, int64_t until_ms)
{
    struct run *r = xcalloc(1, sizeof(*r));
    r->f = f;
    r->since_ms = since_ms;
    r->until_ms = until_ms;
    r->created_ms = wall_ms();
    return r;
}

/* ---- the sweep and the lease --------------------------------------------------------------- */

static void start_sweep(struct feed *f)
{
    const struct config *cfg = f->c->cfg;
    int64_t floor_ms = wall_ms() - cfg->discover_lookback_ms;
    int64_t since = f->cursor_ms >= 0 ? f->cursor_ms - FEED_OVERLAP_MS : floor_ms;
    if (since < floor_ms)
        since = floor_ms;
    if (f->cursor_ms < 0)
        log_info("changes feed: first start, reading the look-back window",
                 "since=%lld lookback_ms=%lld", (long long)since,
                 (long long)cfg->discover_lookback_ms);
    if (f->resume_cont != NULL && f->cursor_ms >= 0) { /* the previous sweep's last page on */
        f->sweep = run_new(f, f->resume_since, -1);
        f->sweep->cont = xstrdup(f->resume_cont);
        return;
    }
    f->sweep = run_new(f, since, -1);
}

static void on_lease(void *arg, const char *err, int held, int healthy, int64_t cursor_ms)
{
    struct feed *f = arg;
    f->leasing = 0;
    if (err != NULL)
        return; /* the lease expires by itself; health is kept until the next answer */
    if (held && !f->held)
        log_info("changes feed lease taken", "cursor=%lld", (long long)cursor_ms);
    else if (!held && f->held)
        log_info("changes feed lease lost", "cursor=%lld", (long long)cursor_ms);
    if (held != f->held) { /* a new holder starts from the cursor */
        free(f->resume_cont);
        f->resume_cont = NULL;
    }
    f->held = held;
    if (healthy)
        f->was_healthy = 1;
    if (f->healthy && !healthy) {
        /* polls the feed made unnecessary are due again: the budget decides the order */
        log_warn("changes feed not healthy: polling every watched request again",
                 "interval_ms=%lld", (long long)f->c->cfg->discover_interval_ms);
        polls_due_now(f->c->store, POLLS_TIERS_ALL);
    }
    f->healthy = healthy;
    f->c->metrics.feed_healthy = healthy;
    f->c->metrics.feed_held = held;
    if (f->sweep == NULL || cursor_ms > f->cursor_ms)
        f->cursor_ms = cursor_ms;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct feed *f = arg;
    (void)fd, (void)what;
    struct core *c = f->c;
    if (!store_ready(c->store) || c->shutting_down)
        return;
    int64_t now = mono_ms();
    if (f->scope != NULL && !f->leasing && now >= f->lease_next) {
        /* with a key, a process that does not read the feed still learns its health (a
         * deployment where another process reads it) */
        int64_t lease = c->cfg->leader_lease_ms;
        if (feed_lease(c->store, c->instance_id, lease, f->on, on_lease, f) == 0)
            f->leasing = 1;
        f->lease_next = now + lease / 3;
    }
    if (f->sweep != NULL && !f->held && !f->sweep->busy && !f->sweep->finished)
        run_finish(f->sweep, NULL); /* the lease went elsewhere: its holder goes on */
    if (f->sweep != NULL && f->sweep->finished && !f->sweep->busy) {
        run_free(f->sweep);
        f->sweep = NULL;
    }
    if (f->scope != NULL) {
        /* while {P}:feedok is absent (the script looks: the lease look learns it up to
         * lease/3 later) the feed-covered requests get their poll tiers back, a bounded pass
         * per tick: due now after the feed was healthy in this process (on_lease makes every
         * tier due then), else (a process that just started, the feed maybe about to be
         * read) at the tier's own period */
        int64_t w = wall_ms(), a = w, st = w;
        if (!f->was_healthy) {
            a += c->upstream != NULL ? c->cfg->poll_safety_interval_ms : c->cfg->poll_interval_ms;
            st += c->cfg->settled_poll_interval_ms;
        }
        /* while the upstream websocket cannot confirm them, active ones go back to the
         * urgent tier, where every poll puts them (poller.c poller_next_poll): in the active
         * tier they waited behind every request polled since */
        int ws_ok = c->upstream != NULL && upstream_healthy(c->upstream);
        feed_restore(c->store, w, FEED_RESTORE_MAX, a, st, ws_ok ? 'a' : 'u');
    }
    if (f->on && f->held && f->sweep == NULL && now >= f->sweep_next)
        start_sweep(f);
    if (f->sweep != NULL)
        run_step(f->sweep);
    for (struct run **pp = &f->backfills; *pp != NULL;) {
        struct run *r = *pp;
        if (r->finished && !r->busy) {
            *pp = r->next;
            run_free(r);
            continue;
        }
        run_step(r);
        pp = &r->next;
    }
}

int feed_backfill_start(struct feed *f, int64_t since_ms, int64_t until_ms, char *id)
{
    if (f->scope == NULL || !store_ready(f->c->store))
        return -1;
    unsigned char rnd[12];
    os_random(rnd, sizeof(rnd));
    char *o = id;
    o += snprintf(o, 4, "bf_");
    for (size_t i = 0; i < sizeof(rnd); i++)
        o += snprintf(o, 3, "%02x", rnd[i]);
    struct run *r = run_new(f, since_ms, until_ms);
    r->backfill = 1;
    snprintf(r->id, sizeof(r->id), "%s", id);
    r->next = f->backfills;
    f->backfills = r;
    backfill_save(r);
    log_info("backfill started", "id=%s since=%lld until=%lld", r->id, (long long)since_ms,
             (long long)until_ms);
    return 0;
}

struct feed *feed_new(struct core *c)
{
    struct feed *f = xcalloc(1, sizeof(*f));
    f->c = c;
    f->cursor_ms = -1;
    if (c->cfg->upstream_api_key != NULL)
        f->scope = url_escape(c->cfg->upstream_api_key);
    f->on = c->cfg->discover && f->scope != NULL;
    f->tick_ev = event_new(c->base, -1, EV_PERSIST, on_tick, f);
    return f;
}

void feed_start(struct feed *f)
{
    struct timeval tv = {0, TICK_MS * 1000};
    evtimer_add(f->tick_ev, &tv);
}

void feed_shutdown(struct feed *f)
{
    if (f == NULL || !f->held)
        return;
    feed_release(f->c->store, f->c->instance_id);
    f->held = 0;
}

void feed_free(struct feed *f)
{
    if (f == NULL)
        return;
    event_free(f->tick_ev);
    if (f->sweep != NULL)
        run_free(f->sweep);
    while (f->backfills != NULL) {
        struct run *r = f->backfills;
        f->backfills = r->next;
        run_free(r);
    }
    free(f->scope);
    free(f->resume_cont);
    free(f);
}
