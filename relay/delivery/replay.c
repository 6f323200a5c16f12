/* replay.c - see replay.h. runs on: core thread.
 *
 * Steps: reload the endpoint set -> either requeue the dead then the skipped set
 * (wh_requeue.lua, stage 0, 1) or page through the event log (XRANGE by time, or
 * events_by_request.lua for one request), decode and filter a page, and queue its
 * (event, endpoint) pairs with wh_fanout.lua in replay mode; a refusal because the endpoint
 * set moved on (-1) reloads it and queues the same page again. One Redis step at a time.
 * Partitions (docs/partitions.md): each stage walks the replay's partitions in turn, one loop
 * for any count (rp->part in [first, end): the dead/skipped sets and the event stream of
 * each): every partition (one with N = 1), or for a replay of one request its own.
 * Ownership: struct replay (with the decoded page) is owned here from replay_start until
 * finish() has called the completion. Every callback first checks that the service still
 * runs (webhooks_of), as the set and the dispatcher go away at shutdown. */
#include "relay/delivery/replay.h"
#include "relay/core.h"
#include "relay/config.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/delivery/delivery.h"
#include "relay/delivery/dispatch.h"
#include "relay/delivery/endpoints.h"
#include "relay/delivery/fanout.h"
#include "relay/delivery/wh_view.h"
#include "store/deliveries.h"
#include "store/events.h"
#include "store/facts.h"
#include "store/keys.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char replay_err_unavailable[] = "unavailable";
const char replay_err_not_found[] = "not_found";

struct replay {
    struct core *c;
    struct webhooks *w;
    struct replay_spec s;
    replay_done_cb *cb;
    void *arg;
    long long count;
    long scanned;
    int stage; /* replay of dead/skipped: 0 dead, 1 skipped, 2 done */
    unsigned part, first, end; /* the partition being replayed, of [first, end) */
    char next_start[64];
    struct status_event *evs; /* the page being queued, with its stream ids */
    char **sids;
    size_t nevs;
    int last_page;
};

static void page_clear(struct replay *rp);

static void replay_free(struct replay *rp)
{
    page_clear(rp);
    free(rp);
}

