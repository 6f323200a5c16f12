/* search.h - the search indexes (DESIGN "Search"; docs/search.md): request ids by wallet
 * (user, sender, recipient, a deposit's depositor), by transaction hash (in, out, deposit), by
 * referrer and by deposit address, and every request by creation time; and the page of a search
 * merged over every partition (store/search_page.lua). Each entry lives in the partition of its
 * request (store/search_lib.lua names the keys: one hash field per value listing its requests,
 * binary, in 4096 bucket hashes; a zset per value past 16 of them); a search asks every
 * partition (store_gather).
 *
 * Writers: store/apply.lua indexes what the status record says (its hashes, referrer, deposit
 * address and depositor: store_search_event_entries builds the arguments, only the new ones)
 * in the same script as the apply, and puts every request in the creation-time index (first
 * seen until its facts say createdAt); store_search_index indexes a request's facts (the
 * facts storage calls it where facts are stored). Removal: the retention sweep
 * (store/req_gc.lua) removes a request's entries with it. Bounds: at most STORE_SEARCH_CAP
 * requests per value (a wallet with 100k requests keeps its newest 1000), at most
 * 2 * PROTO_MAX_HASHES + 8 entries per request.
 *
 * Values are normalised (store_search_norm): a value starting with "0x" (an EVM address or
 * hash) is lower-cased, any other (Solana, Bitcoin: case matters) is kept as is; referrers are
 * kept as given. runs on: core thread (the pure helpers: any). */
#ifndef STORE_SEARCH_H
#define STORE_SEARCH_H

#include "protocol/event.h"
#include "store/requests.h"

#include <stddef.h>
#include <stdint.h>

struct store;

#define STORE_SEARCH_CAP 1000     /* requests per index key (the newest kept) */
#define STORE_SEARCH_MAX_VALUE 256 /* bytes of one searched or indexed value */

/* The normal form of v[0..len) into out (NUL-terminated; at most STORE_SEARCH_MAX_VALUE
 * bytes). Returns its length, or 0 when v is empty, too long or holds a byte outside
 * printable ASCII other than space (never indexed nor searched). */
size_t store_search_norm(char *out, size_t cap, const char *v, size_t len);

/* 1 when v[0..len) may be a referrer (free text): 1..STORE_SEARCH_MAX_VALUE bytes without
 * control characters. */
int store_search_text_ok(const char *v, size_t len);

/* The index entries of a search value list: "<kind>:<normalised value>" strings (owned). */
struct store_search_ents {
    char **v;
    size_t n, cap;
};
void store_search_ents_free(struct store_search_ents *e);

/* The entries the status record ev says (its in/out/deposit hashes, referrer, deposit address
 * and depositor) that last (NULL: none) did not, appended to out. */
void store_search_event_entries(const struct status_event *last, const struct status_event *ev,
                                struct store_search_ents *out);

/* The entries of a facts text (protocol/facts.h: user, sender, recipient, referrer,
 * inTxs/outTxs txHash, depositAddress address/depositor/depositTxHash) appended to out, and
 * its createdAt into *created_at (-1 when null). Returns 0, or -1 when the text is not a facts
 * object (nothing appended). Pure. */
int store_search_facts_entries(const char *facts, size_t len, struct store_search_ents *out,
                               int64_t *created_at);

/* Index request id's facts (search_index.lua, one call in its partition). cb (may be NULL)
 * gets err NULL and indexed 1, or indexed 0 when the request has no record (facts are
 * indexed after the request's first apply; a swept request is not indexed again). Returns 0
 * (cb runs exactly once, later) or -1: the facts are not a facts text, or the store is not
 * ready (cb not called). */
typedef void store_search_index_cb(void *arg, const char *err, int indexed);
int store_search_index(struct store *s, const char *id, const char *facts, size_t len,
                       store_search_index_cb *cb, void *arg);

/* A search: every given part must match (AND). Strings NULL or "" = not given; from / to -1 =
 * unbounded (creation time ms, inclusive). */
struct store_search_query {
    const char *q;        /* a request id, a wallet (user, sender, recipient), a deposit
                             address or any transaction hash */
    const char *user;     /* a wallet: user, sender or recipient */
    const char *tx_hash;  /* in, out or deposit */
    const char *referrer;
    const char *status;   /* the current status */
    int64_t from, to;
    const char *after_score; /* the cursor: strictly after (score, id); "" or NULL: */
    const char *after_id;    /* from the start */
    int limit;               /* >= 1 */
};
/* 1 when q has a part only a search answers (q, user, txHash, referrer, from, to). */
int store_search_given(const struct store_search_query *q);
/* A page of matching requests, ordered by creation time then id (the score handed out is the
 * creation time), merged over every partition. cb as store_requests_page's: exactly once,
 * maybe before this returns. */
void store_search_page(struct store *s, const struct store_search_query *q,
                       store_req_page_cb *cb, void *arg);

#endif
