/* rate_table.h - per-key token buckets in bounded memory: "at most N per minute per key", as
 * used for anonymous status-read misses per client address (relay/api/compat.c).
 *
 * Each key has a bucket of `per_min` tokens (the burst) that refills continuously at per_min
 * tokens a minute; a take costs one token. The table has a fixed number of slots (open
 * addressing, a short probe): a key whose bucket has refilled completely is forgotten (its slot
 * is reused), since a full bucket is what an unknown key gets anyway. When every slot a new key
 * could use holds a bucket still in use, the key shares one overflow bucket with the other
 * keys in that situation: memory stays bounded and a flood of distinct keys cannot buy itself
 * more than one extra bucket.
 * runs on: one thread (the caller's); no locking. */
#ifndef RELAY_RATE_TABLE_H
#define RELAY_RATE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#define RATE_TABLE_KEY_MAX 64 /* longest key kept, NUL included; longer keys are cut */

struct rate_table;

/* A table of `slots` buckets (rounded up to a power of two, at least 16) of per_min tokens a
 * minute each. per_min 0: every take is refused. Never NULL (aborts on out of memory). */
struct rate_table *rate_table_new(int64_t per_min, size_t slots);
/* NULL-safe. */
void rate_table_free(struct rate_table *t);
/* Take one token from key's bucket at now_ms (a monotonic clock). Returns 0 when taken, else
 * the whole seconds (>= 1) until a token is back, for a Retry-After header. */
int rate_table_take(struct rate_table *t, const char *key, int64_t now_ms);

#endif