/* Complete the replay: cb, then free it. */
static void finish(struct replay *rp, const char *err)
{
    char id[32];
    const char *rid = NULL;
    if (err == NULL && !rp->s.dry) {
        unsigned char rnd[8];
        os_random(rnd, sizeof(rnd));
        snprintf(id, sizeof(id), "rpl_%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
                 rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        log_info("replay queued", "replay=%s count=%lld", id, rp->count);
        rid = id;
    }
    rp->cb(rp->arg, err, err == NULL ? rp->count : 0, rid);
    replay_free(rp);
}

static void requeue_next(struct replay *rp);

/* n replayed in this (stage, partition): on to the next partition, then the next stage. */
static void requeued(struct replay *rp, long long n)
{
    rp->count += n;
    if (++rp->part >= rp->end) {
        rp->part = rp->first;
        rp->stage++;
    }
    requeue_next(rp);
}

static void on_requeued(void *arg, const char *err, const char *msg, long long n)
{
    struct replay *rp = arg;
    if (err != NULL) {
        finish(rp, replay_err_unavailable);
        return;
    }
    requeued(rp, n);
}

static void requeue_next(struct replay *rp)
{
    if (webhooks_of(rp->c) == NULL) { /* shutting down: the service is gone */
        finish(rp, replay_err_unavailable);
        return;
    }
    while (rp->stage < 2 && !(rp->stage == 0 ? rp->s.dead : rp->s.skipped))
        rp->stage++;
    if (rp->stage >= 2) {
        if (!rp->s.dry && rp->count > 0 && webhooks_of(rp->c))
            dispatch_kick(delivery_dispatch(rp->c));
        finish(rp, NULL);
        return;
    }
    struct core *c = rp->c;
    struct dl_requeue_req q = {
        .part = rp->part,
        .view = wh_view_of(c, rp->w),
        .skipped = rp->stage != 0,
        .now_ms = wall_ms(),
        .webhook_id = rp->s.webhook_id,
        .request_id = rp->s.request_id,
        .has_since = rp->s.has_since,
        .has_until = rp->s.has_until,
        .since_ms = rp->s.since,
        .until_ms = rp->s.until,
        .dry = rp->s.dry,
        .max = REPLAY_MAX_REQUEUE,
    };
    if (dl_requeue(c->store, &q, on_requeued, rp) != 0)
        finish(rp, replay_err_unavailable);
}

static void events_next(struct replay *rp);
static void events_fanout(struct replay *rp);

static void page_clear(struct replay *rp)
{
    for (size_t i = 0; i < rp->nevs; i++) {
        status_event_cleanup(&rp->evs[i]);
        free(rp->sids[i]);
    }
    free(rp->evs);
    free(rp->sids);
    rp->evs = NULL;
    rp->sids = NULL;
    rp->nevs = 0;
}

static void on_page_facts(void *arg, const char *err, char **texts, size_t n)
{
    struct replay *rp = arg;
    if (err != NULL || webhooks_of(rp->c) == NULL) {
        finish(rp, replay_err_unavailable);
        return;
    }
    for (size_t i = 0; i < n && i < rp->nevs; i++) {
        free(rp->evs[i].facts);
        rp->evs[i].facts = texts[i]; /* taken */
        texts[i] = NULL;
    }
    events_fanout(rp);
}

static void on_events_page(void *arg, const char *err, const char *msg,
                           struct store_events_iter *it, size_t n)
{
    struct replay *rp = arg;
    if (err != NULL || webhooks_of(rp->c) == NULL) {
        finish(rp, replay_err_unavailable);
        return;
    }
    page_clear(rp);
    struct store_event_entry e;
    rp->evs = xcalloc(n + 1, sizeof(*rp->evs));
    rp->sids = xcalloc(n + 1, sizeof(*rp->sids));
    rp->last_page = rp->s.request_id[0] != '\0' || n < REPLAY_PAGE;
    while (store_events_next(it, &e)) {
        snprintf(rp->next_start, sizeof(rp->next_start), "(%s", e.sid);
        struct status_event *ev = &rp->evs[rp->nevs];
        struct proto_err pe;
        if (store_event_decode(&e, ev, &pe) != 0) {
            status_event_cleanup(ev);
            continue;
        }
        if ((rp->s.has_since && ev->created_at < rp->s.since) ||
            (rp->s.has_until && ev->created_at > rp->s.until) ||
            (rp->s.request_id[0] && strcmp(rp->s.request_id, ev->request_id) != 0)) {
            status_event_cleanup(ev);
            continue;
        }
        rp->sids[rp->nevs] = xstrdup(e.sid);
        rp->nevs++;
    }
    rp->scanned += (long)n;
    /* the facts each event carries (the version of its seq): the body is the one the
     * fan-out made, byte for byte */
    const char **ids = xcalloc(rp->nevs + 1, sizeof(*ids));
    uint64_t *seqs = xcalloc(rp->nevs + 1, sizeof(*seqs));
    for (size_t i = 0; i < rp->nevs; i++) {
        ids[i] = rp->evs[i].request_id;
        seqs[i] = rp->evs[i].seq;
    }
    int rc = rp->s.dry ? 1 : store_facts_at(rp->c->store, ids, seqs, rp->nevs, on_page_facts, rp);
    free(ids);
    free(seqs);
    if (rc < 0)
        finish(rp, replay_err_unavailable);
    else if (rc > 0)
        events_fanout(rp); /* a dry run counts pairs only: no bodies */
}

static void on_replay_fanout(void *arg, const char *err, const char *msg,
                             const struct dl_fanout_res *res);

static void on_replay_reloaded(void *arg, const char *err)
{
    struct replay *rp = arg;
    if (err != NULL || webhooks_of(rp->c) == NULL) {
        finish(rp, replay_err_unavailable);
        return;
    }
    events_fanout(rp);
}

/* Replay: every enabled endpoint whose filters match (replays also reach endpoints
 * registered after the event), or only the one asked for. */
static int replay_match(const struct replay *rp, const struct webhook *wh,
                        struct event_subject *x)
{
    return wh->enabled && (!rp->s.webhook_id[0] || strcmp(rp->s.webhook_id, wh->id) == 0) &&
           webhook_matches_subject(wh, x);
}

/* Add ev (stream entry sid) with a pending pair per matching endpoint; an event matching
 * none is left out. Returns the number of pairs. */
static long long page_event(struct replay *rp, struct dl_fanout *a, const char *sid,
                            const struct status_event *ev)
{
    long long nmatch = 0;
    size_t nwh = webhooks_count(rp->w);
    dl_fanout_event(a, sid, ev);
    struct event_subject x; /* one per event, for every endpoint */
    subject_from_event(ev, &x);
    for (size_t k = 0; k < nwh; k++) {
        struct webhook *wh = webhooks_at(rp->w, k);
        if (!replay_match(rp, wh, &x))
            continue;
        dl_fanout_pair(a, wh->id, DL_PAIR_PENDING, NULL, 0);
        nmatch++;
    }
    subject_cleanup(&x);
    if (nmatch == 0) {
        dl_fanout_drop(a); /* nothing for this event */
        return 0;
    }
    if (!rp->s.dry) { /* a dry run counts pairs only */
        size_t blen = 0;
        char *body = proto_event_webhook_body(ev, &blen);
        if (body == NULL) {
            log_err("webhook body encoding failed", "event=%s", ev->event_id);
            abort(); /* out of memory: relay/ aborts, see STYLE 4 */
        }
        dl_fanout_body(a, body, blen, 1);
    }
    return nmatch;
}

/* Queue the page's (event, endpoint) pairs through wh_fanout.lua in replay mode (the same
 * script as the fan-out's: store/deliveries.h). */
static void events_fanout(struct replay *rp)
{
    struct core *c = rp->c;
    struct webhooks *w = rp->w;
    struct dl_fanout a;
    struct dl_fanout_opts o = {
        .part = rp->part,
        .view = wh_view_of(c, w),
        .replay = 1,
        .version = webhooks_version(w),
        .holder = c->instance_id,
        .group = FANOUT_GROUP,
        .now_ms = wall_ms(),
        .retention_ms = WH_RETENTION_MS,
        .disable_after_ms = c->cfg->disable_after_ms,
        .list_cap = WH_LIST_CAP,
    };
    dl_fanout_begin(&a, c->store, &o);
    long long pairs = 0;
    for (size_t i = 0; i < rp->nevs; i++)
        pairs += page_event(rp, &a, rp->sids[i], &rp->evs[i]);
    int r = 0;
    if (rp->s.dry || a.events == 0) {
        rp->count += rp->s.dry ? pairs : 0;
        r = 1;
    } else if (dl_fanout_send(&a, on_replay_fanout, rp) != 0) {
        r = -1;
    }
    dl_fanout_free(&a);
    if (r < 0)
        finish(rp, replay_err_unavailable);
    else if (r == 1)
        events_next(rp);
}

static void on_replay_fanout(void *arg, const char *err, const char *msg,
                             const struct dl_fanout_res *res)
{
    struct replay *rp = arg;
    if (err != NULL) {
        finish(rp, replay_err_unavailable);
        return;
    }
    if (res->code == -1) {
        webhooks_reload(rp->w, on_replay_reloaded, rp);
        return;
    }
    rp->count += res->created;
    events_next(rp);
}

static void events_next(struct replay *rp)
{
    struct core *c = rp->c;
    if (webhooks_of(c) == NULL) {
        finish(rp, replay_err_unavailable);
        return;
    }
    if (rp->last_page && rp->scanned < REPLAY_MAX_EVENTS &&
        rp->part + 1 < rp->end) { /* the next partition's stream */
        rp->part++;
        rp->last_page = 0;
        if (rp->s.has_since)
            snprintf(rp->next_start, sizeof(rp->next_start), "%lld", (long long)rp->s.since);
        else
            snprintf(rp->next_start, sizeof(rp->next_start), "-");
    }
    if (rp->last_page || rp->scanned >= REPLAY_MAX_EVENTS) {
        page_clear(rp);
        if (!rp->s.dry && rp->count > 0)
            dispatch_kick(delivery_dispatch(rp->c));
        finish(rp, NULL);
        return;
    }
    int r;
    if (rp->s.request_id[0]) {
        r = dl_events_of_request(c->store, rp->s.request_id, on_events_page, rp);
    } else {
        char end[32];
        snprintf(end, sizeof(end), "%lld", rp->s.has_until ? (long long)rp->s.until : 0LL);
        r = dl_events_page(c->store, rp->part, rp->next_start, rp->s.has_until ? end : "+",
                           REPLAY_PAGE, on_events_page, rp);
    }
    if (r != 0)
        finish(rp, replay_err_unavailable);
}

static void on_replay_fresh(void *arg, const char *err)
{
    struct replay *rp = arg;
    if (err != NULL || webhooks_of(rp->c) == NULL) {
        finish(rp, replay_err_unavailable);
        return;
    }
    if (rp->s.webhook_id[0] && webhooks_find(rp->w, rp->s.webhook_id) == NULL) {
        finish(rp, replay_err_not_found);
        return;
    }
    if (rp->s.dead || rp->s.skipped) {
        requeue_next(rp);
        return;
    }
    if (rp->s.has_since) {
        snprintf(rp->next_start, sizeof(rp->next_start), "%lld", (long long)rp->s.since);
    } else {
        snprintf(rp->next_start, sizeof(rp->next_start), "-");
    }
    events_next(rp);
}

void replay_start(struct core *c, const struct replay_spec *spec, replay_done_cb *cb, void *arg)
{
    struct replay *rp = xcalloc(1, sizeof(*rp));
    rp->c = c;
    rp->w = webhooks_of(c);
    rp->s = *spec;
    rp->cb = cb;
    rp->arg = arg;
    /* the partitions walked: the request's own, or every one */
    unsigned np = store_partitions(c->store);
    const char *id = rp->s.request_id;
    rp->first = id[0] ? key_partition(id, strlen(id), np) : 0;
    rp->end = id[0] ? rp->first + 1 : np;
    rp->part = rp->first;
    if (rp->w == NULL) {
        finish(rp, replay_err_unavailable);
        return;
    }
    webhooks_reload(rp->w, on_replay_fresh, rp);
}
