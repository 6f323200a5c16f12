/* ratelimit.c - see ratelimit.h. runs on: core thread only. */
#include "store/ratelimit.h"
#include "relay/common/util.h"
#include "store/keys.h"
#include "store/script_table.h"
#include "store/command.h"

#include <stdlib.h>

const char ratelimit_err_reply[] = "unexpected reply";

enum sc_id { SC_TAKE = 0, SC_GIVE, SC_N };
static const char *const sc_names[SC_N] = {"ratelimit_take", "ratelimit_give"};
static struct store_script scripts[SC_N]; /* script_table.h */

struct take_op {
    ratelimit_take_cb *cb;
    void *arg;
};

/* ratelimit_take.lua's reply: {granted, at ms, wait ms}. */
static void on_taken(void *arg, const char *err, redisReply *r)
{
    struct take_op *op = arg;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
                        r->element[0]->type != REDIS_REPLY_INTEGER ||
                        r->element[1]->type != REDIS_REPLY_INTEGER ||
                        r->element[2]->type != REDIS_REPLY_INTEGER))
        err = ratelimit_err_reply;
    if (err != NULL)
        op->cb(op->arg, err, 0, 0, 0);
    else
        op->cb(op->arg, NULL, (long)r->element[0]->integer, (int64_t)r->element[1]->integer,
               (int64_t)r->element[2]->integer);
    free(op);
}

/* KEYS {P}:rl:<wh>; ARGV limit, window ms, wanted. */
int ratelimit_take(struct store *s, const char *whid, long limit, int64_t window_ms,
                   long wanted, ratelimit_take_cb *cb, void *arg)
{
    char k[KEY_MAX], l[SCRIPT_NUM_MAX], w[SCRIPT_NUM_MAX], n[SCRIPT_NUM_MAX];
    key_build(k, sizeof(k), store_tag(s), "rl", whid, NULL);
    const char *argv[] = {k, script_num(l, limit), script_num(w, window_ms),
                          script_num(n, wanted)};
    struct take_op *op = xcalloc(1, sizeof(*op));
    op->cb = cb;
    op->arg = arg;
    if (store_eval(s, script_table_get(scripts, sc_names, SC_TAKE), on_taken, op, 1, 4, argv,
                   NULL) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

/* KEYS {P}:rl:<wh>; ARGV grant ms, count. */
int ratelimit_give(struct store *s, const char *whid, int64_t at, long n)
{
    char k[KEY_MAX], a[SCRIPT_NUM_MAX], c[SCRIPT_NUM_MAX];
    key_build(k, sizeof(k), store_tag(s), "rl", whid, NULL);
    const char *argv[] = {k, script_num(a, at), script_num(c, n)};
    return store_eval(s, script_table_get(scripts, sc_names, SC_GIVE), NULL, NULL, 1, 3, argv,
                      NULL);
}
