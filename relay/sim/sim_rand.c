/* sim_rand.c - see sim_rand.h. runs on: the simulator's lws thread (pure functions of the
 * caller's generator state). */
#include "relay/sim/sim_rand.h"
#include "relay/sim/sim_json.h"
#include "relay/common/util.h"

#include <string.h>

/* splitmix64: the next 64 random bits of state. */
static uint64_t sim_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t sim_rng_below(uint64_t *state, uint64_t n)
{
    return n ? sim_rng_next(state) % n : 0;
}

double sim_rng_unit(uint64_t *state)
{
    return (double)(sim_rng_next(state) >> 11) / 9007199254740992.0;
}

uint64_t sim_rand_stream(uint64_t seed, uint64_t family, uint64_t n)
{
    uint64_t s = seed ^ (family * 0xd1b54a32d192ed03ULL);
    uint64_t t = s + n * 0x9e3779b97f4a7c15ULL;
    return sim_rng_next(&t) ^ sim_rng_next(&s);
}

/* Weighted chain pick: origin and destination of generated requests. */
static const struct {
    int64_t id;
    int weight;
} chain_weights[] = {
    {8453, 25}, {42161, 15}, {1, 15}, {10, 8}, {137, 7}, {792703809, 20}, {8253038, 5}, {1337, 5},
};

void sim_rand_hex(uint64_t *rng, char *out, int n)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (i % 16 == 0)
            v = sim_rng_next(rng);
        out[i] = hex[v & 15];
        v >>= 4;
    }
    out[n] = '\0';
}

/* Base58 (Bitcoin alphabet) of n random bytes. out holds at least 2n bytes. */
static void rand_base58(uint64_t *rng, char *out, int n)
{
    static const char alpha[] = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    unsigned char bytes[64] = {0};
    for (int i = 0; i < n; i++)
        bytes[i] = (unsigned char)sim_rng_next(rng);
    bytes[0] |= 1; /* no leading zero bytes: a full-length signature, like real ones */
    unsigned char digits[128];
    int nd = 0;
    for (int i = 0; i < n; i++) {
        int carry = bytes[i];
        for (int j = 0; j < nd; j++) {
            carry += digits[j] << 8;
            digits[j] = (unsigned char)(carry % 58);
            carry /= 58;
        }
        while (carry > 0) {
            digits[nd++] = (unsigned char)(carry % 58);
            carry /= 58;
        }
    }
    for (int i = 0; i < nd; i++)
        out[i] = alpha[digits[nd - 1 - i]];
    out[nd] = '\0';
}

void sim_rand_hash(uint64_t *rng, int64_t chain, char *out)
{
    const char *vm = sim_chain_vm(chain);
    if (strcmp(vm, "svm") == 0) {
        rand_base58(rng, out, 64);
    } else if (strcmp(vm, "bvm") == 0) {
        sim_rand_hex(rng, out, 64);
    } else {
        out[0] = '0';
        out[1] = 'x';
        sim_rand_hex(rng, out + 2, 64);
    }
}

void sim_rand_address(uint64_t *rng, int64_t chain, char *out)
{
    const char *vm = sim_chain_vm(chain);
    if (strcmp(vm, "svm") == 0) {
        rand_base58(rng, out, 32);
    } else if (strcmp(vm, "bvm") == 0) {
        static const char b32[] = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
        memcpy(out, "bc1q", 4);
        for (int i = 0; i < 38; i++)
            out[4 + i] = b32[sim_rng_below(rng, 32)];
        out[42] = '\0';
    } else {
        out[0] = '0';
        out[1] = 'x';
        sim_rand_hex(rng, out + 2, 40);
    }
}

int64_t sim_rand_chain(uint64_t *rng, int64_t not)
{
    for (;;) {
        int total = 0;
        for (size_t i = 0; i < ARRAY_LEN(chain_weights); i++)
            total += chain_weights[i].weight;
        int64_t x = (int64_t)sim_rng_below(rng, (uint64_t)total);
        for (size_t i = 0; i < ARRAY_LEN(chain_weights); i++) {
            x -= chain_weights[i].weight;
            if (x < 0) {
                if (chain_weights[i].id != not)
                    return chain_weights[i].id;
                break;
            }
        }
    }
}

int64_t sim_rand_block(uint64_t *rng, int64_t chain)
{
    const char *vm = sim_chain_vm(chain);
    if (strcmp(vm, "svm") == 0)
        return 330000000 + (int64_t)sim_rng_below(rng, 5000000);
    if (strcmp(vm, "bvm") == 0)
        return 905000 + (int64_t)sim_rng_below(rng, 5000);
    return 20000000 + (int64_t)sim_rng_below(rng, 15000000);
}
