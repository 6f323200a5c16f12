/* counts.c - see counts.h: one store_gather of n x partitions ZCARDs. runs on: core thread. */
#include "store/counts.h"
#include "relay/common/util.h"
#include "store/gather.h"
#include "store/keys.h"
#include "store/command.h"

#include <stdlib.h>

struct round {
    store_counts_cb *cb;
    void *arg;
    size_t n;
    int64_t sum[STORE_COUNTS_MAX];
    int ok[STORE_COUNTS_MAX];
};

static int on_zcard(void *arg, unsigned i, const char *err, redisReply *r)
{
    struct round *rd = arg;
    if (err == NULL && r->type == REDIS_REPLY_INTEGER)
        rd->sum[i] += r->integer;
    else
        rd->ok[i] = 0;
    return 0; /* a failed count is that key's only */
}

static void on_counted(void *arg, const char *err)
{
    struct round *rd = arg;
    rd->cb(rd->arg, rd->sum, rd->ok, rd->n);
    free(rd);
}

void store_counts_zcard(struct store *s, const struct store_count_key *keys, size_t n,
                        store_counts_cb *cb, void *arg)
{
    struct round *rd = xcalloc(1, sizeof(*rd));
    rd->cb = cb;
    rd->arg = arg;
    rd->n = n < STORE_COUNTS_MAX ? n : STORE_COUNTS_MAX;
    for (size_t i = 0; i < rd->n; i++)
        rd->ok[i] = 1;
    struct store_gather *g = store_gather_new(s, on_zcard, on_counted, rd);
    char k[KEY_MAX];
    for (unsigned p = 0; p < store_partitions(s); p++) {
        for (size_t i = 0; i < rd->n; i++) {
            key_build(k, sizeof(k), store_part_tag(s, p), keys[i].kind, keys[i].a, NULL);
            const char *argv[] = {"ZCARD", k};
            if (store_gather_argv(g, (unsigned)i, 2, argv, NULL) != 0)
                rd->ok[i] = 0;
        }
    }
    store_gather_end(g);
}
