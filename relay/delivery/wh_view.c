/* wh_view.c - see wh_view.h. runs on: core thread. */
#include "relay/delivery/wh_view.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/delivery/endpoint.h"
#include "relay/delivery/endpoints.h"
#include "store/deliveries.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "id[:flags],..." of w's endpoints that are not deleted, malloc'd. */
static char *view_build(struct webhooks *w)
{
    size_t n = webhooks_count(w);
    size_t cap = 1 + n * (WH_ID_MAX + 4);
    char *out = xmalloc(cap);
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const struct webhook *wh = webhooks_at(w, i);
        if (wh->deleted)
            continue;
        len += (size_t)snprintf(out + len, cap - len, "%s%s%s%s%s", len > 0 ? "," : "", wh->id,
                                wh->latest || !wh->enabled ? ":" : "", wh->latest ? "l" : "",
                                wh->enabled ? "" : "d");
    }
    return out;
}

const char *wh_view_of(struct core *c, struct webhooks *w)
{
    /* built once per loaded set (every load drops it), not per script call */
    if (webhooks_view(w) == NULL)
        webhooks_view_keep(w, view_build(w));
    return webhooks_view(w);
}

static void on_health(void *arg, const char *err, const char *msg, const struct dl_pairs *res)
{
    struct core *c = arg;
    if (err != NULL) {
        if (err == store_err_server)
            log_warn("webhook endpoint health not written", "err=\"%s\"", msg);
        return; /* the next failure or success writes it again */
    }
    int reload = 0;
    for (size_t i = 0; i < res->n; i++) {
        log_warn("webhook endpoint disabled", "webhook=%s reason=%s", res->v[i].id,
                 res->v[i].val);
        c->metrics.wh_endpoints_disabled++;
        reload = 1;
    }
    if (reload && c->webhooks != NULL)
        webhooks_reload(c->webhooks, NULL, NULL);
    if (reload)
        dl_disabled_flush(c->store); /* their endpoint.disabled events (several partitions) */
}

void wh_view_health(struct core *c, const struct dl_pairs *p)
{
    dl_health(c->store, wall_ms(), c->cfg->disable_after_ms, p, on_health, c);
}
