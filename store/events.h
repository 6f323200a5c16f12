/* events.h - one typed reader of the event log {P}:events. The entries are written by
 * store/apply.lua (XADD ... id <event id> rid <request id> seq <seq> rec <record JSON>); this
 * module is the only C code that knows that field layout. Readers send their command (the
 * page commands below, or their own XREAD / XREADGROUP), then walk the reply's entries with
 * an iterator that copies nothing: every pointer of a struct store_event_entry is borrowed
 * from the hiredis reply and dies with it (the end of the store callback).
 *
 *     struct store_events_iter it;
 *     struct store_event_entry e;
 *     store_events_iter_range(&it, reply);             (XRANGE, XREVRANGE, events_by_request.lua)
 *     while (store_events_next(&it, &e))
 *         if (e.rec != NULL && store_event_decode(&e, &ev, &perr) == 0) ...
 *
 * runs on: core thread (the page commands); the reply walkers are pure and run anywhere. */
#ifndef STORE_EVENTS_H
#define STORE_EVENTS_H

#include "protocol/event.h"
#include "protocol/proto.h"
#include "store/store.h"

#include <stddef.h>

struct redisReply; /* hiredis' reply: walked by store/events.c only */

/* One entry of the log. sid is always set (NUL-terminated, "ms-seq"); the fields are NULL
 * when the entry carries none (an entry trimmed after it was delivered, as XREADGROUP reports
 * the pending list) or lacks that field. */
struct store_event_entry {
    const char *sid;          /* stream id */
    size_t sid_len;
    const char *rid;          /* "rid": the request id */
    size_t rid_len;
    const char *rec;          /* "rec": the event record (proto_event_record form) */
    size_t rec_len;
    const struct redisReply *fields; /* the flat [name, value, ...] array, or NULL */
};

/* A walk over the entries of one reply. Fields are private. */
struct store_events_iter {
    const struct redisReply *entries_x;
    size_t next_x;
};

/* Start a walk over a reply in XRANGE form ({{sid, {field, value, ...}}, ...}: XRANGE,
 * XREVRANGE, store/events_by_request.lua). Returns the number of entries the reply holds,
 * malformed ones included (a short page means the end of the log); 0 when reply is NULL or
 * not an array (the walk then yields nothing). */
size_t store_events_iter_range(struct store_events_iter *it, const struct redisReply *reply);
/* The same for an XREAD / XREADGROUP reply on the one stream {P}:events
 * ({{stream, {entries}}} or nil when nothing is new). */
size_t store_events_iter_read(struct store_events_iter *it, const struct redisReply *reply);
/* The next entry into *e: 1, or 0 at the end. Skips entries without a stream id (a reply
 * Redis never sends); every other entry is yielded, with or without its fields. */
int store_events_next(struct store_events_iter *it, struct store_event_entry *e);

/* The value of field `name` of e (borrowed from the reply; *len, optional, gets its length),
 * or NULL when e has no such field. For fields the entry struct does not name. */
const char *store_event_field(const struct store_event_entry *e, const char *name,
                              size_t *len);

/* Decode e's record into out (proto_event_from_record: out is initialised here, and the
 * caller cleans it up on every path). Returns 0, or a PROTO_E* code with err (optional) set:
 * PROTO_EMISSING with field "rec" when the entry has no record. Logs nothing: each reader
 * says in its own words what an unreadable entry means for it. */
int store_event_decode(const struct store_event_entry *e, struct status_event *out,
                       struct proto_err *err);

#endif
