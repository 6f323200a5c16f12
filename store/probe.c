/* probe.c - see probe.h. runs on: core thread. */
#include "store/probe.h"
#include "relay/common/util.h"
#include "store/command.h"

#include <stdlib.h>

struct probe {
    store_probe_cb *cb;
    void *arg;
};

static void on_answer(void *arg, const char *err, redisReply *reply)
{
    struct probe *p = arg;
    p->cb(p->arg, err);
    free(p);
}

int store_probe(struct store *s, store_probe_cb *cb, void *arg)
{
    struct probe *p = xmalloc(sizeof(*p));
    *p = (struct probe){cb, arg};
    if (store_cmd(s, on_answer, p, "EXISTS %s:readyz", store_tag(s)) != 0) {
        free(p);
        return -1;
    }
    return 0;
}
