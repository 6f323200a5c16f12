/* fake_store.h - a stand-in for store/store.c in unit tests of the typed script modules
 * (store/polls.c, store/watches.c, included by the test): store_eval records each command
 * (script name, keys, arguments) and keeps its callback, which the test answers with a reply
 * it builds by hand (fake_answer); `heard` keeps what the module answered. The partition
 * count is the test's (fake_reset); tags are "{sr}" with one partition, "{sr:p<k>}" with
 * several, as store/keys.h names them.
 * No Redis, no event loop. runs on: the test process, one thread. */
#ifndef TESTS_FAKE_STORE_H
#define TESTS_FAKE_STORE_H

#include "store/keys.h"
#include "store/command.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char store_err_disconnected[] = "disconnected";
const char store_err_server[] = "server";

#define FAKE_MAX_CALLS 32
#define FAKE_MAX_ARGS 64

struct fake_call {
    char script[32];
    int nkeys, argc;
    char argv[FAKE_MAX_ARGS][KEY_MAX];
    store_cb *cb;
    void *arg;
    int answered;
};

static struct {
    unsigned np;
    char tags[KEY_MAX_PARTITIONS][KEY_TAG_MAX];
    struct fake_call calls[FAKE_MAX_CALLS];
    int ncalls;
} fake;

static void fake_reset(unsigned np)
{
    memset(&fake, 0, sizeof(fake));
    fake.np = np;
    for (unsigned k = 0; k < np; k++)
        key_part_tag(fake.tags[k], sizeof(fake.tags[k]), "sr", k, np);
}

unsigned store_partitions(const struct store *s)
{
    return fake.np;
}

const char *store_part_tag(const struct store *s, unsigned k)
{
    return fake.tags[k];
}

const char *store_tag(const struct store *s)
{
    return "{sr}";
}

const char *store_tag_of(const struct store *s, const char *id)
{
    return fake.tags[key_partition(id, strlen(id), fake.np)];
}

int store_ready(const struct store *s)
{
    return 1;
}

void store_script_init(struct store_script *sc, const char *name)
{
    sc->name = name;
}

int store_eval(struct store *s, const struct store_script *sc, store_cb *cb, void *arg,
               int nkeys, int argc, const char **argv, const size_t *lens)
{
    if (fake.ncalls == FAKE_MAX_CALLS || argc > FAKE_MAX_ARGS)
        abort();
    struct fake_call *c = &fake.calls[fake.ncalls++];
    snprintf(c->script, sizeof(c->script), "%s", sc->name);
    c->nkeys = nkeys;
    c->argc = argc;
    for (int i = 0; i < argc; i++)
        snprintf(c->argv[i], sizeof(c->argv[i]), "%.*s",
                 lens != NULL ? (int)lens[i] : (int)strlen(argv[i]), argv[i]);
    c->cb = cb;
    c->arg = arg;
    return 0;
}

/* What the test's callbacks heard (each test fills what it needs). */
static struct {
    int calls;
    const char *err;
    long long count;
    char ids[8][64];
    size_t n;
} heard;

/* ---- replies built by hand ------------------------------------------------------------- */

struct fake_pool {
    redisReply nodes[128];
    redisReply *arrs[32][FAKE_MAX_ARGS];
    size_t nn, na;
};

static redisReply *fake_int(struct fake_pool *p, long long v)
{
    redisReply *r = &p->nodes[p->nn++];
    memset(r, 0, sizeof(*r));
    r->type = REDIS_REPLY_INTEGER;
    r->integer = v;
    return r;
}

static redisReply *fake_str(struct fake_pool *p, const char *s)
{
    redisReply *r = &p->nodes[p->nn++];
    memset(r, 0, sizeof(*r));
    r->type = REDIS_REPLY_STRING;
    r->str = (char *)s;
    r->len = strlen(s);
    return r;
}

/* An array of n elements (redisReply *). */
static redisReply *fake_arr(struct fake_pool *p, size_t n, ...)
{
    redisReply *r = &p->nodes[p->nn++];
    memset(r, 0, sizeof(*r));
    r->type = REDIS_REPLY_ARRAY;
    r->element = p->arrs[p->na++];
    r->elements = n;
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        r->element[i] = va_arg(ap, redisReply *);
    va_end(ap);
    return r;
}

/* Answer command i (once) with reply r, or with err (r NULL). */
static void fake_answer(int i, const char *err, redisReply *r)
{
    struct fake_call *c = &fake.calls[i];
    if (c->answered)
        abort();
    c->answered = 1;
    if (c->cb != NULL)
        c->cb(c->arg, err, r);
}

#endif
