/* delivery_log.h - the listing of an endpoint's deliveries (GET /v1/webhooks/{id}/deliveries):
 * each partition keeps its own list {P:p<k>}:dls:<wh> (newest first, store/wh_list.lua, which
 * also turns the compact entries of first-attempt deliveries into records). Every partition
 * is asked for a page from its own offset; the pages are merged newest first (creation time,
 * then id) and the cursor is one offset per partition, "<o0>,<o1>,...", each just after the
 * last of that partition's entries shown. A deployment of one partition is the degenerate
 * case: one command, the cursor one offset. wh_list.lua's argument and reply layout and the
 * record's field names are written here only.
 * (The delivery scripts of relay/delivery/ are store/deliveries.h; this is the REST read.)
 * runs on: core thread. */
#ifndef STORE_DELIVERY_LOG_H
#define STORE_DELIVERY_LOG_H

#include <stddef.h>

struct store;

/* One listed delivery. Each string is NULL when the record lacks the field; all are borrowed
 * from the page (valid during the callback). */
struct store_dl_listed {
    const char *id, *event_id, *webhook_id, *request_id;
    const char *seq;           /* the event's seq (decimal) */
    const char *status;        /* the event's status */
    const char *state;         /* pending, delivered, dead, superseded, skipped */
    const char *next;          /* the next attempt's time (ms), for a pending one */
    const char *created;       /* ms */
    const char *event_created; /* ms */
    const char *done;          /* finished at (ms) */
    const char *replay;        /* "1" for a replay */
    const char *const *attempts; /* the attempt records (JSON texts), oldest first */
    size_t nattempts;
};

/* Where a listing continues (one offset per partition). Opaque. */
struct store_dl_cursor;
/* text NULL or "": from the newest; else a cursor a page gave. Returns a new cursor (free it
 * with store_dl_cursor_free), or NULL when text is not one. */
struct store_dl_cursor *store_dl_cursor_parse(const struct store *s, const char *text);
void store_dl_cursor_free(struct store_dl_cursor *c); /* NULL-safe */

/* A page: e[0..n) newest first and the cursor of the next page (NULL: the end), or err set
 * (a named store error, store/gather.h) and n 0. */
typedef void store_dl_page_cb(void *arg, const char *err, const struct store_dl_listed *e,
                              size_t n, const char *next);
/* List endpoint whid's deliveries (state "" or one state) from `from` (read during the call
 * only), at most limit. cb is called exactly once, maybe before this returns
 * (store_err_unsent when the store is not ready). */
void store_dl_list(struct store *s, const char *whid, const char *state,
                   const struct store_dl_cursor *from, int limit, store_dl_page_cb *cb,
                   void *arg);

#endif
