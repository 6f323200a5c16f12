/* idmap.c - see idmap.h. Linear probing with backward-shift deletion (no tombstones). Ids come
 * from clients: slots are chosen by SipHash-1-3 with a random key per map (siphash.h), so no
 * one can send ids that pile up in one run of slots. */
#include "relay/common/idmap.h"
#include "relay/common/siphash.h"
#include "relay/common/util.h"

#include <stdlib.h>
#include <string.h>

struct slot {
    char *key; /* NULL = empty */
    uint32_t hash;
    uint32_t value;
};

struct idmap {
    struct sipkey key; /* random per map */
    struct slot *slots;
    size_t cap; /* power of two */
    size_t n;
};

static uint32_t hash_str(const struct idmap *m, const char *s)
{
    return (uint32_t)siphash13(&m->key, s, strlen(s));
}

struct idmap *idmap_new(void)
{
    struct idmap *m = xcalloc(1, sizeof(*m));
    sipkey_random(&m->key);
    m->cap = 64;
    m->slots = xcalloc(m->cap, sizeof(struct slot));
    return m;
}

void idmap_free(struct idmap *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->cap; i++)
        free(m->slots[i].key);
    free(m->slots);
    free(m);
}

static size_t find(const struct idmap *m, const char *id, uint32_t h)
{
    size_t mask = m->cap - 1, i = h & mask;
    while (m->slots[i].key && (m->slots[i].hash != h || strcmp(m->slots[i].key, id) != 0))
        i = (i + 1) & mask;
    return i;
}

static void grow(struct idmap *m)
{
    struct slot *old = m->slots;
    size_t oldcap = m->cap;
    m->cap *= 2;
    m->slots = xcalloc(m->cap, sizeof(struct slot));
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].key) {
            size_t j = old[i].hash & (m->cap - 1);
            while (m->slots[j].key)
                j = (j + 1) & (m->cap - 1);
            m->slots[j] = old[i];
        }
    free(old);
}

uint32_t idmap_hash(const struct idmap *m, const char *id)
{
    return hash_str(m, id);
}

int idmap_put(struct idmap *m, const char *id, uint32_t value)
{
    return idmap_put_h(m, id, hash_str(m, id), value);
}

int idmap_put_h(struct idmap *m, const char *id, uint32_t h, uint32_t value)
{
    if ((m->n + 1) * 4 > m->cap * 3)
        grow(m);
    size_t i = find(m, id, h);
    if (m->slots[i].key) {
        m->slots[i].value = value;
        return 0;
    }
    m->slots[i].key = xstrdup(id);
    m->slots[i].hash = h;
    m->slots[i].value = value;
    m->n++;
    return 1;
}

int idmap_get(const struct idmap *m, const char *id, uint32_t *value)
{
    return idmap_get_h(m, id, hash_str(m, id), value);
}

int idmap_get_h(const struct idmap *m, const char *id, uint32_t h, uint32_t *value)
{
    size_t i = find(m, id, h);
    if (m->slots[i].key == NULL)
        return 0;
    if (value)
        *value = m->slots[i].value;
    return 1;
}

int idmap_del(struct idmap *m, const char *id)
{
    return idmap_del_h(m, id, hash_str(m, id));
}

int idmap_del_h(struct idmap *m, const char *id, uint32_t h)
{
    size_t mask = m->cap - 1, i = find(m, id, h);
    if (m->slots[i].key == NULL)
        return 0;
    free(m->slots[i].key);
    m->slots[i].key = NULL;
    m->n--;
    /* backward shift: move later entries of the run into the hole when allowed */
    for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t home = m->slots[j].hash & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = m->slots[j];
            m->slots[j].key = NULL;
            i = j;
        }
    }
    return 1;
}

size_t idmap_count(const struct idmap *m)
{
    return m->n;
}

void idmap_each(struct idmap *m, void (*fn)(void *arg, const char *id, uint32_t *value),
                void *arg)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            fn(arg, m->slots[i].key, &m->slots[i].value);
}
