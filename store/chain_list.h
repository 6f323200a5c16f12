/* chain_list.h - the read side of the upstream chain list cache {P}:chains (a hash "body",
 * the upstream's GET /chains body verbatim, and "at", when it was fetched in ms), written by
 * store/chains_put.lua for relay/ingest/chains.c and read here for GET /v1/chains.
 * runs on: core thread. */
#ifndef STORE_CHAIN_LIST_H
#define STORE_CHAIN_LIST_H

#include <stddef.h>
#include <stdint.h>

struct store;

/* The cache as read: body NULL until a first fetch stored one; has_at 0 when "at" is absent.
 * body is borrowed for the callback only. */
struct store_chain_list {
    const char *body;
    size_t body_len;
    int has_at;
    int64_t at_ms;
};

/* cl NULL when err is set (a named store error: store/store.h, store/gather.h). */
typedef void store_chain_list_cb(void *arg, const char *err, const struct store_chain_list *cl);
/* Read the cache. Returns 0 (cb is called exactly once, later) or -1 when the store is not
 * ready (cb is not called). */
int store_chain_list_get(struct store *s, store_chain_list_cb *cb, void *arg);

#endif
