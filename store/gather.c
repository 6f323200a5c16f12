/* gather.c - see gather.h. The count of outstanding answers starts at 1 (the sender's own
 * share, given back by store_gather_end), so no answer arriving while commands are still
 * being sent can complete the gather early. runs on: core thread. */
#include "store/command.h"
#include "store/gather.h"
#include "relay/common/util.h"

#include <stdlib.h>

const char store_err_unsent[] = "redis_not_ready";
const char store_err_reply[] = "redis_unexpected_reply";

struct store_gather {
    struct store *s;
    store_gather_reply_fn *on_reply;
    store_gather_done_fn *done;
    void *arg;
    unsigned pending; /* answers awaited, plus 1 until store_gather_end */
    const char *err;  /* the first error, NULL while none */
};

/* What one command's store_cb gets: the gather and the index the caller gave. */
struct gather_cmd {
    struct store_gather *g;
    unsigned i;
};

struct store_gather *store_gather_new(struct store *s, store_gather_reply_fn *on_reply,
                                      store_gather_done_fn *done, void *arg)
{
    struct store_gather *g = xcalloc(1, sizeof(*g));
    *g = (struct store_gather){.s = s, .on_reply = on_reply, .done = done, .arg = arg,
                               .pending = 1};
    return g;
}

static void fail(struct store_gather *g, const char *err)
{
    if (g->err == NULL)
        g->err = err;
}

static void release(struct store_gather *g)
{
    if (--g->pending > 0)
        return;
    g->done(g->arg, g->err);
    free(g);
}

static void on_answer(void *arg, const char *err, redisReply *reply)
{
    struct gather_cmd *c = arg;
    struct store_gather *g = c->g;
    int rc = g->on_reply != NULL ? g->on_reply(g->arg, c->i, err, reply) : 0;
    if (err != NULL)
        fail(g, err);
    else if (rc != 0)
        fail(g, store_err_reply);
    free(c);
    release(g);
}

/* A command about to be sent: counted first, so an answer can never find the count at 0. */
static struct gather_cmd *cmd_new(struct store_gather *g, unsigned i)
{
    struct gather_cmd *c = xmalloc(sizeof(*c));
    *c = (struct gather_cmd){g, i};
    g->pending++;
    return c;
}

/* rc: the store's answer to the send. Not sent: uncount c and free it (the sender's share
 * keeps the count above 0). */
static int sent(struct store_gather *g, struct gather_cmd *c, int rc)
{
    if (rc == 0)
        return 0;
    free(c);
    g->pending--;
    fail(g, store_err_unsent);
    return -1;
}

int store_gather_argv(struct store_gather *g, unsigned i, int argc, const char **argv,
                      const size_t *lens)
{
    struct gather_cmd *c = cmd_new(g, i);
    return sent(g, c, store_cmdargv(g->s, on_answer, c, argc, argv, lens));
}

int store_gather_eval(struct store_gather *g, unsigned i, const struct store_script *sc,
                      int nkeys, int argc, const char **argv, const size_t *lens)
{
    struct gather_cmd *c = cmd_new(g, i);
    return sent(g, c, store_eval(g->s, sc, on_answer, c, nkeys, argc, argv, lens));
}

void store_gather_end(struct store_gather *g)
{
    release(g);
}
