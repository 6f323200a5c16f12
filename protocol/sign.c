/* sign.c - webhook signatures: Standard Webhooks v1 (HMAC-SHA256) and v1a (Ed25519), whsec_
 * and whpk_ key texts, base64, and the upstream's X-Signature-SHA256 scheme.
 *
 * HMAC is computed by hand from two SHA-256 states precomputed per key (RFC 2104): the key
 * schedule (hashing key^ipad and key^opad) runs once in proto_hmac_new, each message costs
 * two state copies and the hashing of the message. No globals, no clock, no RNG: callers
 * pass keys, random bytes and the current time. Every comparison of a signature is
 * CRYPTO_memcmp. Memory comes from OPENSSL_malloc so that one allocator hook (the tests'
 * chaos allocator) covers ours and libcrypto's; every failure returns PROTO_ENOMEM / NULL
 * and clears the thread's OpenSSL error queue so that no stale error leaks to other users
 * of libcrypto (libcurl's TLS) on the same thread.
 * runs on: any thread (a struct proto_hmac is owned by one thread at a time). */
#include "protocol/sign.h"
#include "protocol/proto.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#define SHA256_LEN 32
#define SHA256_BLOCK 64
#define ED25519_SIG 64
#define TS_TEXT_MAX 24              /* ".<int64>." and a NUL */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char whsec_prefix[] = "whsec_";
static const char whpk_prefix[] = "whpk_";

/* ---- base64 ---------------------------------------------------------------------------- */

int proto_base64_encode(const void *in, size_t n, char *out, size_t outsz)
{
    const unsigned char *p = in;
    size_t i, o = 0;

    if (n > (SIZE_MAX - 1) / 4 * 3 - 2 || outsz < PROTO_BASE64_LEN(n) + 1)
        return PROTO_ETOOLONG;
    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = b64_alphabet[(v >> 6) & 63];
        out[o++] = b64_alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        out[o++] = b64_alphabet[v >> 18];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
    return 0;
}

