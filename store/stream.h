/* stream.h - the event stream as one ordered log across partitions (docs/partitions.md), for
 * readers that follow it (the dashboards, relay/dash/). Partition k has its own stream
 * {P:p<k>}:events, possibly on its own cluster master; a read here is one command per
 * partition, the answers gathered and the entries merged by (ms, seq, partition). A position
 * in the log is a vector of one stream id per partition (protocol/stream_vec.h); with one
 * partition it is the plain stream id, and every read below is the single command of a
 * one-stream deployment (N = 1 is the degenerate case, not a second path).
 *
 * Every call sends its commands and returns 0 (cb is then called exactly once, when every
 * partition answered, failed or was not sent), or -1 when no command could be sent (the store
 * is not ready; cb is not called). The result handed to cb is borrowed: it and its entries
 * die when cb returns (copy what you keep). Entries are copied out of the hiredis replies, so
 * the caller never sees a redisReply.
 * runs on: core thread. */
#ifndef STORE_STREAM_H
#define STORE_STREAM_H

#include "protocol/stream_vec.h"

#include <stddef.h>

struct store;

/* One entry of the log. */
struct store_stream_entry {
    struct svec_pos at;       /* its stream id */
    unsigned part;            /* its partition */
    const char *rid, *rec;    /* "rid" and "rec" (NUL-terminated), NULL when the entry has none */
    size_t rid_len, rec_len;
};

/* What one partition's XINFO STREAM said (store_stream_info). */
struct store_stream_part_info {
    struct svec_pos last;     /* last-generated-id (0-0: no stream yet) */
    struct svec_pos maxdel;   /* max-deleted-entry-id (Redis 7), when has_maxdel */
    struct svec_pos first;    /* the oldest entry left, when has_first */
    int has_maxdel, has_first;
    int whole;                /* nothing was ever removed (entries-added = length) */
};

/* The gathered answer. Arrays have np elements (the partition count). */
struct store_stream_result {
    unsigned np;
    int failed;                      /* some partition failed or was not sent */
    const int *ok;                   /* per partition: answered with a usable reply */
    const size_t *count;             /* per partition: entries its reply held (a full page?) */
    const struct store_stream_entry *e; /* store_stream_read / _range: merged, oldest first */
    size_t n;
    const struct svec_pos *newest;   /* store_stream_newest: each stream's newest id (0-0) */
    const struct store_stream_part_info *info; /* store_stream_info */
};

typedef void store_stream_cb(void *arg, const struct store_stream_result *r);

/* XREAD COUNT count after after[p] on every partition: what is new. A partition whose
 * command failed has ok[p] = 0 (and failed is set); nothing new is ok with no entries. */
int store_stream_read(struct store *s, const struct svec_pos *after, int count,
                      store_stream_cb *cb, void *arg);
/* XRANGE (after[p] + COUNT count on every partition: a page of each stream after a vector.
 * failed when any partition's page could not be read. */
int store_stream_range(struct store *s, const struct svec_pos *after, int count,
                       store_stream_cb *cb, void *arg);
/* XREVRANGE + - COUNT 1 on every partition: newest[p], 0-0 for an empty stream; ok[p] = 0
 * for a partition that did not answer. */
int store_stream_newest(struct store *s, store_stream_cb *cb, void *arg);
/* XINFO STREAM on every partition ("no such key" is an empty stream: last 0-0, no first):
 * info[p]; failed when any partition could not be read. */
int store_stream_info(struct store *s, store_stream_cb *cb, void *arg);

enum store_stream_gap { STORE_STREAM_GAP_NONE, STORE_STREAM_GAP_UNKNOWN,
                        STORE_STREAM_GAP_TRIMMED };
/* Can every event after the vector from (np components) still be read, by info (np parts)?
 * UNKNOWN: a component is newer than its stream's last id (not a cursor of this stream: Redis
 * was reset?); TRIMMED: events after it were removed - the component is older than the
 * oldest entry left (conservative: the cursor entry itself may have been the last one cut),
 * older than an XDEL'd entry, or its stream is empty but had entries after it. With several
 * partitions a stream nothing was ever removed from is never trimmed (a component "0-0":
 * nothing read from a partition that was empty when the follower started); one stream keeps
 * the single-stream rule of 3c49df1. *oldest (np components) gets each stream's oldest entry
 * (0-0 when none), *any_first whether any stream has one. Pure. */
enum store_stream_gap store_stream_gap_check(const struct store_stream_part_info *info,
                                             unsigned np, const struct svec_pos *from,
                                             struct svec_pos *oldest, int *any_first);

#endif
