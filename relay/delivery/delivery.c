/* delivery.c - see delivery.h. runs on: core thread.
 *
 * Partitions (docs/partitions.md): one fan-out per partition, sharing a record (struct
 * fanout_share) through which their leases spread over the processes; with more than one
 * partition this process renews its entry in {P}:members (store/members.lua) every
 * FANOUT_RENEW_MS, which tells the fan-outs how many processes are alive. One dispatcher
 * claims from every partition.
 *
 * Teardown order: the set is detached first (c->webhooks = NULL: late completions see the
 * service going away), then the fan-outs and the dispatcher that read it are freed, then the
 * set itself. */
#include "relay/delivery/delivery.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/delivery/dispatch.h"
#include "relay/delivery/fanout.h"
#include "relay/delivery/endpoints.h"
#include "store/deliveries.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>

#define MEMBER_LEASE_MS 1500

struct delivery {
    struct core *c;
    struct webhooks *w;
    struct dispatch *dp;
    struct fanout **fo; /* one per partition */
    unsigned nfo;
    struct fanout_share share;
    struct event *members_ev; /* several partitions only */
    int members_pending; /* a members.lua call in flight: d lives until it answers */
    int closing;
};

static void on_members(void *arg, const char *err, const char *msg, long long live)
{
    struct delivery *d = arg;
    d->members_pending = 0;
    if (d->closing) {
        free(d);
        return;
    }
    if (err == NULL && live > 0)
        d->share.live = (unsigned)live;
}

static void members_renew(struct delivery *d, int leave)
{
    if (dl_members(d->c->store, d->c->instance_id, wall_ms(), leave ? 0 : MEMBER_LEASE_MS,
                   leave ? NULL : on_members, leave ? NULL : d) == 0 && !leave)
        d->members_pending = 1;
}

static void on_members_tick(evutil_socket_t fd, short what, void *arg)
{
    struct delivery *d = arg;
    if (!d->members_pending && store_ready(d->c->store))
        members_renew(d, 0);
}

int delivery_start(struct core *c)
{
    struct delivery *d = xcalloc(1, sizeof(*d));
    d->c = c;
    d->w = webhooks_new(c);
    d->dp = dispatch_new(c, d->w);
    d->nfo = store_partitions(c->store);
    d->fo = xcalloc(d->nfo, sizeof(*d->fo));
    d->share = (struct fanout_share){.live = 1, .all = d->fo, .n = d->nfo};
    if (d->nfo > 1) {
        d->members_ev = event_new(c->base, -1, EV_PERSIST, on_members_tick, d);
        struct timeval tv = {0, FANOUT_RENEW_MS * 1000};
        event_add(d->members_ev, &tv);
        event_active(d->members_ev, EV_TIMEOUT, 0);
    }
    for (unsigned k = 0; k < d->nfo; k++)
        d->fo[k] = fanout_new(c, d->w, d->dp, k, d->nfo > 1 ? &d->share : NULL);
    c->delivery = d;
    return 0;
}

void delivery_stop(struct core *c)
{
    struct delivery *d = c->delivery;
    if (d == NULL)
        return;
    c->delivery = NULL;
    if (d->members_ev != NULL) {
        event_free(d->members_ev);
        if (store_ready(c->store))
            members_renew(d, 1); /* the others' share grows at once */
    }
    webhooks_detach(d->w);
    for (unsigned k = 0; k < d->nfo; k++)
        fanout_free(d->fo[k]);
    free(d->fo);
    dispatch_free(d->dp);
    webhooks_close(d->w);
    d->closing = 1;
    if (!d->members_pending)
        free(d);
}

int delivery_busy(const struct core *c)
{
    const struct delivery *d = c->delivery;
    if (d == NULL)
        return 0;
    if (dispatch_busy(d->dp))
        return 1;
    for (unsigned k = 0; k < d->nfo; k++)
        if (fanout_busy(d->fo[k]))
            return 1;
    return 0;
}

unsigned delivery_partitions_held(const struct core *c)
{
    const struct delivery *d = c->delivery;
    unsigned n = 0;
    for (unsigned k = 0; d != NULL && k < d->nfo; k++)
        n += fanout_leader(d->fo[k]) != 0;
    return n;
}

struct dispatch *delivery_dispatch(const struct core *c)
{
    return c->delivery != NULL ? c->delivery->dp : NULL;
}