/* Value of one base64 character, or -1. */
static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int proto_base64_decode(const char *in, size_t len, unsigned char *out, size_t outsz,
                        size_t *outlen)
{
    size_t i, o = 0, pad = 0;

    if (in == NULL || len % 4 != 0)
        return PROTO_EVALUE;
    if (len > 0 && in[len - 1] == '=')
        pad = len > 1 && in[len - 2] == '=' ? 2 : 1;
    if (len / 4 * 3 - pad > outsz)
        return PROTO_ETOOLONG;
    for (i = 0; i < len; i += 4) {
        int v[4], k, last = i + 4 == len;
        for (k = 0; k < 4; k++) {
            if (last && k >= 4 - (int)pad) {
                v[k] = 0;                       /* '=' only at the very end */
                continue;
            }
            if ((v[k] = b64_value((unsigned char)in[i + k])) < 0)
                return PROTO_EVALUE;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | v[3];
        out[o++] = (unsigned char)(w >> 16);
        if (!last || pad < 2)
            out[o++] = (unsigned char)(w >> 8);
        if (!last || pad < 1)
            out[o++] = (unsigned char)w;
    }
    *outlen = o;
    return 0;
}

/* ---- key texts ------------------------------------------------------------------------- */

int proto_whsec_format(const unsigned char *random, size_t n, char *out, size_t outsz)
{
    size_t plen = sizeof(whsec_prefix) - 1;

    if (random == NULL || out == NULL || n < 24 || n > PROTO_SECRET_MAX ||
        outsz < plen + PROTO_BASE64_LEN(n) + 1)
        return PROTO_EVALUE;
    memcpy(out, whsec_prefix, plen);
    return proto_base64_encode(random, n, out + plen, outsz - plen) == 0 ? 0 : PROTO_EVALUE;
}

/* Decode "<prefix><base64>" (prefix optional) into out[0..outsz), exactly want bytes when
 * want > 0, else 1..outsz bytes. */
static int parse_key_text(const char *text, const char *prefix, unsigned char *out,
                          size_t outsz, size_t want, size_t *outlen)
{
    size_t plen = strlen(prefix), n;

    if (text == NULL)
        return PROTO_EVALUE;
    if (strncmp(text, prefix, plen) == 0)
        text += plen;
    /* Longest text that can decode to outsz bytes; bounds strlen on hostile input. */
    n = strnlen(text, PROTO_BASE64_LEN(outsz) + 1);
    if (n > PROTO_BASE64_LEN(outsz) ||
        proto_base64_decode(text, n, out, outsz, outlen) != 0 || *outlen == 0 ||
        (want > 0 && *outlen != want)) {
        OPENSSL_cleanse(out, outsz);
        return PROTO_EVALUE;
    }
    return 0;
}

int proto_whsec_parse(const char *secret, unsigned char *key, size_t *keylen)
{
    if (key == NULL || keylen == NULL)
        return PROTO_EVALUE;
    return parse_key_text(secret, whsec_prefix, key, PROTO_SECRET_MAX, 0, keylen);
}

int proto_whpk_parse(const char *pubkey, unsigned char pub[PROTO_ED25519_PUB])
{
    size_t n;

    if (pub == NULL)
        return PROTO_EVALUE;
    return parse_key_text(pubkey, whpk_prefix, pub, PROTO_ED25519_PUB, PROTO_ED25519_PUB, &n);
}

/* ---- HMAC-SHA256 with a precomputed key schedule ---------------------------------------- */

struct proto_hmac {
    EVP_MD_CTX *inner;   /* SHA-256 after absorbing key ^ ipad; never finalised */
    EVP_MD_CTX *outer;   /* SHA-256 after absorbing key ^ opad; never finalised */
    EVP_MD_CTX *work;    /* scratch: a copy of inner or outer per message */
};

void proto_hmac_free(struct proto_hmac *h)
{
    if (h == NULL)
        return;
    EVP_MD_CTX_free(h->inner);   /* the provider wipes the hash state it frees */
    EVP_MD_CTX_free(h->outer);
    EVP_MD_CTX_free(h->work);
    OPENSSL_free(h);
}

struct proto_hmac *proto_hmac_new(const unsigned char *key, size_t keylen)
{
    unsigned char block[SHA256_BLOCK] = {0}, pad[SHA256_BLOCK];
    struct proto_hmac *h;
    size_t i;

    if (key == NULL && keylen > 0)
        return NULL;
    if ((h = OPENSSL_zalloc(sizeof(*h))) == NULL)
        goto fail;
    if ((h->inner = EVP_MD_CTX_new()) == NULL || (h->outer = EVP_MD_CTX_new()) == NULL ||
        (h->work = EVP_MD_CTX_new()) == NULL)
        goto fail;
    if (keylen > SHA256_BLOCK) {                    /* RFC 2104: long keys are hashed first */
        if (!EVP_Digest(key, keylen, block, NULL, EVP_sha256(), NULL))
            goto fail;
    } else if (keylen > 0) {
        memcpy(block, key, keylen);
    }
    for (i = 0; i < SHA256_BLOCK; i++)
        pad[i] = block[i] ^ 0x36;
    if (!EVP_DigestInit_ex(h->inner, EVP_sha256(), NULL) ||
        !EVP_DigestUpdate(h->inner, pad, sizeof(pad)))
        goto fail;
    for (i = 0; i < SHA256_BLOCK; i++)
        pad[i] = block[i] ^ 0x5c;
    if (!EVP_DigestInit_ex(h->outer, EVP_sha256(), NULL) ||
        !EVP_DigestUpdate(h->outer, pad, sizeof(pad)))
        goto fail;
    OPENSSL_cleanse(block, sizeof(block));
    OPENSSL_cleanse(pad, sizeof(pad));
    return h;
fail:
    OPENSSL_cleanse(block, sizeof(block));
    OPENSSL_cleanse(pad, sizeof(pad));
    proto_hmac_free(h);
    ERR_clear_error();
    return NULL;
}

int proto_hmac_4(struct proto_hmac *h, const void *p1, size_t n1, const void *p2, size_t n2,
                 const void *p3, size_t n3, const void *p4, size_t n4, unsigned char mac[32])
{
    const void *part[4] = {p1, p2, p3, p4};
    size_t len[4] = {n1, n2, n3, n4};
    unsigned char ih[SHA256_LEN];
    int i, ok;

    if (h == NULL || mac == NULL)
        return PROTO_EVALUE;
    ok = EVP_MD_CTX_copy_ex(h->work, h->inner);
    for (i = 0; ok && i < 4; i++)
        ok = len[i] == 0 || EVP_DigestUpdate(h->work, part[i], len[i]);
    ok = ok && EVP_DigestFinal_ex(h->work, ih, NULL) && EVP_MD_CTX_copy_ex(h->work, h->outer) &&
         EVP_DigestUpdate(h->work, ih, sizeof(ih)) && EVP_DigestFinal_ex(h->work, mac, NULL);
    OPENSSL_cleanse(ih, sizeof(ih));
    if (!ok) {
        ERR_clear_error();
        return PROTO_ENOMEM;
    }
    return 0;
}

/* ---- Standard Webhooks ------------------------------------------------------------------ */

/* ".<ts>." into buf (TS_TEXT_MAX); returns its length. */
static size_t ts_text(int64_t ts, char buf[TS_TEXT_MAX])
{
    return (size_t)snprintf(buf, TS_TEXT_MAX, ".%" PRId64 ".", ts);
}

/* The signed content "<msg_id>.<ts>.<body>" in one OPENSSL_malloc'd buffer (Ed25519 is
 * one-shot). Returns NULL on allocation failure or a length overflow. */
static unsigned char *signed_content(const char *msg_id, int64_t ts, const char *body,
                                     size_t len, size_t *total)
{
    char t[TS_TEXT_MAX];
    size_t idlen = strlen(msg_id), tlen = ts_text(ts, t);
    unsigned char *m;

    if (len > SIZE_MAX - idlen - tlen)
        return NULL;
    *total = idlen + tlen + len;
    if ((m = OPENSSL_malloc(*total > 0 ? *total : 1)) == NULL)
        return NULL;
    memcpy(m, msg_id, idlen);
    memcpy(m + idlen, t, tlen);
    if (len > 0)
        memcpy(m + idlen + tlen, body, len);
    return m;
}

/* Expected v1 signature text (base64 of the HMAC, no "v1," prefix) into b64 (>= 45). */
static int sw_hmac_b64(struct proto_hmac *key, const char *msg_id, int64_t ts,
                       const char *body, size_t len, char *b64, size_t b64sz)
{
    unsigned char mac[SHA256_LEN];
    char t[TS_TEXT_MAX];
    size_t tlen = ts_text(ts, t);
    int rc;

    rc = proto_hmac_4(key, msg_id, strlen(msg_id), t, tlen, body, len, NULL, 0, mac);
    if (rc == 0)
        rc = proto_base64_encode(mac, sizeof(mac), b64, b64sz) == 0 ? 0 : PROTO_EVALUE;
    OPENSSL_cleanse(mac, sizeof(mac));
    return rc;
}

int proto_sw_sign(struct proto_hmac *key, const char *msg_id, int64_t timestamp_s,
                  const char *body, size_t len, char *out, size_t outsz)
{
    if (key == NULL || msg_id == NULL || out == NULL || (body == NULL && len > 0) ||
        timestamp_s < 0 || outsz < 3 + PROTO_BASE64_LEN(SHA256_LEN) + 1)
        return PROTO_EVALUE;
    memcpy(out, "v1,", 3);
    return sw_hmac_b64(key, msg_id, timestamp_s, body, len, out + 3, outsz - 3);
}

/* An Ed25519 private key from a raw seed, or NULL (allocation failure). */
static EVP_PKEY *ed25519_key(const unsigned char seed[PROTO_ED25519_SEED])
{
    return EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, PROTO_ED25519_SEED);
}

