/* sim_control.h - the simulator's control API under /_sim/ (documented in `statusrelay sim
 * --help`): create scripted requests, advance them or set a status, switch faults, read and
 * reset the counters, start and stop the load generator. Not rate limited, never faulted,
 * not counted as upstream calls. Bodies in and out are JSON; errors use {message, errorCode}.
 * runs on: the simulator's lws thread. */
#ifndef RELAY_SIM_CONTROL_H
#define RELAY_SIM_CONTROL_H

#include "relay/sim/sim_http.h"

#include <stddef.h>

struct sim;

/* Handle one control call: path starts with "/_sim/". body may be NULL (len 0). Fills out
 * (status, body); never fails. */
void sim_control_handle(struct sim *s, enum sim_method method, const char *path,
                        const struct sim_query *q, const char *body, size_t len,
                        struct sim_resp *out);

#endif
