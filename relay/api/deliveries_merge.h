/* deliveries_merge.h - GET /v1/webhooks/{id}/deliveries in a deployment with several
 * partitions (docs/partitions.md): each partition lists its own deliveries of the endpoint
 * ({P:p<k>}:dls:<wh>, newest first, store/wh_list.lua); every partition is asked for a page
 * from its own offset, the pages are merged newest first (creation time, then id), and the
 * cursor is one offset per partition, "<o0>,<o1>,...", each just after the last of that
 * partition's entries shown. Private to relay/api/ (webhooks.c).
 * runs on: core thread. */
#ifndef RELAY_API_DELIVERIES_MERGE_H
#define RELAY_API_DELIVERIES_MERGE_H

#include <hiredis/hiredis.h>
#include <jansson.h>

struct store;
struct store_script;

/* A listed delivery (wh_list.lua's field/value array) as JSON; a new reference. */
typedef json_t *dlm_json_fn(const redisReply *h);
/* The answer body {"deliveries", "cursor"} (a new reference, the callee owns it), or NULL when
 * Redis could not be read. */
typedef void dlm_done_cb(void *arg, json_t *body);

/* List whid's deliveries (state: "" or one state) from offsets[0..N) (N = the store's
 * partition count; updated in place to the next page's offsets), limit per page. cb is
 * called exactly once, maybe before this returns. */
void dlm_start(struct store *s, const struct store_script *list_sc, const char *whid,
               const char *state, long *offsets, int limit, dlm_json_fn *to_json,
               dlm_done_cb *cb, void *arg);

#endif