int proto_sw_sign_ed25519(const unsigned char seed[PROTO_ED25519_SEED], const char *msg_id,
                          int64_t timestamp_s, const char *body, size_t len, char *out,
                          size_t outsz)
{
    unsigned char *msg = NULL, sig[ED25519_SIG];
    size_t mlen = 0, siglen = sizeof(sig);
    EVP_PKEY *pkey = NULL;
    EVP_MD_CTX *md = NULL;
    int rc = PROTO_ENOMEM;

    if (seed == NULL || msg_id == NULL || out == NULL || (body == NULL && len > 0) ||
        timestamp_s < 0 || outsz < 4 + PROTO_BASE64_LEN(ED25519_SIG) + 1)
        return PROTO_EVALUE;
    if ((msg = signed_content(msg_id, timestamp_s, body, len, &mlen)) == NULL ||
        (pkey = ed25519_key(seed)) == NULL || (md = EVP_MD_CTX_new()) == NULL ||
        EVP_DigestSignInit(md, NULL, NULL, NULL, pkey) != 1 ||
        EVP_DigestSign(md, sig, &siglen, msg, mlen) != 1 || siglen != ED25519_SIG)
        goto out;
    memcpy(out, "v1a,", 4);
    rc = proto_base64_encode(sig, siglen, out + 4, outsz - 4) == 0 ? 0 : PROTO_EVALUE;
out:
    if (rc != 0)
        ERR_clear_error();
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pkey);
    OPENSSL_free(msg);
    return rc;
}

