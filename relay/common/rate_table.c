/* rate_table.c - see rate_table.h. runs on: the caller's thread.
 *
 * Levels are kept in "token-milliseconds": one token is 60000 units and a bucket gains per_min
 * units every millisecond, so refills are exact integer arithmetic. */
#include "relay/common/rate_table.h"
#include "relay/common/siphash.h"
#include "relay/common/util.h"

#include <stdlib.h>
#include <string.h>

#define UNIT 60000 /* units per token: per_min tokens a minute = per_min units a ms */
#define PROBE 8

struct bucket {
    char key[RATE_TABLE_KEY_MAX]; /* "" = free slot */
    int64_t level;                /* units at time `at` */
    int64_t at;
};

struct rate_table {
    struct sipkey key;    /* random per table: keys (client addresses) cannot be made to collide */
    int64_t per_min, cap; /* cap = per_min * UNIT */
    size_t mask;
    struct bucket *slots;
    struct bucket overflow;
};

struct rate_table *rate_table_new(int64_t per_min, size_t slots)
{
    struct rate_table *t = xcalloc(1, sizeof(*t));
    sipkey_random(&t->key);
    size_t n = 16;
    while (n < slots)
        n <<= 1;
    t->per_min = per_min > 0 ? per_min : 0;
    t->cap = t->per_min * UNIT;
    t->mask = n - 1;
    t->slots = xcalloc(n, sizeof(*t->slots));
    t->overflow.level = t->cap; /* starts full, like every bucket */
    return t;
}

void rate_table_free(struct rate_table *t)
{
    if (t == NULL)
        return;
    free(t->slots);
    free(t);
}

/* b's level at now (refilled, capped). */
static int64_t level_now(const struct rate_table *t, const struct bucket *b, int64_t now)
{
    int64_t dt = now > b->at ? now - b->at : 0;
    if (t->per_min > 0 && dt >= (t->cap - b->level) / t->per_min + 1)
        return t->cap;
    int64_t l = b->level + dt * t->per_min;
    return l > t->cap ? t->cap : l;
}

static uint32_t hash_key(const struct rate_table *t, const char *s)
{
    return (uint32_t)siphash13(&t->key, s, strlen(s));
}

int rate_table_take(struct rate_table *t, const char *key, int64_t now_ms)
{
    if (t->per_min == 0)
        return 60;
    char k[RATE_TABLE_KEY_MAX];
    size_t kl = strlen(key);
    if (kl >= sizeof(k))
        kl = sizeof(k) - 1;
    memcpy(k, key, kl);
    k[kl] = '\0';
    if (k[0] == '\0') /* "" marks a free slot: give the empty key a name */
        memcpy(k, "-", 2);

    struct bucket *b = NULL, *spare = NULL;
    size_t h = hash_key(t, k);
    for (size_t i = 0; i < PROBE; i++) {
        struct bucket *s = &t->slots[(h + i) & t->mask];
        if (strcmp(s->key, k) == 0) {
            b = s;
            break;
        }
        if (spare == NULL && (s->key[0] == '\0' || level_now(t, s, now_ms) == t->cap))
            spare = s; /* free, or full again: forgetting it changes nothing */
    }
    if (b == NULL && spare != NULL) {
        b = spare;
        memcpy(b->key, k, kl + 1);
        b->level = t->cap;
        b->at = now_ms;
    }
    if (b == NULL)
        b = &t->overflow;
    int64_t l = level_now(t, b, now_ms);
    b->at = now_ms > b->at ? now_ms : b->at;
    if (l >= UNIT) {
        b->level = l - UNIT;
        return 0;
    }
    b->level = l;
    int64_t wait_ms = (UNIT - l + t->per_min - 1) / t->per_min;
    int64_t s = (wait_ms + 999) / 1000;
    return s < 1 ? 1 : s > 3600 ? 3600 : (int)s;
}
