/* search.h (api) - the search part of GET /v1/requests (DESIGN "Search"): its parameters (q,
 * user, txHash, referrer, from, to) and the one-time upstream fallback for a q or txHash the
 * relay does not know (GET /requests/v3?term=, within the budget; an anonymous caller within
 * its miss rate). The page itself is store/search.h's; relay/api/requests.c lists it.
 * runs on: core thread. */
#ifndef RELAY_API_SEARCH_H
#define RELAY_API_SEARCH_H

#include "store/search.h"

struct ctx;

/* The search parameters of x's query into *q (strings borrowed from x's query; from / to -1
 * when absent). Returns 0 (q->limit, status and cursor untouched), or -1 after answering 400. */
int api_search_parse(struct ctx *x, struct store_search_query *q);

/* The term a fallback would look up (q's q, else its txHash), or NULL: none given. */
const char *api_search_term(const struct store_search_query *q);

/* Look term up once through the upstream's /requests/v3?term= search: every request found is
 * applied and tracked (ingest), its facts indexed (store_search_index), then done(arg, found)
 * runs with the number of requests the upstream answered. Returns 0 (done runs exactly once,
 * later), -1 when no lookup is possible (no API key, no poller, the store not ready: done not
 * called), or the seconds to wait (> 0) when x is anonymous and its miss rate is spent. */
typedef void api_search_term_done(void *arg, size_t found);
int api_search_term_lookup(struct ctx *x, const char *term, api_search_term_done *done,
                           void *arg);

#endif
