/* ingest.c - see ingest.h. runs on: core thread.
 *
 * Ownership: every observation is copied into a struct obs_item owned by this module until
 * its apply completes (the applier borrows its ev until then, store/apply.h: no copy);
 * queued items (Redis down) are owned by the pending FIFO. The written event is the
 * applier's: listeners borrow it, then a taker (the fan-out) may move it out. */
#include "relay/ingest/ingest.h"
#include "relay/core.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "store/apply.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdlib.h>

#define INGEST_PENDING_MAX 100000
#define INGEST_FUTURE_LOG_MS 10000 /* one "updatedAt ahead" warn line per this, at most */

struct listener {
    ingest_event_cb *fn;
    ingest_take_cb *take; /* a taker (ingest_on_event_take): fn is NULL */
    void *arg;
    struct listener *next;
};

struct obs_item {
    struct obs_item *next;
    struct ingest *in;
    struct status_event ev;
    int track;
    ingest_done_cb *cb;
    void *arg;
};

struct ingest {
    struct core *c;
    struct listener *listeners;
    struct obs_item *head, *tail; /* waiting for Redis */
    size_t npending;
    struct event *drain_ev;
    int64_t future_log_ms;     /* mono ms of the last "updatedAt ahead" line, 0 = none */
    uint64_t future_suppressed; /* refusals not logged since */
};

static void submit_item(struct obs_item *it);

static void item_free(struct obs_item *it)
{
    status_event_cleanup(&it->ev);
    free(it);
}

static void enqueue(struct ingest *in, struct obs_item *it)
{
    if (in->npending >= INGEST_PENDING_MAX) {
        /* The poller re-reads every tracked request once Redis is back, so the state still
         * converges; the drop is counted and logged. */
        in->c->metrics.ingest_dropped++;
        log_warn("observation dropped, pending queue full", "request=%s", it->ev.request_id);
        item_free(it);
        return;
    }
    it->next = NULL;
    if (in->tail)
        in->tail->next = it;
    else
        in->head = it;
    in->tail = it;
    in->npending++;
    in->c->metrics.ingest_pending = in->npending;
}

static enum metrics_outcome outcome_of(enum proto_verdict v)
{
    return v == PROTO_ACCEPT ? MO_ACCEPTED : v == PROTO_DUPLICATE ? MO_DUPLICATE : MO_STALE;
}

static void on_applied(void *arg, const char *err, enum proto_verdict v,
                       struct status_event *ev, const char *stream_id, int facts)
{
    struct obs_item *it = arg;
    struct ingest *in = it->in;
    if (err != NULL) {
        if (it->cb) {
            it->cb(it->arg, err, v, NULL);
            item_free(it);
        } else if (err == store_err_disconnected) {
            enqueue(in, it); /* retried when Redis is back */
        } else {
            log_err("observation not applied", "request=%s err=%s", it->ev.request_id, err);
            item_free(it);
        }
        return;
    }
    in->c->metrics.events[it->ev.source][outcome_of(v)]++;
    if (v == PROTO_ACCEPT)
        for (struct listener *l = in->listeners; l; l = l->next)
            if (l->fn != NULL)
                l->fn(l->arg, v, ev, stream_id);
    if (it->cb)
        it->cb(it->arg, NULL, v, ev);
    /* last, the takers: ev (the applier's) may be moved out by one of them */
    if (v == PROTO_ACCEPT && ev != NULL)
        for (struct listener *l = in->listeners; l; l = l->next)
            if (l->take != NULL)
                l->take(l->arg, ev, stream_id, facts);
    item_free(it);
}

static void submit_item(struct obs_item *it)
{
    struct ingest *in = it->in;
    if (applier_apply(in->c->applier, &it->ev, it->track, on_applied, it) == 0)
        return;
    if (it->cb) {
        it->cb(it->arg, store_err_disconnected, PROTO_STALE, NULL);
        item_free(it);
    } else {
        enqueue(in, it);
    }
}

/* Drain the pending FIFO in slices so a large backlog does not starve the loop. */
static void on_drain(evutil_socket_t fd, short what, void *arg)
{
    struct ingest *in = arg;
    int n = 0;
    while (in->head && store_ready(in->c->store) && n++ < 1000) {
        struct obs_item *it = in->head;
        in->head = it->next;
        if (in->head == NULL)
            in->tail = NULL;
        in->npending--;
        submit_item(it);
    }
    in->c->metrics.ingest_pending = in->npending;
    if (in->head && store_ready(in->c->store))
        event_active(in->drain_ev, EV_TIMEOUT, 0);
}

static void on_store_state(void *arg, int up)
{
    struct ingest *in = arg;
    if (up && in->head)
        event_active(in->drain_ev, EV_TIMEOUT, 0);
}

