/* depth.c - see depth.h. runs on: core thread.
 *
 * struct depth owns the timer only; each round is store/counts.c's, and its answer writes
 * the sums into struct metrics, so a round needs nothing of struct depth and may outlive it. */
#include "relay/depth.h"
#include "relay/common/util.h"
#include "relay/metrics.h"
#include "store/counts.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdlib.h>

struct depth {
    struct store *store;
    struct metrics *metrics;
    struct event *ev;
};

/* Queue depths and requests by status for /metrics: one pipelined round of ZCARDs every 2 s
 * (store/counts.h: cheap, O(1) each, summed over the partitions), so rendering /metrics never
 * waits for Redis. A gauge one of whose answers failed keeps its last value. The round's
 * answer writes into struct metrics (core's, which outlives the store), never into struct
 * depth, so an answer that comes while the store is freed needs nothing freed before it. */
static const char *const depth_kinds[] = {"due", "inflight", "dead", "poll", "pollu", "polls",
                                          "polln"};
#define DEPTH_GAUGES (ARRAY_LEN(depth_kinds) + METRICS_STATUSES)

/* The gauge of count i: the queue depths in depth_kinds order, then requests by status. */
static int64_t *depth_gauge(struct metrics *m, size_t i)
{
    int64_t *q[] = {&m->q_due,       &m->q_inflight,    &m->q_dead,     &m->tracked_polled,
                    &m->poll_urgent, &m->watch_settled, &m->watch_anon};
    return i < ARRAY_LEN(q) ? q[i] : &m->requests_by_status[i - ARRAY_LEN(q)];
}

static void on_depth_counts(void *arg, const int64_t *sum, const int *ok, size_t n)
{
    struct metrics *m = arg;
    for (size_t i = 0; i < n; i++)
        if (ok[i])
            *depth_gauge(m, i) = sum[i];
}

static void on_depths(evutil_socket_t fd, short what, void *arg)
{
    struct depth *dp = arg;
    if (!store_ready(dp->store))
        return;
    struct store_count_key keys[DEPTH_GAUGES];
    for (size_t i = 0; i < DEPTH_GAUGES; i++)
        keys[i] = i < ARRAY_LEN(depth_kinds)
                      ? (struct store_count_key){depth_kinds[i], NULL}
                      : (struct store_count_key){"st", metrics_statuses[i - ARRAY_LEN(depth_kinds)]};
    store_counts_zcard(dp->store, keys, DEPTH_GAUGES, on_depth_counts, dp->metrics);
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
