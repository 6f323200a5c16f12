/* siphash.c - see siphash.h. Written from the algorithm in the SipHash paper (section 2):
 * v0..v3 initialised from the key and the constants "somepseudorandomlygeneratedbytes",
 * c SipRounds per 8-byte little-endian word m (v3 ^= m before, v0 ^= m after), the last word
 * carrying the length in its top byte, then v2 ^= 0xff and d SipRounds; the output is
 * v0 ^ v1 ^ v2 ^ v3. runs on: any thread. */
#include "relay/common/siphash.h"
#include "relay/common/util.h"

#include <pthread.h>
#include <string.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

static uint64_t siphash_cd(const struct sipkey *k, const void *in, size_t n, int c, int d)
{
    const unsigned char *p = in;
    uint64_t v0 = k->k0 ^ 0x736f6d6570736575ULL, v1 = k->k1 ^ 0x646f72616e646f6dULL,
             v2 = k->k0 ^ 0x6c7967656e657261ULL, v3 = k->k1 ^ 0x7465646279746573ULL;
    const unsigned char *end = p + (n - n % 8);
    for (; p != end; p += 8) {
        uint64_t m = le64(p);
        v3 ^= m;
        for (int i = 0; i < c; i++)
            SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)n << 56;
    for (size_t i = 0; i < n % 8; i++)
        b |= (uint64_t)p[i] << (8 * i);
    v3 ^= b;
    for (int i = 0; i < c; i++)
        SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    for (int i = 0; i < d; i++)
        SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t siphash13(const struct sipkey *k, const void *in, size_t n)
{
    return siphash_cd(k, in, n, 1, 3);
}

uint64_t siphash24(const struct sipkey *k, const void *in, size_t n)
{
    return siphash_cd(k, in, n, 2, 4);
}

void sipkey_from_bytes(struct sipkey *k, const unsigned char b[16])
{
    k->k0 = le64(b);
    k->k1 = le64(b + 8);
}

void sipkey_random(struct sipkey *k)
{
    unsigned char b[16];
    os_random(b, sizeof(b));
    sipkey_from_bytes(k, b);
}

static struct sipkey proc_key;
static pthread_once_t proc_once = PTHREAD_ONCE_INIT;

static void proc_init(void)
{
    sipkey_random(&proc_key);
}

const struct sipkey *sip_process_key(void)
{
    pthread_once(&proc_once, proc_init);
    return &proc_key;
}

uint32_t sip_str32(const char *s)
{
    return (uint32_t)siphash13(sip_process_key(), s, strlen(s));
}
