/* siphash.h - SipHash (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012), the
 * keyed hash of every table indexed by strings a client chooses (request ids, subscription
 * ids, client addresses): with a key drawn from the OS at start, an attacker cannot compute
 * ids that collide, so lookups stay O(1) under hostile input. SipHash-1-3 (one compression,
 * three finalization rounds, as Rust's and Python's hash tables use) for tables; SipHash-2-4
 * (the reference parameters) is exported for the test vectors.
 * runs on: any thread (sip_process_key: the first call initialises it once, thread-safe). */
#ifndef RELAY_SIPHASH_H
#define RELAY_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

struct sipkey {
    uint64_t k0, k1;
};

/* A fresh key from the OS random source (getrandom; aborts if that fails). */
void sipkey_random(struct sipkey *k);
/* The key from 16 bytes, little-endian as in the reference implementation. */
void sipkey_from_bytes(struct sipkey *k, const unsigned char b[16]);
/* One random key per process, drawn on the first call. */
const struct sipkey *sip_process_key(void);

uint64_t siphash13(const struct sipkey *k, const void *in, size_t n);
uint64_t siphash24(const struct sipkey *k, const void *in, size_t n);
/* 32 bits of siphash13 of a NUL-terminated string with the process key. */
uint32_t sip_str32(const char *s);

#endif
