/* feed.c - see feed.h. Ownership: each call with a callback allocates one op (the callback
 * argument), freed after its callback ran; the argument vectors are built on the stack or in
 * buffers freed before the call returns (store_eval copies them).
 * runs on: core thread only. */
#include "store/feed.h"
#include "relay/common/util.h"
#include "store/keys.h"
#include "store/script_table.h"
#include "store/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char feed_err_reply[] = "unexpected reply";

enum sc_id { SC_LEASE = 0, SC_SEEN, SC_COMMIT, SC_MARK, SC_RELEASE, SC_RESTORE, SC_N };
static const char *const sc_names[SC_N] = {"feed_lease", "feed_seen", "feed_commit", "feed_mark",
                                           "leader_release", "feed_restore"};
static struct store_script scripts[SC_N]; /* script_table.h */

static const struct store_script *script(enum sc_id id)
{
    return script_table_get(scripts, sc_names, id);
}

static void dkey(struct store *s, char *buf, const char *kind, const char *a)
{
    key_build(buf, KEY_MAX, store_tag(s), kind, a, NULL);
}

struct op {
    feed_lease_cb *lease_cb;
    feed_seen_cb *seen_cb;
    feed_commit_cb *commit_cb;
    feed_backfill_cb *bf_cb;
    void *arg;
};

static struct op *op_new(void *arg)
{
    struct op *op = xcalloc(1, sizeof(*op));
    op->arg = arg;
    return op;
}

/* ---- the lease ----------------------------------------------------------------------------- */

static void on_lease(void *arg, const char *err, redisReply *r)
{
    struct op *op = arg;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
                        r->element[2]->type != REDIS_REPLY_INTEGER))
        err = feed_err_reply;
    op->lease_cb(op->arg, err, err == NULL && r->element[0]->integer == 1,
                 err == NULL && r->element[1]->integer == 1,
                 err == NULL ? (int64_t)r->element[2]->integer : -1);
    free(op);
}

