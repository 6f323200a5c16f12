/* reply_pool.h - hiredis replies built by hand for the unit tests of the store's readers:
 * nodes and element arrays from a pool on the caller's stack (nothing to free). Include
 * after <cmocka.h>'s prerequisites and a store header (for redisReply).
 * runs on: the test process. */
#ifndef TESTS_UNIT_REPLY_POOL_H
#define TESTS_UNIT_REPLY_POOL_H

#include <stdarg.h>
#include <string.h>

#define RP_MAXN 16

struct rpool {
    redisReply nodes[128];
    redisReply *arrs[64][RP_MAXN];
    size_t nn, na;
};

static inline redisReply *rp_node(struct rpool *p, int type)
{
    redisReply *r = &p->nodes[p->nn++];
    memset(r, 0, sizeof(*r));
    r->type = type;
    return r;
}

static inline redisReply *rp_str(struct rpool *p, const char *s)
{
    redisReply *r = rp_node(p, REDIS_REPLY_STRING);
    r->str = (char *)s;
    r->len = strlen(s);
    return r;
}

static inline redisReply *rp_int(struct rpool *p, long long v)
{
    redisReply *r = rp_node(p, REDIS_REPLY_INTEGER);
    r->integer = v;
    return r;
}

static inline redisReply *rp_nil(struct rpool *p)
{
    return rp_node(p, REDIS_REPLY_NIL);
}

static inline redisReply *rp_arr(struct rpool *p, size_t n, ...)
{
    redisReply *r = rp_node(p, REDIS_REPLY_ARRAY);
    r->element = p->arrs[p->na++];
    r->elements = n;
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        r->element[i] = va_arg(ap, redisReply *);
    va_end(ap);
    return r;
}

#endif
