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
    size_t pending;  /* track: partition calls not answered yet */
    size_t created;  /* track: newly tracked ids so far */
    const char *err; /* track: the first error of a partition call */
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

/* One call per partition holding some of the ids (one call with N = 1); the caller hears
 * once, after the last: the sum of the newly tracked, or the first error. */
static void on_tracked(void *arg, const char *err, redisReply *r)
{
    struct track_op *op = arg;
    if (err == NULL && r != NULL && r->type == REDIS_REPLY_INTEGER)
        op->created += (size_t)r->integer;
    if (err != NULL && op->err == NULL)
        op->err = err;
    if (--op->pending > 0)
        return;
    if (op->err == NULL || op->created > 0)
        watch_kick(op->c->watch); /* the holder subscribes whatever the watch set gained */
    op->cb(op->arg, op->err, op->err == NULL ? op->created : 0);
    op_free(op);
}

/* track.lua on one partition for ids[0..n) (all of that partition). Returns store_eval's. */
static int track_part(struct core *c, struct track_op *op, const char *tag,
                      const char *const *ids, size_t n, const char *metadata,
                      const struct watch_args *wa, const char *nowbuf)
{
    size_t argc = 2 + 2 * n + 6;
    const char **argv = xcalloc(argc, sizeof(*argv));
    char **keys = xcalloc(n + 2, sizeof(*keys));
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
    argv[k++] = wa->wttl;
    argv[k++] = wa->settled;
    argv[k++] = wa->ftail;
    for (size_t i = 0; i < n; i++)
        argv[k++] = ids[i];
    int rc = store_eval(c->store, script("track"), on_tracked, op, (int)(n + 2), (int)k, argv,
                        NULL);
    for (size_t i = 0; i < n + 2; i++)
        free(keys[i]);
    free(keys);
    free(argv);
    return rc;
}

int track_requests(struct core *c, const char *const *ids, size_t n, const char *metadata,
                   track_done_cb *cb, void *arg)
{
    struct watch_args wa;
    watch_args_get(c, &wa);
    char nowbuf[24];
    snprintf(nowbuf, sizeof(nowbuf), "%lld", (long long)wall_ms());
    struct track_op *op = xcalloc(1, sizeof(*op));
    op->c = c;
    op->cb = cb;
    op->arg = arg;
    op->n = n;
    op->ids = xcalloc(n ? n : 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        op->ids[i] = xstrdup(ids[i]);
    unsigned np = store_partitions(c->store);
    if (np <= 1) { /* every id in partition 0: one call, as before partitions */
        op->pending = 1;
        if (track_part(c, op, store_tag(c->store), ids, n, metadata, &wa, nowbuf) != 0) {
            op_free(op);
            return -1;
        }
        return 0;
    }
    /* the ids of each partition, in the order given; pending counts the calls in flight
     * plus one held by this loop, so no callback finishes the op before every call is out */
    const char **part = xcalloc(n ? n : 1, sizeof(*part));
    op->pending = 1;
    size_t sent = 0;
    for (unsigned k = 0; k < np; k++) {
        size_t m = key_ids_in(k, np, ids, n, part);
        if (m == 0)
            continue;
        op->pending++;
        if (track_part(c, op, store_part_tag(c->store, k), part, m, metadata, &wa,
                       nowbuf) != 0) {
            op->pending--;
            if (op->err == NULL)
                op->err = store_err_disconnected;
            break;
        }
        sent++;
    }
    free(part);
    if (sent == 0) { /* nothing went out: the caller hears -1, as for one call */
        op_free(op);
        return -1;
    }
    on_tracked(op, NULL, NULL); /* the loop's own share (no reply) */
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
    const char *tag = store_tag_of(c->store, id);
    key_build(k_req, sizeof(k_req), tag, "req", id, NULL);
    snprintf(now, sizeof(now), "%lld", (long long)wall_ms());
    const char *argv[] = {k_req, id, tag, now};
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
