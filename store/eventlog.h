/* eventlog.h - pages of the event log for readers that answer once (GET /v1/events): every
 * partition's stream {P:p<k>}:events read after its own position and merged, the newest
 * position of each, and one request's events (store/events_by_request.lua). A deployment of
 * one partition is the degenerate case (one stream, one command). Positions are the
 * components of the vector cursor (protocol/stream_vec.h), one per partition in order.
 *
 * The entries are copied out of the replies (store/events.h walks them) into a page that the
 * callback borrows: it is freed when the callback returns. runs on: core thread. */
#ifndef STORE_EVENTLOG_H
#define STORE_EVENTLOG_H

#include "protocol/stream_vec.h"

#include <stddef.h>

struct store;

/* One entry of a page. */
struct store_eventlog_entry {
    unsigned part;            /* the partition whose stream holds it */
    struct svec_pos pos;      /* its stream id */
    char sid[SVEC_ID_TEXT];   /* the same as Redis wrote it, "<ms>-<seq>" */
    const char *rec;          /* its record (proto_event_record form), NULL when it has none */
    size_t rec_len;
};

/* A page: err NULL and e[0..n) in order, or err set (a named store error: store/store.h,
 * store/gather.h) and n 0. Called exactly once, maybe before the call that asked returns
 * (err store_err_unsent when the store is not ready). */
typedef void store_eventlog_cb(void *arg, const char *err, const struct store_eventlog_entry *e,
                               size_t n);

/* Every partition's stream after its position after[k] (k < store_partitions(s); after NULL:
 * from the start), merged by (ms, seq, partition): the first limit entries (limit >= 1). A
 * position of the largest stream id reads nothing from its partition. */
void store_eventlog_read(struct store *s, const struct svec_pos *after, int limit,
                         store_eventlog_cb *cb, void *arg);
/* The newest entry of each partition's stream (none for an empty one), without records. */
void store_eventlog_newest(struct store *s, store_eventlog_cb *cb, void *arg);
/* The newest entry of the stream of request id's partition, without its record. */
void store_eventlog_newest_of(struct store *s, const char *id, store_eventlog_cb *cb,
                              void *arg);
/* Request id's events strictly after *after (NULL: from the start), oldest first, at most
 * limit (its timeline, store/events_by_request.lua, in its partition). */
void store_eventlog_of_request(struct store *s, const char *id, const struct svec_pos *after,
                               int limit, store_eventlog_cb *cb, void *arg);

#endif
