/* rec.h - a request's newest event record as its hash {P}:req:<id> keeps it (field "rec",
 * store/keys.h): plain JSON while the request is watched (store/apply.lua writes it so, and
 * the typed events of store/watch_lib.lua are built from it in Lua), deflated once its watch
 * has ended ('r' + a zlib stream with a preset dictionary of the record's keys, through
 * store/zdict.h: ~0.16 KB for ~0.7 KB; docs/facts.md "Storage"). Every C
 * reader of the hash's rec goes through store_rec_decode, so each gets the same JSON bytes
 * whatever the stored form.
 * The compact hash: once deflated, the whole hash of the ended watch is rewritten in the same
 * compare-and-set (store/rec_lib.lua, store/chunk_lib.lua): every value over 64 B (the
 * record, the facts versions, search's "ix", the tracking metadata) in chunks of at most 64 B and the fields an
 * ended watch does not need dropped, so that Redis keeps it a listpack with its defaults
 * (hash-max-listpack-value 64): ~1.3 KB for ~2.3 KB. Readers get whole values (Lua through
 * chunk_lib.lua; C through req_get.lua, requests_read.lua, apply_read.lua, facts_*.lua);
 * a writer of a chunked field unpacks the hash first. Only ended watches: a watched request's
 * hash is written as before.
 * The pass (rec_pass_*, run by store/janitor.c; it deflates and packs only with
 * STATUSRELAY_COMPRESS_RECORDS, on by default): bounded steps, one partition at a time.
 * store/rec_scan.lua reads the plain records of requests whose
 * watch ended since its cursor ({P}:unwatch by change version, cursor {P}:rzk) and the
 * deflated records a typed event is waiting for ({P}:rzq, watch_lib.lua watch_event); this
 * module deflates or inflates them and store/rec_put.lua writes them back as a compare-and-set
 * (a record or seq that changed meanwhile, or a watch that started again, wins) and writes the
 * typed events that waited (their field "rzev").
 * runs on: core thread (store_rec_encode / _decode: any thread, pure). */
#ifndef STORE_REC_H
#define STORE_REC_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct store;
struct rec_pass;

#define REC_PASS_BATCH 200     /* requests read per step at most */
#define REC_PASS_TICK_MS 5000  /* between rounds when a round found no full batch */

/* The record JSON of a stored rec value raw[0..len): 0 with *out NULL when it is plain (the
 * caller uses raw as it is), 0 with *out malloc'd (NUL-terminated, caller frees) when it was
 * deflated, -1 when it is neither (logged by the caller). */
int store_rec_decode(const char *raw, size_t len, char **out, size_t *out_len);
/* The deflated form of a record JSON text; *out malloc'd (caller frees). Returns 0 or -1. */
int store_rec_encode(const char *text, size_t len, char **out, size_t *out_len);

/* The pass; stream_maxlen: the event stream's MAXLEN for the typed events that waited for a
 * record (STATUSRELAY_EVENT_RETENTION); compact: deflate the records of ended watches (else
 * the pass only serves the typed events that wait, of records deflated before). Its timer
 * starts at once; steps run only while the store is ready. */
struct rec_pass *rec_pass_new(struct event_base *base, struct store *s, long long stream_maxlen,
                              int compact);
/* NULL-safe. A step in flight completes into a detached request. */
void rec_pass_free(struct rec_pass *p);

#endif