int proto_ed25519_public(const unsigned char seed[PROTO_ED25519_SEED], char *out, size_t outsz)
{
    unsigned char pub[PROTO_ED25519_PUB];
    size_t publen = sizeof(pub), plen = sizeof(whpk_prefix) - 1;
    EVP_PKEY *pkey;
    int rc = PROTO_ENOMEM;

    if (seed == NULL || out == NULL || outsz < plen + PROTO_BASE64_LEN(PROTO_ED25519_PUB) + 1)
        return PROTO_EVALUE;
    if ((pkey = ed25519_key(seed)) != NULL &&
        EVP_PKEY_get_raw_public_key(pkey, pub, &publen) == 1 && publen == sizeof(pub)) {
        memcpy(out, whpk_prefix, plen);
        rc = proto_base64_encode(pub, publen, out + plen, outsz - plen) == 0 ? 0 : PROTO_EVALUE;
    }
    if (rc != 0)
        ERR_clear_error();
    EVP_PKEY_free(pkey);
    return rc;
}

/* A timestamp header: 1..19 ASCII digits (leading zeros allowed, as parseInt does; no sign,
 * no space) whose value fits int64_t. Returns 0 or PROTO_EVALUE. */
static int parse_ts(const char *s, int64_t *out)
{
    int64_t v = 0;
    size_t i;

    if (s == NULL || s[0] == '\0')
        return PROTO_EVALUE;
    for (i = 0; s[i] != '\0'; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (INT64_MAX - (s[i] - '0')) / 10)
            return PROTO_EVALUE;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* 1 when |a - b| > tol, computed without overflow for any int64 values. */
static int outside(int64_t a, int64_t b, int64_t tol)
{
    uint64_t d = a >= b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;

    return d > (uint64_t)(tol > 0 ? tol : 0);
}

/* State of one proto_sw_verify call: the expensive parts are computed on first use. */
struct sw_check {
    struct proto_hmac *hmac;
    const unsigned char *pub;
    const char *msg_id, *body;
    size_t len;
    int64_t ts;
    char expect[PROTO_BASE64_LEN(SHA256_LEN) + 1];   /* v1: "" until computed */
    unsigned char *msg;                               /* v1a: content, NULL until built */
    size_t mlen;
    EVP_PKEY *pkey;
    EVP_MD_CTX *md;
};

/* Check one "v1,..." entry. Returns 0 (match), PROTO_ESIG or PROTO_ENOMEM. */
static int check_v1(struct sw_check *c, const char *sig, size_t n)
{
    size_t elen = PROTO_BASE64_LEN(SHA256_LEN);
    int rc;

    if (c->hmac == NULL)
        return PROTO_ESIG;
    if (c->expect[0] == '\0' &&
        (rc = sw_hmac_b64(c->hmac, c->msg_id, c->ts, c->body, c->len, c->expect,
                          sizeof(c->expect))) != 0)
        return rc;
    return n == elen && CRYPTO_memcmp(sig, c->expect, elen) == 0 ? 0 : PROTO_ESIG;
}

/* Check one "v1a,..." entry. Returns 0 (match), PROTO_ESIG or PROTO_ENOMEM. */
static int check_v1a(struct sw_check *c, const char *sig, size_t n)
{
    unsigned char raw[ED25519_SIG];
    char canon[PROTO_BASE64_LEN(ED25519_SIG) + 1];
    size_t rawlen;
    int ok;

    if (c->pub == NULL)
        return PROTO_ESIG;
    /* Canonical text only (no ignored trailing bits): one signature, one spelling. */
    if (n != PROTO_BASE64_LEN(ED25519_SIG) ||
        proto_base64_decode(sig, n, raw, sizeof(raw), &rawlen) != 0 || rawlen != sizeof(raw) ||
        proto_base64_encode(raw, rawlen, canon, sizeof(canon)) != 0 || memcmp(canon, sig, n))
        return PROTO_ESIG;
    if (c->msg == NULL &&
        (c->msg = signed_content(c->msg_id, c->ts, c->body, c->len, &c->mlen)) == NULL)
        return PROTO_ENOMEM;
    if (c->pkey == NULL && (c->pkey = EVP_PKEY_new_raw_public_key(
                                EVP_PKEY_ED25519, NULL, c->pub, PROTO_ED25519_PUB)) == NULL)
        return PROTO_ENOMEM;
    if (c->md == NULL && (c->md = EVP_MD_CTX_new()) == NULL)
        return PROTO_ENOMEM;
    if (EVP_MD_CTX_reset(c->md) != 1 ||
        EVP_DigestVerifyInit(c->md, NULL, NULL, NULL, c->pkey) != 1)
        return PROTO_ENOMEM;
    ok = EVP_DigestVerify(c->md, raw, sizeof(raw), c->msg, c->mlen) == 1;
    ERR_clear_error();                      /* a mismatch may leave an error queued */
    return ok ? 0 : PROTO_ESIG;
}

int proto_sw_verify(struct proto_hmac *hmac, const unsigned char *ed25519_pub,
                    const char *msg_id, const char *ts_header, const char *sig_header,
                    const char *body, size_t len, int64_t now_s, int64_t tolerance_s)
{
    struct sw_check c = {.hmac = hmac, .pub = ed25519_pub, .msg_id = msg_id, .body = body,
                         .len = len};
    const char *p;
    int rc = PROTO_ESIG, seen = 0;

    if (parse_ts(ts_header, &c.ts) != 0)
        return PROTO_EVALUE;
    if (msg_id == NULL || sig_header == NULL || (body == NULL && len > 0))
        return PROTO_ESIG;
    if (outside(now_s, c.ts, tolerance_s))
        return PROTO_ESTALE;
    for (p = sig_header; *p != '\0' && rc == PROTO_ESIG && seen < PROTO_SW_MAX_SIGS;) {
        size_t n = strcspn(p, " ");

        if (n == 0) {                       /* runs of spaces between entries */
            p++;
            continue;
        }
        seen++;
        if (n > 3 && memcmp(p, "v1,", 3) == 0)
            rc = check_v1(&c, p + 3, n - 3);
        else if (n > 4 && memcmp(p, "v1a,", 4) == 0)
            rc = check_v1a(&c, p + 4, n - 4);
        p += n;                             /* unknown versions are skipped */
    }
    if (rc == PROTO_ENOMEM)
        ERR_clear_error();
    OPENSSL_cleanse(c.expect, sizeof(c.expect));
    EVP_MD_CTX_free(c.md);
    EVP_PKEY_free(c.pkey);
    OPENSSL_free(c.msg);
    return rc;
}

/* ---- the upstream's X-Signature-SHA256 ------------------------------------------------- */

int proto_upstream_sign(struct proto_hmac *key, const char *ts_header, const char *body,
                        size_t len, char hex_out[65])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char mac[SHA256_LEN];
    int i, rc;

    if (key == NULL || ts_header == NULL || hex_out == NULL || (body == NULL && len > 0))
        return PROTO_EVALUE;
    if ((rc = proto_hmac_4(key, ts_header, strlen(ts_header), ".", 1, body, len, NULL, 0,
                           mac)) != 0)
        return rc;
    for (i = 0; i < SHA256_LEN; i++) {
        hex_out[2 * i] = hex[mac[i] >> 4];
        hex_out[2 * i + 1] = hex[mac[i] & 15];
    }
    hex_out[64] = '\0';
    OPENSSL_cleanse(mac, sizeof(mac));
    return 0;
}

