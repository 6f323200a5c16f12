/* sim_map.c - see sim_map.h. runs on: the simulator's lws thread. */
#include "relay/sim/sim_map.h"
#include "relay/common/util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    const char *key; /* NULL = empty */
    void *val;
    uint64_t hash;
};

struct sim_map {
    struct slot *slots;
    size_t cap; /* power of two */
    size_t count;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a, then a final mix for the low bits */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

struct sim_map *sim_map_new(void)
{
    struct sim_map *m = xcalloc(1, sizeof(*m));
    m->cap = 16;
    m->slots = xcalloc(m->cap, sizeof(*m->slots));
    return m;
}

void sim_map_free(struct sim_map *m)
{
    if (m == NULL)
        return;
    free(m->slots);
    free(m);
}

static size_t find(const struct sim_map *m, const char *key, uint64_t h)
{
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const struct slot *s = &m->slots[i];
        if (s->key == NULL || (s->hash == h && strcmp(s->key, key) == 0))
            return i;
    }
}

static void grow(struct sim_map *m)
{
    struct slot *old = m->slots;
    size_t oldcap = m->cap;
    m->cap *= 2;
    m->slots = xcalloc(m->cap, sizeof(*m->slots));
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].key != NULL)
            m->slots[find(m, old[i].key, old[i].hash)] = old[i];
    free(old);
}

void *sim_map_get(const struct sim_map *m, const char *key)
{
    const struct slot *s = &m->slots[find(m, key, hash_str(key))];
    return s->key ? s->val : NULL;
}

void sim_map_put(struct sim_map *m, const char *key, void *val)
{
    if ((m->count + 1) * 4 > m->cap * 3)
        grow(m);
    uint64_t h = hash_str(key);
    struct slot *s = &m->slots[find(m, key, h)];
    if (s->key == NULL)
        m->count++;
    s->key = key;
    s->val = val;
    s->hash = h;
}

void *sim_map_del(struct sim_map *m, const char *key)
{
    size_t mask = m->cap - 1;
    size_t i = find(m, key, hash_str(key));
    if (m->slots[i].key == NULL)
        return NULL;
    void *val = m->slots[i].val;
    /* Backward-shift: move later members of the probe run into the hole when their home
     * slot is at or before it (cyclically), so lookups never stop early. */
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        struct slot *s = &m->slots[j];
        if (s->key == NULL)
            break;
        size_t home = s->hash & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = *s;
            i = j;
        }
    }
    m->slots[i].key = NULL;
    m->slots[i].val = NULL;
    m->count--;
    return val;
}

size_t sim_map_count(const struct sim_map *m)
{
    return m->count;
}

void sim_map_each(const struct sim_map *m, void (*fn)(void *arg, const char *key, void *val),
                  void *arg)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key != NULL)
            fn(arg, m->slots[i].key, m->slots[i].val);
}
