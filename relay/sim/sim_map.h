/* sim_map.h - a string-keyed hash map of pointers for the simulator (request ids, websocket
 * topics, interned strings, rate-limit buckets).
 *
 * Open addressing with linear probing and backward-shift deletion: no tombstones, so long
 * runs of inserts and deletes (load mode) never degrade lookups. The map does not copy keys:
 * a key must stay valid and unchanged while its entry is present (callers point it into the
 * value they store). Values are never freed by the map.
 * runs on: the thread that owns the map (the simulator's lws thread). */
#ifndef RELAY_SIM_MAP_H
#define RELAY_SIM_MAP_H

#include <stddef.h>

struct sim_map;

/* A new empty map. Never NULL (aborts on out-of-memory, like xmalloc). */
struct sim_map *sim_map_new(void);
/* Free the table only; NULL-safe. */
void sim_map_free(struct sim_map *m);
/* The value stored under key, or NULL. */
void *sim_map_get(const struct sim_map *m, const char *key);
/* Insert or replace; val must not be NULL. key is borrowed (see above). */
void sim_map_put(struct sim_map *m, const char *key, void *val);
/* Remove key; returns the value it had, or NULL when absent. */
void *sim_map_del(struct sim_map *m, const char *key);
size_t sim_map_count(const struct sim_map *m);
/* Visit every entry in table order. fn must not insert into or delete from the map. */
void sim_map_each(const struct sim_map *m, void (*fn)(void *arg, const char *key, void *val),
                  void *arg);

#endif
