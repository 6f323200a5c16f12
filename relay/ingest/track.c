/* track.c - see track.h: the REST and dashboard side of store/watches.h's tracking calls (the
 * store splits the ids by partition and answers once), then the watched set is read again.
 * runs on: core thread. */
#include "relay/ingest/track.h"
#include "relay/core.h"
#include "relay/common/util.h"
#include "relay/ingest/watch.h"
#include "store/watches.h"

#include <stdlib.h>

struct track_op {
    struct core *c;
    track_done_cb *cb;
    untrack_done_cb *ucb;
    void *arg;
};

static void on_tracked(void *arg, const char *err, size_t created)
{
    struct track_op *op = arg;
    if (err == NULL || created > 0)
        watch_kick(op->c->watch); /* the holder subscribes whatever the watch set gained */
    op->cb(op->arg, err, err == NULL ? created : 0);
    free(op);
}

int track_requests(struct core *c, const char *const *ids, size_t n, const char *metadata,
                   track_done_cb *cb, void *arg)
{
    struct watches_windows w;
    watch_windows(c, &w);
    struct track_op *op = xcalloc(1, sizeof(*op));
    op->c = c;
    op->cb = cb;
    op->arg = arg;
    if (watches_track(c->store, &w, ids, n, metadata, on_tracked, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

static void on_untracked(void *arg, const char *err, int found)
{
    struct track_op *op = arg;
    if (found)
        watch_kick(op->c->watch); /* the watch ended: unsubscribed through the sync */
    op->ucb(op->arg, err, found);
    free(op);
}

int untrack_request(struct core *c, const char *id, untrack_done_cb *cb, void *arg)
{
    struct track_op *op = xcalloc(1, sizeof(*op));
    op->c = c;
    op->ucb = cb;
    op->arg = arg;
    struct watches_windows w;
    watch_windows(c, &w);
    if (watches_untrack(c->store, &w, id, on_untracked, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
}
