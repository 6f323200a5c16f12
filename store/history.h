/* history.h - the past of requests as the dashboards read it: a request's last-known record
 * ({P:p<k>}:req:<id> rec / trk), the newest requests of status sets ({P:p<k>}:st:<status>, or
 * :ct) across partitions, and a request's timeline (the hash's "tl" field or
 * {P:p<k>}:tl:<id>, each stream id read back from its partition's event stream). Typed: the caller never sees a redisReply; what a
 * callback gets is borrowed for the call.
 * Each call returns 0 (cb is called exactly once) or -1 when nothing could be sent (the store
 * is not ready; cb is not called).
 * runs on: core thread. */
#ifndef STORE_HISTORY_H
#define STORE_HISTORY_H

#include <stddef.h>

struct store;

/* A request's last-known state: rec (NULL when it has none) and whether it is tracked. */
struct store_history_record {
    const char *rec;
    size_t rec_len;
    int tracked;
    const char *fx; /* the newest facts as stored (store/facts.h), NULL: none */
    size_t fx_len;
};
/* err: NULL, or store_err_* (the record could not be read: r is NULL). */
typedef void store_history_record_cb(void *arg, const char *err,
                                     const struct store_history_record *r);
/* HMGET {P:p<k>}:req:<id> rec trk fx on the partition of id. */
int store_history_record(struct store *s, const char *id, store_history_record_cb *cb,
                         void *arg);

/* The newest ids: n of them (never more than the limit asked), newest first. */
typedef void store_history_ids_cb(void *arg, const char *const *ids, size_t n);
/* The newest `limit` (> 0) request ids of the status sets statuses[0..nstatus) (nstatus 0:
 * of every request), read in every partition. One partition: each set's newest in the
 * order of statuses, up to limit in all (as 3c49df1); several: merged newest first by their
 * creation time (first seen until the facts say, as every index of store/keys.h). Sets that cannot be read add nothing. */
int store_history_newest(struct store *s, const char *const *statuses, size_t nstatus,
                         int limit, store_history_ids_cb *cb, void *arg);

/* One entry of a timeline: its stream id and record, both NULL when it could not be read. */
struct store_history_item {
    const char *sid;
    const char *rec;
    size_t rec_len;
};
/* err: NULL with n items in timeline order, or store_err_* (the list could not be read). */
typedef void store_history_timeline_cb(void *arg, const char *err,
                                       const struct store_history_item *items, size_t n);
/* The newest `limit` entries of request id's timeline: HMGET of the hash's "tl" (the stream
 * ids of a request with few events, store/tl_lib.lua) and "tl1" (an older version's one id)
 * and LRANGE of its list, sent together (ids in more than one of them, written by an older
 * version, are merged in stream order), then one XRANGE per entry. */
int store_history_timeline(struct store *s, const char *id, int limit,
                           store_history_timeline_cb *cb, void *arg);

#endif
