/* track.c - see track.h. runs on: core thread. */
#include "relay/ingest/track.h"
#include "relay/core.h"
#include "relay/common/util.h"
#include "relay/ingest/watch.h"
#include "store/keys.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct track_op {
    struct core *c;
    char **ids;
    size_t n;
    track_done_cb *cb;
    untrack_done_cb *ucb;
    void *arg;
};

static const struct store_script *script(const char *name)
{
    /* Scripts are immutable after first use; one per process. */
    static struct store_script track_sc, untrack_sc;
    struct store_script *sc = strcmp(name, "track") == 0 ? &track_sc : &untrack_sc;
    if (sc->name == NULL)
        store_script_init(sc, name);
    return sc;
}

static void op_free(struct track_op *op)
{
    for (size_t i = 0; i < op->n; i++)
        free(op->ids[i]);
    free(op->ids);
    free(op);
}

static void on_tracked(void *arg, const char *err, redisReply *r)
{
    struct track_op *op = arg;
    if (err == NULL)
        watch_kick(op->c->watch); /* the holder subscribes whatever the watch set gained */
    op->cb(op->arg, err, err == NULL && r->type == REDIS_REPLY_INTEGER ? (size_t)r->integer : 0);
    op_free(op);
}

int track_requests(struct core *c, const char *const *ids, size_t n, const char *metadata,
                   track_done_cb *cb, void *arg)
{
    const char *tag = store_tag(c->store);
    size_t argc = 2 + 2 * n + 6;
    struct watch_args wa;
    watch_args_get(c, &wa);
    const char **argv = xcalloc(argc, sizeof(*argv));
    char **keys = xcalloc(n + 2, sizeof(*keys));
    char nowbuf[24];
    snprintf(nowbuf, sizeof(nowbuf), "%lld", (long long)wall_ms());
    keys[0] = xmalloc(KEY_MAX);
    key_build(keys[0], KEY_MAX, tag, "poll", NULL, NULL);
    keys[1] = xmalloc(KEY_MAX);
    key_build(keys[1], KEY_MAX, tag, "all", NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        keys[i + 2] = xmalloc(KEY_MAX);
        key_build(keys[i + 2], KEY_MAX, tag, "req", ids[i], NULL);
    }
    size_t k = 0;
    for (size_t i = 0; i < n + 2; i++)
        argv[k++] = keys[i];
    argv[k++] = nowbuf;
    argv[k++] = metadata ? metadata : "";
    argv[k++] = tag;
    argv[k++] = wa.wttl;
    argv[k++] = wa.settled;
    argv[k++] = wa.ftail;
    for (size_t i = 0; i < n; i++)
        argv[k++] = ids[i];
    struct track_op *op = xcalloc(1, sizeof(*op));
    op->c = c;
    op->cb = cb;
    op->arg = arg;
    op->n = n;
    op->ids = xcalloc(n ? n : 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        op->ids[i] = xstrdup(ids[i]);
    int rc = store_eval(c->store, script("track"), on_tracked, op, (int)(n + 2), (int)k, argv,
                        NULL);
    for (size_t i = 0; i < n + 2; i++)
        free(keys[i]);
    free(keys);
    free(argv);
    if (rc != 0) {
        op_free(op);
        return -1;
    }
    return 0;
}

static void on_untracked(void *arg, const char *err, redisReply *r)
{
    struct track_op *op = arg;
    int found = err == NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    if (found)
        watch_kick(op->c->watch); /* the watch ended: unsubscribed through the sync */
    op->ucb(op->arg, err, found);
    op_free(op);
}

int untrack_request(struct core *c, const char *id, untrack_done_cb *cb, void *arg)
{
    char k_req[KEY_MAX], now[24];
    key_build(k_req, sizeof(k_req), store_tag(c->store), "req", id, NULL);
    snprintf(now, sizeof(now), "%lld", (long long)wall_ms());
    const char *argv[] = {k_req, id, store_tag(c->store), now};
    struct track_op *op = xcalloc(1, sizeof(*op));
    op->c = c;
    op->ucb = cb;
    op->arg = arg;
    op->n = 1;
    op->ids = xcalloc(1, sizeof(char *));
    op->ids[0] = xstrdup(id);
    if (store_eval(c->store, script("untrack"), on_untracked, op, 1, 4, argv, NULL) != 0) {
        op_free(op);
        return -1;
    }
    return 0;
}
