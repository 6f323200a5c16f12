/* sim_facts.h - the parts of a simulated /requests/v3 item that change over a request's life
 * as the upstream's do (docs/facts.md): data.fees quoted from the quote on, actual once the
 * fill (or refund) transaction exists; route.actual once a deposit was seen.
 * runs on: the simulator's lws thread. */
#ifndef RELAY_SIM_FACTS_H
#define RELAY_SIM_FACTS_H

struct sbuf;
struct sim_req;

/* "fees": {"quoted": {...}, "actual": {...} | null, "currency": {...}} of r into b. */
void sim_facts_fees(struct sbuf *b, const struct sim_req *r);
/* 1 when r's item carries route.actual: a deposit (an inTx) was seen. */
int sim_facts_route_actual(const struct sim_req *r);

#endif
