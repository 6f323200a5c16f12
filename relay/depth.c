/* depth.c - see depth.h. runs on: core thread.
 *
 * struct depth owns the timer only. Each round is its own heap object (struct depth_round)
 * owned by its outstanding answers: the last answer writes the sums into struct metrics and
 * frees it, so a round needs nothing of struct depth and may outlive it. */
#include "relay/depth.h"
#include "relay/common/util.h"
#include "relay/metrics.h"
#include "store/keys.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdlib.h>

struct depth {
    struct store *store;
    struct metrics *metrics;
    struct event *ev;
};

/* Queue depths and requests by status for /metrics: one pipelined round of ZCARDs every 2 s
 * (cheap: O(1) each), so rendering /metrics never waits for Redis. With partitions each
 * gauge is the sum over the partitions' keys; a gauge one of whose answers failed keeps its
 * last value. */
#define DEPTH_GAUGES (7 + METRICS_STATUSES)
struct depth_round {
    int pending;
    int64_t *dst[DEPTH_GAUGES];
    int64_t sum[DEPTH_GAUGES];
    int failed[DEPTH_GAUGES];
    struct depth_item {
        struct depth_round *r;
        int i;
    } items[DEPTH_GAUGES];
};

static void depth_done(struct depth_round *d)
{
    if (--d->pending > 0)
        return;
    for (int i = 0; i < DEPTH_GAUGES; i++)
        if (!d->failed[i])
            *d->dst[i] = d->sum[i];
    free(d);
}

static void on_zcard(void *arg, const char *err, redisReply *r)
{
    struct depth_item *it = arg;
    if (err == NULL && r->type == REDIS_REPLY_INTEGER)
        it->r->sum[it->i] += r->integer;
    else
        it->r->failed[it->i] = 1;
    depth_done(it->r);
}

static void on_depths(evutil_socket_t fd, short what, void *arg)
{
    struct depth *dp = arg;
    if (!store_ready(dp->store))
        return;
    struct metrics *m = dp->metrics;
    char k[KEY_MAX];
    const struct {
        const char *kind;
        int64_t *dst;
    } q[] = {{"due", &m->q_due}, {"inflight", &m->q_inflight}, {"dead", &m->q_dead},
             {"poll", &m->tracked_polled}, {"pollu", &m->poll_urgent},
             {"polls", &m->watch_settled}, {"polln", &m->watch_anon}};
    struct depth_round *d = xcalloc(1, sizeof(*d));
    for (int i = 0; i < DEPTH_GAUGES; i++) {
        d->items[i] = (struct depth_item){d, i};
        d->dst[i] = i < (int)ARRAY_LEN(q) ? q[i].dst : &m->requests_by_status[i - ARRAY_LEN(q)];
    }
    d->pending = 1; /* this loop's own share: no answer frees the round before the end */
    for (unsigned p = 0; p < store_partitions(dp->store); p++) {
        const char *tag = store_part_tag(dp->store, p);
        for (int i = 0; i < DEPTH_GAUGES; i++) {
            if (i < (int)ARRAY_LEN(q))
                key_build(k, sizeof(k), tag, q[i].kind, NULL, NULL);
            else
                key_build(k, sizeof(k), tag, "st", metrics_statuses[i - ARRAY_LEN(q)], NULL);
            if (store_cmd(dp->store, on_zcard, &d->items[i], "ZCARD %s", k) == 0)
                d->pending++;
            else
                d->failed[i] = 1;
        }
    }
    depth_done(d); /* the loop's share */
}

struct depth *depth_new(struct event_base *base, struct store *s, struct metrics *m)
{
    struct depth *dp = xcalloc(1, sizeof(*dp));
    dp->store = s;
    dp->metrics = m;
    m->q_due = m->q_inflight = m->q_dead = -1;
    m->tracked_polled = m->poll_urgent = m->watch_settled = m->watch_anon = -1;
    dp->ev = event_new(base, -1, EV_PERSIST, on_depths, dp);
    struct timeval tv = {DEPTH_INTERVAL_MS / 1000, (DEPTH_INTERVAL_MS % 1000) * 1000};
    evtimer_add(dp->ev, &tv);
    return dp;
}

void depth_free(struct depth *dp)
{
    if (dp == NULL)
        return;
    if (dp->ev)
        event_free(dp->ev);
    free(dp);
}
