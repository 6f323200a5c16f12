/* sim_scope.h - the API key scope of GET /requests/v3 in the simulator: the upstream's
 * apiKey parameter (a comma list) returns only the requests made with one of those keys. A
 * request remembers the key it was made with (POST /_sim/requests {"apiKey"}); one made
 * without one belongs to the sim's own --api-key (and with no --api-key, to no key).
 * runs on: the simulator's lws thread. */
#ifndef RELAY_SIM_SCOPE_H
#define RELAY_SIM_SCOPE_H

struct sim;
struct sim_req;

/* 1 when r was made with a key of the comma list keys. */
int sim_scope_match(const struct sim *s, const struct sim_req *r, const char *keys);

#endif
