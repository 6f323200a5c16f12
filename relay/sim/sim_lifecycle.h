/* sim_lifecycle.h - the simulator's built-in lifecycles: the templates generated and
 * scripted-by-name requests follow (success, refund, reorg, ...), the reasons their failing
 * steps carry, the "name:weight,..." mix of generated requests, and the concrete path of one
 * request drawn from its generator. runs on: the simulator's lws thread. */
#ifndef RELAY_SIM_SIM_LIFECYCLE_H
#define RELAY_SIM_SIM_LIFECYCLE_H

#include "relay/sim/sim_model.h"

#include <stddef.h>
#include <stdint.h>

#define SIM_NTMPL 11 /* templates (sim_model_lifecycles() names them) */
#define SIM_REORG_REASON "DEPOSIT_REORGED"

/* The index of a template by name, or -1. */
int sim_tmpl_find(const char *name);
/* Of template ti (0 <= ti < SIM_NTMPL): its name (static), whether it is a deposit-address
 * request, its fixed origin chain (0 = random). */
const char *sim_tmpl_name(int ti);
int sim_tmpl_deposit(int ti);
int64_t sim_tmpl_origin(int ti);
/* Parse "name:weight,..." (a missing weight is 1) into w (indexed like the templates) and
 * *total. Returns 0, or -1 with a reason in err. */
int sim_tmpl_mix_parse(const char *mix, int w[SIM_NTMPL], int *total, char *err, size_t errn);
/* The path of template ti for one request: its steps with reasons and delays (pct of
 * step_ms with +-50% jitter; step_ms <= 0: every step after the first is manual), drawn from
 * rng. Returns a new array (the caller owns it) of *nsteps steps; the strings are static. */
struct sim_step *sim_tmpl_path(int ti, int64_t step_ms, uint64_t *rng, int *nsteps);

#endif
