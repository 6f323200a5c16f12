/* search.h (api) - the search part of GET /v1/requests (DESIGN "Search"): its parameters (q,
 * user, txHash, referrer, from, to) and the one-time upstream fallback for a q or txHash the
 * relay does not know (GET /requests/v3?term=, within the budget; an anonymous caller within
 * its miss rate). The page itself is store/search.h's; relay/api/requests.c lists it.
 * runs on: core thread. */
#ifndef RELAY_API_SEARCH_H
#define RELAY_API_SEARCH_H

#include "store/requests.h"
#include "store/search.h"

#include <jansson.h>

struct core;
struct ctx;
struct proto_explorers;

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
/* The same lookup for a caller outside the REST API (the dashboard's find, relay/dash/find.c):
 * anon_addr is the caller's address key (protocol/forwarded.h proto_ip_key) when it is
 * anonymous - then the lookup takes one token of that address's STATUSRELAY_ANON_MISS_RATE,
 * the table the REST API's anonymous lookups use - or NULL. Returns as
 * api_search_term_lookup. */
int api_search_term_find(struct core *c, const char *anon_addr, const char *term,
                         api_search_term_done *done, void *arg);

/* The request facts of a stored value (SRF_FACTS, store/facts.h) as GET /v1/requests/{id}
 * serves them (relay/api/requests.c): every explorerUrl built again from ex (NULL: as
 * stored). A new object, or JSON null when there are none or they are unreadable. */
json_t *api_facts_json(const struct store_field *f, const struct proto_explorers *ex);

#endif
