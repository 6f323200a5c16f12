/* ops.c - see ops.h: the op every Redis command of the hub carries, and the hub's deferred
 * free (after hub_free, by the last command in flight).
 * runs on: core thread. */
#include "relay/dash/ops.h"
#include "relay/common/util.h"
#include "relay/dash/table.h"

#include <stdio.h>
#include <stdlib.h>

int dash_enter(struct hub *h)
{
    h->pending--;
    if (!h->closing)
        return 0;
    if (h->pending == 0) {
        free(h->pos);
        dash_table_cleanup(h);
        free(h);
    }
    return 1;
}

struct op *dash_op_new(struct hub *h, uint64_t sess, uint32_t no, const char *id)
{
    struct op *op = xcalloc(1, sizeof(*op));
    op->h = h;
    op->sess = sess;
    op->no = no;
    if (id != NULL)
        snprintf(op->id, sizeof(op->id), "%s", id);
    return op;
}

struct hsub *dash_op_sub(struct op *op, struct hsess **xp)
{
    struct hsess *x = dash_sess_find(op->h, op->sess);
    *xp = x;
    return x != NULL && !x->closing ? dash_sub_find(x, op->no) : NULL;
}

struct hsub *dash_op_finish(struct op *op, struct hsess **xp)
{
    struct hub *h = op->h;
    struct hsub *u = dash_enter(h) ? NULL : dash_op_sub(op, xp);
    free(op);
    return u;
}
