/* idmap.h - a set of request ids with a small integer value each: open addressing, keys
 * copied and owned by the map. O(1) lookup; about 100 bytes per entry with a 66-char id.
 * Slots follow a keyed hash with a random key per map: idmap_each's order differs between
 * maps and processes (never rely on it).
 * runs on: the thread that owns the map. */
#ifndef RELAY_IDMAP_H
#define RELAY_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct idmap;

struct idmap *idmap_new(void);
void idmap_free(struct idmap *m);
/* Insert or update; returns 1 when the id was new. */
int idmap_put(struct idmap *m, const char *id, uint32_t value);
/* 1 and *value when present. value may be NULL. */
int idmap_get(const struct idmap *m, const char *id, uint32_t *value);
/* Returns 1 when it was present. */
int idmap_del(struct idmap *m, const char *id);
size_t idmap_count(const struct idmap *m);
/* The same with the id's hash computed once by the caller (idmap_hash of this map): for a
 * key looked up, inserted and deleted several times. */
uint32_t idmap_hash(const struct idmap *m, const char *id);
int idmap_put_h(struct idmap *m, const char *id, uint32_t h, uint32_t value);
int idmap_get_h(const struct idmap *m, const char *id, uint32_t h, uint32_t *value);
int idmap_del_h(struct idmap *m, const char *id, uint32_t h);
/* Visit every entry; fn may update the value through the pointer, not insert or delete. */
void idmap_each(struct idmap *m, void (*fn)(void *arg, const char *id, uint32_t *value),
                void *arg);

#endif
