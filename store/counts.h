/* counts.h - sizes of sorted sets summed over every partition (docs/partitions.md): one
 * pipelined round of ZCARDs (O(1) each) for a list of key names, each the sum of that key in
 * every partition. For gauges that must never make a reader wait (the queue depths and
 * requests by status of /metrics). runs on: core thread. */
#ifndef STORE_COUNTS_H
#define STORE_COUNTS_H

#include <stddef.h>
#include <stdint.h>

struct store;

/* A key of every partition: "<partition tag>:<kind>[:<a>]" (store/keys.h). */
struct store_count_key {
    const char *kind;
    const char *a; /* NULL: none */
};

/* The round is over: sum[i] is key i's size summed over the partitions, valid when ok[i]
 * (0 when any of its answers failed or could not be asked). Both arrays are borrowed for the
 * call. */
typedef void store_counts_cb(void *arg, const int64_t *sum, const int *ok, size_t n);
/* Count keys[0..n) (read during the call only; n <= STORE_COUNTS_MAX). cb is called exactly
 * once, maybe before this returns. */
#define STORE_COUNTS_MAX 64
void store_counts_zcard(struct store *s, const struct store_count_key *keys, size_t n,
                        store_counts_cb *cb, void *arg);

#endif
