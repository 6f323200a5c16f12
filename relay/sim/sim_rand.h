/* sim_rand.h - the simulator's seeded randomness: a splitmix64 generator, independent
 * streams per family member (so a request's values do not depend on how many others were
 * made before it in another family), and random text shaped like each chain's hashes and
 * addresses, weighted chain picks and block heights for generated requests.
 * runs on: the simulator's lws thread. */
#ifndef RELAY_SIM_SIM_RAND_H
#define RELAY_SIM_SIM_RAND_H

#include <stdint.h>

/* Uniform in [0, n); 0 when n is 0. */
uint64_t sim_rng_below(uint64_t *state, uint64_t n);
/* Uniform in [0, 1). */
double sim_rng_unit(uint64_t *state);

/* The initial state of the n-th member of a family (generated requests, scripted requests,
 * sockets: the caller's numbering) under the model's seed. */
uint64_t sim_rand_stream(uint64_t seed, uint64_t family, uint64_t n);
/* n random lowercase hex digits and a NUL into out (n + 1 bytes). */
void sim_rand_hex(uint64_t *rng, char *out, int n);
/* A transaction hash the way chain writes them: base58 of 64 bytes (svm), 64 hex digits
 * (bvm) or 0x + 64 hex (evm). out holds at least 130 bytes. */
void sim_rand_hash(uint64_t *rng, int64_t chain, char *out);
/* An address the way chain writes them: base58 of 32 bytes (svm), bech32-looking bc1q...
 * (bvm) or 0x + 40 hex (evm). out holds at least 66 bytes. */
void sim_rand_address(uint64_t *rng, int64_t chain, char *out);
#define SIM_BITCOIN_CHAIN 8253038 /* service-assigned (upstream-protocol.md) */

/* A chain id by weight (the mix of generated requests), never not. */
int64_t sim_rand_chain(uint64_t *rng, int64_t not);
/* A plausible block height on chain. */
int64_t sim_rand_block(uint64_t *rng, int64_t chain);

#endif
