/* facts.h - a request's facts (DESIGN "Request facts", protocol/facts.h) as stored: the field
 * fx of its hash {P}:req:<id> (store/keys.h), compressed (zlib with a preset dictionary of
 * the facts keys, about a fifth of the text: docs/facts.md "Storage"), so they are swept with
 * the request (store/req_gc.lua deletes the hash) and cost no key of their own. Writes are a
 * compare-and-set (store/facts_put.lua): a writer reads, merges (proto_facts_merge) and
 * writes only if the value is still the one it read, else reads again; concurrent writers in
 * any number of processes therefore never lose a merge.
 * Versions (docs/facts.md "Facts in event bodies", store/facts_put.lua): each write is the
 * version carried by the events from the next seq on; fx stays the newest (what GET serves),
 * older versions still carried by an event are kept beside it (at most 4 in all), and
 * store_facts_at reads the version of given events for their bodies and frames.
 * runs on: core thread (store_facts_encode / _decode: any thread, pure). */
#ifndef STORE_FACTS_H
#define STORE_FACTS_H

#include <stddef.h>
#include <stdint.h>

struct store;

/* What a merge needs of id's stored facts (store/facts_get.lua), borrowed from the reply (valid
 * during the callback only): raw, the newest version (NULL when the request has none, or no
 * hash); replaces, 1 when the next write replaces it (no event carries it yet); last_older
 * (NULL: none), the newest older version's value, of seq last_seq (its text), which such a
 * write must store again against the new text when it is a delta ('d'). */
struct store_facts_stored {
    const char *raw;
    size_t raw_len;
    int replaces;
    const char *last_older;
    size_t last_older_len;
    const char *last_seq;
};
/* err set: a named store error (st NULL). */
typedef void store_facts_get_cb(void *arg, const char *err, const struct store_facts_stored *st);
/* Read the stored value. Returns 0 (cb is called exactly once, later) or -1 when the store is
 * not ready (cb not called). */
int store_facts_get(struct store *s, const char *id, store_facts_get_cb *cb, void *arg);

enum store_facts_put_result {
    STORE_FACTS_GONE = -1,    /* the request has no hash: nothing written */
    STORE_FACTS_CHANGED = 0,  /* the stored value is not `expect` any more: nothing written */
    STORE_FACTS_WRITTEN = 1,
};
/* rec (borrowed for the call, NULL: none) is set when the write claimed the follow-up event of
 * the request's current status change (facts_put.lua): the stored record of its last event,
 * which the caller turns into one event of the same status flagged "facts". */
typedef void store_facts_put_cb(void *arg, const char *err, enum store_facts_put_result res,
                                const char *rec, size_t rec_len);
/* Write val[0..vlen) (an encoded value) as id's facts if the stored value is still
 * expect[0..elen) (expect NULL: the request had none): the version of the request's next
 * seq. older[0..olen) (NULL: none) is the expected value's older-version form
 * (store_facts_encode_delta against val's text), kept instead of it when an event carries
 * it; relast[0..rlen) (NULL: none) the newest older version (seq last_seq) encoded again
 * against val's text, for a write that replaces expect. status (NULL or "": none) is the
 * status of the observation these facts came with, applied right after: while the stored
 * status differs, that observation's event will carry the version and no follow-up is
 * claimed. Returns 0 (cb called exactly once,
 * later; cb may be NULL) or -1 when the store is not ready. */
int store_facts_put(struct store *s, const char *id, const char *expect, size_t elen,
                    const char *val, size_t vlen, const char *older, size_t olen,
                    const char *relast, size_t rlen, const char *last_seq, const char *status,
                    store_facts_put_cb *cb, void *arg);

/* The facts each event (ids[i], seqs[i]) carries, i < n: texts[i] is the decoded text
 * (malloc'd, NUL-terminated) or NULL (no facts, or an unreadable value). texts belongs to the
 * call: the callback may take an entry (set it to NULL), the rest is freed after it. err set
 * (a named store error): texts is NULL. One script per partition (store/facts_at.lua). */
typedef void store_facts_at_cb(void *arg, const char *err, char **texts, size_t n);
/* Returns 0 (cb called exactly once, later) or -1 when the store is not ready (cb not
 * called). n == 0 is fine (cb still called later). */
int store_facts_at(struct store *s, const char *const *ids, const uint64_t *seqs, size_t n,
                   store_facts_at_cb *cb, void *arg);

/* The stored form of a facts text: 'z' then a zlib stream (level 9, the preset dictionary).
 * *out malloc'd (caller frees). Returns 0 or -1 (out of memory, or over 1 MiB). */
int store_facts_encode(const char *text, size_t len, char **out, size_t *out_len);
/* The facts text of a stored value (the form above, or a plain JSON text starting with '{').
 * *out malloc'd and NUL-terminated (caller frees). Returns 0 or -1 (not a value this module
 * wrote, or over 1 MiB of text). */
int store_facts_decode(const char *raw, size_t len, char **out, size_t *out_len);
/* An older version's stored form: 'd' then a zlib stream of text with the text of the next
 * newer version (newer[0..nlen)) as its preset dictionary - a first-seen version against the
 * settled one is a fraction of its 'z' form. Same returns as store_facts_encode. */
int store_facts_encode_delta(const char *text, size_t len, const char *newer, size_t nlen,
                             char **out, size_t *out_len);
/* The text of an older version's stored value: the 'd' form above given the text of the next
 * newer version, or any form store_facts_decode reads (newer not needed). */
int store_facts_decode_older(const char *raw, size_t len, const char *newer, size_t nlen,
                             char **out, size_t *out_len);

#endif
