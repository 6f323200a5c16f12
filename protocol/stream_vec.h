/* stream_vec.h - the cursor of an event stream split in partitions (docs/partitions.md): a
 * vector of one Redis stream id per partition, written "<sid0>,<sid1>,..." ("0-0" for a
 * partition nothing was read from). With one partition the vector is one stream id, i.e. the
 * cursor of a 1-partition deployment. Each component is read by proto_stream_id_parse
 * ("<ms>" or "<ms>-<seq>"). Read, written and compared here; the dashboards (relay/dash/),
 * the event API (relay/api/events.c) and the page (relay/www/app.js cmpSid) share the form.
 * runs on: any thread (pure). */
#ifndef PROTO_STREAM_VEC_H
#define PROTO_STREAM_VEC_H

#include <stddef.h>
#include <stdint.h>

#define SVEC_MAX 64        /* components: the partition bound (store/keys.h KEY_MAX_PARTITIONS) */
#define SVEC_ID_TEXT 42    /* one "<ms>-<seq>" (20 + 1 + 20 digits) and its comma */
#define SVEC_TEXT_MAX (SVEC_MAX * SVEC_ID_TEXT + 1) /* a vector's text with its NUL */

/* One stream id. */
struct svec_pos {
    uint64_t ms, seq;
};

/* Read the vector s into out (room for max components). Returns the number of components
 * (>= 1), or -1 when s is not a vector: empty, an empty or malformed component, or more
 * than max components. out is written up to the first fault. */
int svec_parse(const char *s, struct svec_pos *out, unsigned max);
/* The same for a position to read after (the "after" of GET /v1/events): a component
 * without "-<seq>" (a bare ms time) means after that whole millisecond, so its seq is
 * UINT64_MAX. Returns as svec_parse. */
int svec_parse_after(const char *s, struct svec_pos *out, unsigned max);
/* Write the n components of v into buf (cap bytes), "<ms>-<seq>" separated by commas.
 * Returns the length, or -1 when it does not fit (buf then holds ""). */
int svec_format(char *buf, size_t cap, const struct svec_pos *v, unsigned n);
/* Order of two stream ids: -1, 0, 1. */
int svec_pos_cmp(const struct svec_pos *a, const struct svec_pos *b);
/* 1 when every component of a is >= the same component of b (a is at or after b), else 0. */
int svec_ge(const struct svec_pos *a, const struct svec_pos *b, unsigned n);

#endif