int feed_lease(struct store *s, const char *holder, int64_t lease_ms, int take, feed_lease_cb *cb,
               void *arg)
{
    char k1[KEY_MAX], k2[KEY_MAX], k3[KEY_MAX], ms[SCRIPT_NUM_MAX];
    dkey(s, k1, "feedl", NULL);
    dkey(s, k2, "feedc", NULL);
    dkey(s, k3, "feedok", NULL);
    const char *argv[] = {k1, k2, k3, holder, script_num(ms, lease_ms), take ? "1" : "0"};
    struct op *op = op_new(arg);
    op->lease_cb = cb;
    if (store_eval(s, script(SC_LEASE), on_lease, op, 3, 6, argv, NULL) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

int feed_release(struct store *s, const char *holder)
{
    char k[KEY_MAX];
    dkey(s, k, "feedl", NULL);
    /* compare and delete in one step: leader_release.lua on the feed lease (its second key
     * is the lease again: the health flag stays until it expires, so the next holder takes
     * over without a burst of polls) */
    const char *argv[] = {k, k, holder};
    return store_eval(s, script(SC_RELEASE), NULL, NULL, 2, 3, argv, NULL);
}

/* ---- pages --------------------------------------------------------------------------------- */

static char *member(const struct feed_item *it)
{
    return xasprintf("%s:%lld", it->id, (long long)it->updated_ms);
}

static void on_seen(void *arg, const char *err, redisReply *r)
{
    struct op *op = arg;
    if (err == NULL && r->type != REDIS_REPLY_ARRAY)
        err = feed_err_reply;
    unsigned char *seen = NULL;
    size_t n = 0;
    if (err == NULL) {
        n = r->elements;
        seen = xcalloc(n + 1, 1);
        for (size_t i = 0; i < n; i++)
            seen[i] = r->element[i]->type == REDIS_REPLY_INTEGER && r->element[i]->integer == 1;
    }
    op->seen_cb(op->arg, err, seen, n);
    free(seen);
    free(op);
}

int feed_seen(struct store *s, const struct feed_item *items, size_t n, feed_seen_cb *cb,
              void *arg)
{
    char k[KEY_MAX];
    dkey(s, k, "feeds", NULL);
    const char **argv = xcalloc(n + 1, sizeof(*argv));
    argv[0] = k;
    for (size_t i = 0; i < n; i++)
        argv[1 + i] = member(&items[i]);
    struct op *op = op_new(arg);
    op->seen_cb = cb;
    int rc = store_eval(s, script(SC_SEEN), on_seen, op, 1, (int)n + 1, argv, NULL);
    for (size_t i = 0; i < n; i++)
        free((char *)argv[1 + i]);
    free(argv);
    if (rc != 0)
        free(op);
    return rc;
}

static void on_commit(void *arg, const char *err, redisReply *r)
{
    struct op *op = arg;
    if (err == NULL && r->type != REDIS_REPLY_INTEGER)
        err = feed_err_reply;
    op->commit_cb(op->arg, err, err == NULL && r->integer == 1);
    free(op);
}

int feed_commit(struct store *s, const struct feed_commit *q, feed_commit_cb *cb, void *arg)
{
    char k[4][KEY_MAX], top[SCRIPT_NUM_MAX], ov[SCRIPT_NUM_MAX], hl[SCRIPT_NUM_MAX];
    dkey(s, k[0], "feedl", NULL);
    dkey(s, k[1], "feedc", NULL);
    dkey(s, k[2], "feeds", NULL);
    dkey(s, k[3], "feedok", NULL);
    size_t argc = 8 + 2 * q->n;
    const char **argv = xcalloc(argc, sizeof(*argv));
    char **owned = xcalloc(2 * q->n + 1, sizeof(*owned));
    argv[0] = k[0], argv[1] = k[1], argv[2] = k[2], argv[3] = k[3];
    argv[4] = q->holder;
    argv[5] = script_num(top, q->top_ms);
    argv[6] = script_num(ov, q->trim_ms);
    argv[7] = script_num(hl, q->health_ms);
    for (size_t i = 0; i < q->n; i++) {
        owned[2 * i] = xasprintf("%lld", (long long)q->items[i].updated_ms);
        owned[2 * i + 1] = member(&q->items[i]);
        argv[8 + 2 * i] = owned[2 * i];
        argv[9 + 2 * i] = owned[2 * i + 1];
    }
    struct op *op = op_new(arg);
    op->commit_cb = cb;
    int rc = store_eval(s, script(SC_COMMIT), on_commit, op, 4, (int)argc, argv, NULL);
    for (size_t i = 0; i < 2 * q->n; i++)
        free(owned[i]);
    free(owned);
    free(argv);
    if (rc != 0)
        free(op);
    return rc;
}

int feed_mark(struct store *s, const char *id)
{
    char k[KEY_MAX];
    const char *tag = store_tag_of(s, id);
    key_build(k, sizeof(k), tag, "req", id, NULL);
    const char *argv[] = {k, tag, id};
    return store_eval(s, script(SC_MARK), NULL, NULL, 1, 3, argv, NULL);
}

int feed_restore(struct store *s, int64_t now_ms, int max, int64_t due_active_ms,
                 int64_t due_settled_ms, char active_tier)
{
    if (store_partitions(s) != 1)
        return 0; /* feed-covered requests keep their tiers (store/watch_lib.lua) */
    char k1[KEY_MAX], k2[KEY_MAX], k3[KEY_MAX], ms[SCRIPT_NUM_MAX], n[SCRIPT_NUM_MAX],
        da[SCRIPT_NUM_MAX], ds[SCRIPT_NUM_MAX];
    dkey(s, k1, "feedok", NULL);
    dkey(s, k2, "watch", NULL);
    dkey(s, k3, "feedr", NULL);
    const char t[2] = {active_tier == 'u' ? 'u' : 'a', 0};
    const char *argv[] = {k1, k2, k3, script_num(ms, now_ms), script_num(n, max), store_tag(s),
                          script_num(da, due_active_ms), script_num(ds, due_settled_ms), t};
    return store_eval(s, script(SC_RESTORE), NULL, NULL, 3, 9, argv, NULL);
}

/* ---- backfill progress ---------------------------------------------------------------------- */

int feed_backfill_put(struct store *s, const char *id, const struct feed_backfill *b,
                      int64_t ttl_ms)
{
    char k[KEY_MAX];
    dkey(s, k, "bf", id);
    char v[6][SCRIPT_NUM_MAX], ttl[SCRIPT_NUM_MAX];
    const char *argv[] = {"HSET",    k,
                          "since",   script_num(v[0], b->since_ms),
                          "until",   script_num(v[1], b->until_ms),
                          "created", script_num(v[2], b->created_ms),
                          "pages",   script_num(v[3], b->pages),
                          "items",   script_num(v[4], b->items),
                          "applied", script_num(v[5], b->applied),
                          "done",    b->done ? "1" : "0",
                          "error",   b->error ? b->error : ""};
    if (store_cmdargv(s, NULL, NULL, (int)ARRAY_LEN(argv), argv, NULL) != 0)
        return -1;
    const char *ex[] = {"PEXPIRE", k, script_num(ttl, ttl_ms)};
    return store_cmdargv(s, NULL, NULL, 3, ex, NULL);
}

static int64_t num_field(const char *v)
{
    return v != NULL ? strtoll(v, NULL, 10) : 0;
}

static void on_bf(void *arg, const char *err, redisReply *r)
{
    struct op *op = arg;
    if (err == NULL && r->type != REDIS_REPLY_ARRAY)
        err = feed_err_reply;
    struct feed_backfill b = {0};
    int found = 0;
    for (size_t i = 0; err == NULL && i + 1 < r->elements; i += 2) {
        const char *f = r->element[i]->str, *v = r->element[i + 1]->str;
        if (f == NULL || v == NULL)
            continue;
        found = 1;
        if (strcmp(f, "since") == 0)
            b.since_ms = num_field(v);
        else if (strcmp(f, "until") == 0)
            b.until_ms = num_field(v);
        else if (strcmp(f, "created") == 0)
            b.created_ms = num_field(v);
        else if (strcmp(f, "pages") == 0)
            b.pages = num_field(v);
        else if (strcmp(f, "items") == 0)
            b.items = num_field(v);
        else if (strcmp(f, "applied") == 0)
            b.applied = num_field(v);
        else if (strcmp(f, "done") == 0)
            b.done = strcmp(v, "1") == 0;
        else if (strcmp(f, "error") == 0)
            b.error = v;
    }
    op->bf_cb(op->arg, err, found ? &b : NULL);
    free(op);
}

int feed_backfill_get(struct store *s, const char *id, feed_backfill_cb *cb, void *arg)
{
    char k[KEY_MAX];
    dkey(s, k, "bf", id);
    const char *argv[] = {"HGETALL", k};
    struct op *op = op_new(arg);
    op->bf_cb = cb;
    if (store_cmdargv(s, on_bf, op, 2, argv, NULL) != 0) {
        free(op);
        return -1;
    }
    return 0;
}
