/* sim_search.h - the upstream's broad "term" search of GET /requests/v3 (its SDK types: "term
 * search across request ID, wallet, deposit address, and all transaction hashes"), for the
 * simulator's requests_v3 (sim_http.c). runs on: the simulator's thread. */
#ifndef RELAY_SIM_SEARCH_H
#define RELAY_SIM_SEARCH_H

#include "relay/sim/sim_model.h"

/* 1 when r matches term: its id (exactly), its user or recipient, its deposit address or
 * depositor, or any of its transaction hashes (in, out, the deposit's) - these without regard
 * to case. */
int sim_term_match(const struct sim_req *r, const char *term);

#endif
