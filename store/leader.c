/* leader.c - see leader.h. runs on: core thread only. */
#include "store/leader.h"
#include "relay/common/util.h"
#include "store/keys.h"
#include "store/script_table.h"
#include "store/command.h"

#include <stdlib.h>

const char leader_err_reply[] = "unexpected reply";

enum sc_id { SC_RENEW = 0, SC_RELEASE, SC_N };
static const char *const sc_names[SC_N] = {"leader", "leader_release"};
static struct store_script scripts[SC_N]; /* script_table.h */

/* KEYS of both scripts: the lease, the websocket health. */
static void lease_keys(struct store *s, char *k1, char *k2)
{
    key_build(k1, KEY_MAX, store_tag(s), "leader", NULL, NULL);
    key_build(k2, KEY_MAX, store_tag(s), "wsok", NULL, NULL);
}

struct renew_op {
    leader_cb *cb;
    void *arg;
};

/* leader.lua's reply: {held, ws healthy}. */
static void on_renewed(void *arg, const char *err, redisReply *r)
{
    struct renew_op *op = arg;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements != 2))
        err = leader_err_reply;
    op->cb(op->arg, err, err == NULL && r->element[0]->integer == 1,
           err == NULL && r->element[1]->integer == 1);
    free(op);
}

/* ARGV holder, lease ms, "1" when healthy. */
int leader_renew(struct store *s, const char *holder, int64_t lease_ms, int healthy, leader_cb *cb,
                 void *arg)
{
    char k1[KEY_MAX], k2[KEY_MAX], ms[SCRIPT_NUM_MAX];
    lease_keys(s, k1, k2);
    const char *argv[] = {k1, k2, holder, script_num(ms, lease_ms), healthy ? "1" : "0"};
    struct renew_op *op = xcalloc(1, sizeof(*op));
    op->cb = cb;
    op->arg = arg;
    if (store_eval(s, script_table_get(scripts, sc_names, SC_RENEW), on_renewed, op, 2, 5, argv,
                   NULL) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

/* ARGV holder. */
int leader_release(struct store *s, const char *holder)
{
    char k1[KEY_MAX], k2[KEY_MAX];
    lease_keys(s, k1, k2);
    const char *argv[] = {k1, k2, holder};
    return store_eval(s, script_table_get(scripts, sc_names, SC_RELEASE), NULL, NULL, 2, 3, argv,
                      NULL);
}
