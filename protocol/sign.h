/* sign.h - webhook signatures: Standard Webhooks (v1 HMAC-SHA256, v1a Ed25519) and the
 * upstream's own X-Signature-SHA256 scheme.
 *
 * Pure: callers pass keys, random bytes and the current time. Comparisons of signatures are
 * constant-time (CRYPTO_memcmp). Links libcrypto only.
 * runs on: any thread (a struct proto_hmac is owned by one thread at a time). */
#ifndef PROTO_SIGN_H
#define PROTO_SIGN_H

#include "protocol/proto.h"

#include <stddef.h>
#include <stdint.h>

#define PROTO_SECRET_BYTES 32       /* random bytes in a generated whsec_ secret */
#define PROTO_SECRET_MAX 128        /* longest accepted secret key in bytes (decoded) */
#define PROTO_WHSEC_MAX 200         /* buffer for "whsec_" + base64 */
#define PROTO_SIG_MAX 96            /* buffer for one "v1,<base64>" / "v1a,<base64>" */
#define PROTO_ED25519_SEED 32
#define PROTO_ED25519_PUB 32
#define PROTO_SW_TOLERANCE_S 300    /* default Standard Webhooks timestamp tolerance */

/* "whsec_" + base64(random[0..n)), n >= 24. out holds PROTO_WHSEC_MAX. Returns 0 or
 * PROTO_EVALUE. */
int proto_whsec_format(const unsigned char *random, size_t n, char *out, size_t outsz);
/* Decode "whsec_<base64>" (the prefix is optional, as in the official libraries) into key
 * bytes. Returns 0 or PROTO_EVALUE. *keylen <= PROTO_SECRET_MAX. */
int proto_whsec_parse(const char *secret, unsigned char *key, size_t *keylen);

/* A reusable HMAC-SHA256 key (OpenSSL context set up once per secret: signing thousands of
 * bodies with the same secret does not redo the key schedule). */
struct proto_hmac;
struct proto_hmac *proto_hmac_new(const unsigned char *key, size_t keylen);
void proto_hmac_free(struct proto_hmac *h);
/* mac = HMAC(key, p1 || p2 || p3 || p4), any part may be NULL/0. Returns 0 or PROTO_ENOMEM. */
int proto_hmac_4(struct proto_hmac *h, const void *p1, size_t n1, const void *p2, size_t n2,
                 const void *p3, size_t n3, const void *p4, size_t n4, unsigned char mac[32]);

/* Standard Webhooks v1: "v1," + base64(HMAC(key, "<msg_id>.<timestamp_s>.<body>")).
 * out holds PROTO_SIG_MAX. Returns 0 or PROTO_ENOMEM. */
int proto_sw_sign(struct proto_hmac *key, const char *msg_id, int64_t timestamp_s,
                  const char *body, size_t len, char *out, size_t outsz);

/* Standard Webhooks v1a: "v1a," + base64(Ed25519(seed, "<msg_id>.<timestamp_s>.<body>")). */
int proto_sw_sign_ed25519(const unsigned char seed[PROTO_ED25519_SEED], const char *msg_id,
                          int64_t timestamp_s, const char *body, size_t len, char *out,
                          size_t outsz);
/* Public key of a seed, as "whpk_" + base64(32 bytes) in out (>= 64 bytes). */
int proto_ed25519_public(const unsigned char seed[PROTO_ED25519_SEED], char *out, size_t outsz);

/* Verify a webhook-signature header value (space-separated "v1,..."/"v1a,..." entries; any
 * one valid entry suffices) against keys: hmac (may be NULL) and ed25519 public key bytes
 * (may be NULL). The webhook-timestamp header text ts_header must be within tolerance_s of
 * now_s. Returns 0, PROTO_ESIG or PROTO_ESTALE (or PROTO_EVALUE for an unparsable ts). */
int proto_sw_verify(struct proto_hmac *hmac, const unsigned char *ed25519_pub,
                    const char *msg_id, const char *ts_header, const char *sig_header,
                    const char *body, size_t len, int64_t now_s, int64_t tolerance_s);

/* Upstream scheme: hex_out = lowercase hex(HMAC(key, "<ts_header>.<body>")), 65 bytes. */
int proto_upstream_sign(struct proto_hmac *key, const char *ts_header, const char *body,
                        size_t len, char hex_out[65]);
/* Verify X-Signature-SHA256 (hex, either case) over the raw body. The timestamp header may be
 * seconds or milliseconds (value > 10^12 means ms); it must be within tolerance_s of now_ms.
 * Returns 0, PROTO_ESIG, PROTO_ESTALE or PROTO_EVALUE. */
int proto_upstream_verify(struct proto_hmac *key, const char *ts_header, const char *sig_hex,
                          const char *body, size_t len, int64_t now_ms, int64_t tolerance_s);

#endif
