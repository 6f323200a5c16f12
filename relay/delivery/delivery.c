/* delivery.c - see delivery.h. runs on: core thread.
 *
 * Teardown order: the set is detached first (c->webhooks = NULL: late completions see the
 * service going away), then the fan-out and the dispatcher that read it are freed, then the
 * set itself. */
#include "relay/delivery/delivery.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/delivery/dispatch.h"
#include "relay/delivery/fanout.h"
#include "relay/delivery/endpoints.h"

#include <stdlib.h>

struct delivery {
    struct webhooks *w;
    struct dispatch *dp;
    struct fanout *fo;
};

int delivery_start(struct core *c)
{
    struct delivery *d = xcalloc(1, sizeof(*d));
    d->w = webhooks_new(c);
    d->dp = dispatch_new(c, d->w);
    d->fo = fanout_new(c, d->w, d->dp);
    c->delivery = d;
    return 0;
}

void delivery_stop(struct core *c)
{
    struct delivery *d = c->delivery;
    if (d == NULL)
        return;
    c->delivery = NULL;
    webhooks_detach(d->w);
    fanout_free(d->fo);
    dispatch_free(d->dp);
    webhooks_close(d->w);
    free(d);
}

int delivery_busy(const struct core *c)
{
    const struct delivery *d = c->delivery;
    return d != NULL && (dispatch_busy(d->dp) || fanout_busy(d->fo));
}

struct dispatch *delivery_dispatch(const struct core *c)
{
    return c->delivery != NULL ? c->delivery->dp : NULL;
}
