/* ref_page.h - a page of request refs (id and score) gathered over every partition: each
 * partition answers {id, score, id, score, ...} for its part of one index (requests_page.lua,
 * search_page.lua, asked for limit + 1 each); the answers are merged in the index's order
 * (score, then id bytes) and the first limit go to the page callback, with "more" when there
 * were more. Used by store/requests.c (index pages) and store/search.c (search pages) as the
 * reply and completion functions of one store_gather; store-private (relay/ sees only
 * store_req_page_cb). runs on: core thread. */
#ifndef STORE_REF_PAGE_H
#define STORE_REF_PAGE_H

#include "store/gather.h"
#include "store/requests.h"

struct ref_page;

/* A page of at most limit (>= 1) refs for cb(arg, ...). Owned by the gather it is given to:
 * ref_page_done calls cb exactly once and frees it. */
struct ref_page *ref_page_new(int limit, store_req_page_cb *cb, void *arg);
int ref_page_limit(const struct ref_page *pg);
/* store_gather's reply function (arg: the page) and its completion. */
store_gather_reply_fn ref_page_part;
store_gather_done_fn ref_page_done;

#endif
