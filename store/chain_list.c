/* chain_list.c - see chain_list.h. runs on: core thread. */
#include "store/chain_list.h"
#include "relay/common/util.h"
#include "store/gather.h"
#include "store/keys.h"
#include "store/command.h"

#include <stdlib.h>

struct get_op {
    store_chain_list_cb *cb;
    void *arg;
};

/* HMGET body at. */
static void on_get(void *arg, const char *err, redisReply *r)
{
    struct get_op *op = arg;
    struct store_chain_list cl = {0};
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements != 2))
        err = store_err_reply;
    if (err == NULL) {
        const redisReply *body = r->element[0], *at = r->element[1];
        if (body->type == REDIS_REPLY_STRING)
            cl.body = body->str, cl.body_len = body->len;
        if (at->type == REDIS_REPLY_STRING)
            cl.has_at = 1, cl.at_ms = strtoll(at->str, NULL, 10);
    }
    op->cb(op->arg, err, err == NULL ? &cl : NULL);
    free(op);
}

int store_chain_list_get(struct store *s, store_chain_list_cb *cb, void *arg)
{
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag(s), "chains", NULL, NULL);
    struct get_op *op = xmalloc(sizeof(*op));
    *op = (struct get_op){cb, arg};
    if (store_cmd(s, on_get, op, "HMGET %s body at", k) != 0) {
        free(op);
        return -1;
    }
    return 0;
}