struct ingest *ingest_new(struct core *c)
{
    struct ingest *in = xcalloc(1, sizeof(*in));
    in->c = c;
    in->drain_ev = event_new(c->base, -1, 0, on_drain, in);
    store_on_state(c->store, on_store_state, in);
    return in;
}

void ingest_free(struct ingest *in)
{
    if (in == NULL)
        return;
    for (struct obs_item *it = in->head, *n; it; it = n) {
        n = it->next;
        item_free(it);
    }
    for (struct listener *l = in->listeners, *n; l; l = n) {
        n = l->next;
        free(l);
    }
    event_free(in->drain_ev);
    free(in);
}

int ingest_refuse_future(struct ingest *in, const struct status_event *obs, int64_t *ahead_ms)
{
    int64_t ahead = obs->updated_at - wall_ms();
    if (ahead <= in->c->cfg->max_clock_skew_ms)
        return 0;
    if (ahead_ms != NULL)
        *ahead_ms = ahead;
    in->c->metrics.events[obs->source][MO_REJECTED]++;
    in->c->metrics.events_rejected[obs->source][MR_FUTURE]++;
    int64_t mono = mono_ms();
    if (in->future_log_ms == 0 || mono - in->future_log_ms >= INGEST_FUTURE_LOG_MS) {
        log_warn("observation refused, updatedAt ahead of this clock",
                 "request=%s source=%s updated_at=%lld ahead_ms=%lld max_ms=%lld suppressed=%llu",
                 obs->request_id, proto_source_name(obs->source), (long long)obs->updated_at,
                 (long long)ahead, (long long)in->c->cfg->max_clock_skew_ms,
                 (unsigned long long)in->future_suppressed);
        in->future_log_ms = mono;
        in->future_suppressed = 0;
    } else {
        in->future_suppressed++;
    }
    return 1;
}

/* obs copied into a new item, or taken's members moved there (taken != NULL, obs == taken:
 * it is left empty); NULL when the copy ran out of memory or the clock refused it (cb told,
 * taken emptied). */
static struct obs_item *item_new(struct ingest *in, const struct status_event *obs,
                                 struct status_event *taken, int track, ingest_done_cb *cb,
                                 void *arg)
{
    if (ingest_refuse_future(in, obs, NULL)) {
        status_event_cleanup(taken); /* NULL-safe */
        if (cb)
            cb(arg, NULL, PROTO_STALE, NULL); /* nothing written: like a stale observation */
        return NULL;
    }
    struct obs_item *it = xcalloc(1, sizeof(*it));
    it->in = in;
    it->track = track;
    it->cb = cb;
    it->arg = arg;
    if (taken != NULL) {
        it->ev = *taken; /* a struct of owned pointers: moved, not copied */
        status_event_init(taken);
    } else if (status_event_copy(&it->ev, obs) != 0) {
        free(it);
        if (cb)
            cb(arg, "nomem", PROTO_STALE, NULL);
        return NULL;
    }
    return it;
}

static void submit_new(struct ingest *in, struct obs_item *it)
{
    if (it->cb == NULL && in->head != NULL) {
        enqueue(in, it); /* keep arrival order behind the backlog */
        return;
    }
    submit_item(it);
}

void ingest_submit(struct ingest *in, const struct status_event *obs, int track,
                   ingest_done_cb *cb, void *arg)
{
    struct obs_item *it = item_new(in, obs, NULL, track, cb, arg);
    if (it != NULL)
        submit_new(in, it);
}

void ingest_submit_take(struct ingest *in, struct status_event *obs, int track,
                        ingest_done_cb *cb, void *arg)
{
    struct obs_item *it = item_new(in, obs, obs, track, cb, arg);
    if (it != NULL)
        submit_new(in, it);
}

void ingest_rejected(struct ingest *in, enum proto_source src)
{
    in->c->metrics.events[src][MO_REJECTED]++;
    in->c->metrics.events_rejected[src][MR_MALFORMED]++;
}

static void listener_add(struct ingest *in, ingest_event_cb *fn, ingest_take_cb *take,
                         void *arg)
{
    struct listener *l = xcalloc(1, sizeof(*l));
    l->fn = fn;
    l->take = take;
    l->arg = arg;
    struct listener **pp = &in->listeners;
    while (*pp)
        pp = &(*pp)->next;
    *pp = l;
}

void ingest_on_event(struct ingest *in, ingest_event_cb *fn, void *arg)
{
    listener_add(in, fn, NULL, arg);
}

void ingest_on_event_take(struct ingest *in, ingest_take_cb *fn, void *arg)
{
    listener_add(in, NULL, fn, arg);
}