static int hex_value(unsigned char c)
{
    return proto_hex_digit(c);
}

int proto_upstream_verify(struct proto_hmac *key, const char *ts_header, const char *sig_hex,
                          const char *body, size_t len, int64_t now_ms, int64_t tolerance_s)
{
    unsigned char want[SHA256_LEN], mac[SHA256_LEN];
    int64_t ts, ts_ms, tol_ms;
    int i, rc;

    if (parse_ts(ts_header, &ts) != 0)
        return PROTO_EVALUE;
    if (key == NULL || sig_hex == NULL || strnlen(sig_hex, 65) != 64 || (body == NULL && len))
        return PROTO_ESIG;
    for (i = 0; i < SHA256_LEN; i++) {
        int hi = hex_value((unsigned char)sig_hex[2 * i]);
        int lo = hex_value((unsigned char)sig_hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return PROTO_ESIG;
        want[i] = (unsigned char)(hi << 4 | lo);
    }
    ts_ms = ts > 1000000000000LL ? ts : ts * 1000;   /* seconds (<= 10^12) cannot overflow */
    tol_ms = tolerance_s > INT64_MAX / 1000 ? INT64_MAX : tolerance_s * 1000;
    if (outside(now_ms, ts_ms, tol_ms))
        return PROTO_ESTALE;
    if ((rc = proto_hmac_4(key, ts_header, strlen(ts_header), ".", 1, body, len, NULL, 0,
                           mac)) != 0)
        return rc;
    rc = CRYPTO_memcmp(mac, want, sizeof(mac)) == 0 ? 0 : PROTO_ESIG;
    OPENSSL_cleanse(mac, sizeof(mac));
    return rc;
}
