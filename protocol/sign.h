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
#define PROTO_WHPK_MAX 64           /* buffer for "whpk_" + base64(32 bytes) */
#define PROTO_SW_MAX_SIGS 16        /* entries of one webhook-signature header examined */

/* Encoded length of n bytes in padded base64, without the terminating NUL. */
#define PROTO_BASE64_LEN(n) (((n) + 2) / 3 * 4)

/* Base64, standard alphabet with padding (RFC 4648 section 4). Writes a NUL-terminated text
 * of PROTO_BASE64_LEN(n) chars into out. Returns 0 or PROTO_ETOOLONG when outsz is short. */
int proto_base64_encode(const void *in, size_t n, char *out, size_t outsz);
/* Decode len chars of padded standard base64 (no whitespace, no URL alphabet, length a
 * multiple of 4; unused trailing bits are ignored, as in the official libraries) into out.
 * Returns 0 with *outlen set, PROTO_EVALUE for malformed text, or PROTO_ETOOLONG when the
 * result does not fit outsz (nothing is promised about out then). */
int proto_base64_decode(const char *in, size_t len, unsigned char *out, size_t outsz,
                        size_t *outlen);

/* "whsec_" + base64(random[0..n)), 24 <= n <= PROTO_SECRET_MAX. out holds PROTO_WHSEC_MAX.
 * Returns 0 or PROTO_EVALUE. */
int proto_whsec_format(const unsigned char *random, size_t n, char *out, size_t outsz);
/* Decode "whsec_<base64>" (the prefix is optional, as in the official libraries) into key
 * bytes; key holds PROTO_SECRET_MAX bytes. Any non-empty key is accepted (minimum length is
 * the caller's policy). Returns 0 or PROTO_EVALUE (key wiped). *keylen <= PROTO_SECRET_MAX. */
int proto_whsec_parse(const char *secret, unsigned char *key, size_t *keylen);

/* A reusable HMAC-SHA256 key (OpenSSL context set up once per secret: signing thousands of
 * bodies with the same secret does not redo the key schedule). Keys of any length (0 too;
 * longer than 64 bytes are hashed first, RFC 2104). Returns NULL on allocation failure. The
 * key bytes are not kept (only the derived SHA-256 states); the caller may wipe its copy. */
struct proto_hmac;
struct proto_hmac *proto_hmac_new(const unsigned char *key, size_t keylen);
/* NULL-safe. */
void proto_hmac_free(struct proto_hmac *h);
/* mac = HMAC(key, p1 || p2 || p3 || p4), any part may be NULL/0. Returns 0 or PROTO_ENOMEM
 * (PROTO_EVALUE for a NULL h or mac). */
int proto_hmac_4(struct proto_hmac *h, const void *p1, size_t n1, const void *p2, size_t n2,
                 const void *p3, size_t n3, const void *p4, size_t n4, unsigned char mac[32]);

/* Standard Webhooks v1: "v1," + base64(HMAC(key, "<msg_id>.<timestamp_s>.<body>")).
 * out holds PROTO_SIG_MAX. Returns 0 or PROTO_ENOMEM (PROTO_EVALUE for a NULL key or id, a
 * negative timestamp or a short out). */
int proto_sw_sign(struct proto_hmac *key, const char *msg_id, int64_t timestamp_s,
                  const char *body, size_t len, char *out, size_t outsz);

/* Standard Webhooks v1a: "v1a," + base64(Ed25519(seed, "<msg_id>.<timestamp_s>.<body>")).
 * out holds PROTO_SIG_MAX. Returns 0, PROTO_ENOMEM or PROTO_EVALUE (as proto_sw_sign). */
int proto_sw_sign_ed25519(const unsigned char seed[PROTO_ED25519_SEED], const char *msg_id,
                          int64_t timestamp_s, const char *body, size_t len, char *out,
                          size_t outsz);
/* Public key of a seed, as "whpk_" + base64(32 bytes) in out (PROTO_WHPK_MAX). Returns 0,
 * PROTO_ENOMEM or PROTO_EVALUE. */
int proto_ed25519_public(const unsigned char seed[PROTO_ED25519_SEED], char *out, size_t outsz);
/* Decode "whpk_<base64>" (prefix optional) into the 32 raw public key bytes that
 * proto_sw_verify takes. Returns 0 or PROTO_EVALUE. */
int proto_whpk_parse(const char *pubkey, unsigned char pub[PROTO_ED25519_PUB]);

/* Verify a webhook-signature header value (space-separated "v1,..."/"v1a,..." entries; any
 * one valid entry suffices) against keys: hmac (may be NULL) and ed25519 public key bytes
 * (may be NULL). The webhook-timestamp header text ts_header must be within tolerance_s of
 * now_s (|now_s - ts| <= tolerance_s, checked before any signature). Returns 0, PROTO_ESIG
 * or PROTO_ESTALE (or PROTO_EVALUE for an unparsable ts, PROTO_ENOMEM).
 * Details: ts_header is ASCII digits only (no sign or space; leading zeros allowed and the
 * value re-formatted as an integer in the signed content, as the official libraries do)
 * whose value fits int64_t. Signatures must be canonical padded base64 (v1 is compared as
 * text, like the official libraries). Entries with other versions are skipped; only the
 * first PROTO_SW_MAX_SIGS non-empty entries are examined (bounds the Ed25519 work an
 * attacker can cause). A NULL msg_id or sig_header is PROTO_ESIG. */
int proto_sw_verify(struct proto_hmac *hmac, const unsigned char *ed25519_pub,
                    const char *msg_id, const char *ts_header, const char *sig_header,
                    const char *body, size_t len, int64_t now_s, int64_t tolerance_s);

/* Upstream scheme: hex_out = lowercase hex(HMAC(key, "<ts_header>.<body>")), 65 bytes, the
 * ts_header text used verbatim. Returns 0, PROTO_ENOMEM or PROTO_EVALUE (NULL arguments). */
int proto_upstream_sign(struct proto_hmac *key, const char *ts_header, const char *body,
                        size_t len, char hex_out[65]);
/* Verify X-Signature-SHA256 (hex, either case) over the raw body. The timestamp header may be
 * seconds or milliseconds (value > 10^12 means ms); it must be within tolerance_s of now_ms.
 * Returns 0, PROTO_ESIG, PROTO_ESTALE or PROTO_EVALUE (or PROTO_ENOMEM). The HMAC covers the
 * ts_header text verbatim; a signature that is not exactly 64 hex digits is PROTO_ESIG. */
int proto_upstream_verify(struct proto_hmac *key, const char *ts_header, const char *sig_hex,
                          const char *body, size_t len, int64_t now_ms, int64_t tolerance_s);

#endif
