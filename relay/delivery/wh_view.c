/* wh_view.c - see wh_view.h. runs on: core thread. */
#include "relay/delivery/wh_view.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/delivery/endpoint.h"
#include "relay/delivery/endpoints.h"
#include "store/keys.h"
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

char *wh_view_tag(struct core *c, struct webhooks *w, unsigned part)
{
    struct store *s = c->store;
    if (store_partitions(s) <= 1)
        return xstrdup(store_tag(s));
    /* built once per loaded set (every load drops it), not per script call */
    if (webhooks_view(w) == NULL)
        webhooks_view_keep(w, view_build(w));
    const char *tags = store_wh_tag(s, part), *view = webhooks_view(w);
    size_t nt = strlen(tags), nv = strlen(view);
    char *out = xmalloc(nt + 1 + nv + 1);
    memcpy(out, tags, nt);
    out[nt] = ' ';
    memcpy(out + nt + 1, view, nv + 1);
    return out;
}

static void on_health(void *arg, const char *err, redisReply *r)
{
    struct core *c = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        if (err == store_err_server)
            log_warn("webhook endpoint health not written", "err=\"%s\"", r->str);
        return; /* the next failure or success writes it again */
    }
    int reload = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        log_warn("webhook endpoint disabled", "webhook=%s reason=%s", r->element[i]->str,
                 r->element[i + 1]->str);
        c->metrics.wh_endpoints_disabled++;
        reload = 1;
    }
    if (reload && c->webhooks != NULL)
        webhooks_reload(c->webhooks, NULL, NULL);
}

void wh_view_health(struct core *c, const redisReply *r, size_t from)
{
    if (r->type != REDIS_REPLY_ARRAY || from >= r->elements)
        return;
    size_t npairs = (r->elements - from) / 2;
    if (npairs == 0)
        return;
    char kv[KEY_MAX], now[24], dis[24];
    key_build(kv, sizeof(kv), store_tag(c->store), "whv", NULL, NULL);
    snprintf(now, sizeof(now), "%lld", (long long)wall_ms());
    snprintf(dis, sizeof(dis), "%lld", (long long)c->cfg->disable_after_ms);
    int argc = 4 + 2 * (int)npairs;
    const char **argv = xmalloc(sizeof(char *) * (size_t)argc);
    argv[0] = kv, argv[1] = store_tag(c->store), argv[2] = now, argv[3] = dis;
    for (size_t i = 0; i < 2 * npairs; i++) {
        const redisReply *e = r->element[from + i];
        argv[4 + i] = e->type == REDIS_REPLY_STRING ? e->str : "";
    }
    static struct store_script sc;
    if (sc.name == NULL)
        store_script_init(&sc, "wh_health");
    store_eval(c->store, &sc, on_health, c, 1, argc, argv, NULL);
    free(argv);
}
