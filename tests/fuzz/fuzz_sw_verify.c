/* fuzz_sw_verify.c - libFuzzer target for proto_sw_verify (Standard Webhooks v1/v1a).
 *
 * Input: "<msg_id>\n<timestamp>\n<signature header>\n<body...>" (missing parts are empty).
 * Properties: never crashes; a header verifies only if it holds our real signature (else
 * it would be a forgery);
 * a header that starts with our own v1 (or v1a) signature over the same id, timestamp and
 * body always verifies, whatever follows it; base64 round-trips; key texts never crash.
 * runs on: the fuzzer's thread. */
#include "protocol/sign.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct proto_hmac *key;
static unsigned char seed[PROTO_ED25519_SEED], pub[PROTO_ED25519_PUB];

static void init(void)
{
    static const unsigned char k[32] = "fuzz-key-fuzz-key-fuzz-key-fuzz";
    char pk[PROTO_WHPK_MAX];

    memset(seed, 0x5a, sizeof(seed));
    if ((key = proto_hmac_new(k, sizeof(k))) == NULL ||
        proto_ed25519_public(seed, pk, sizeof(pk)) != 0 || proto_whpk_parse(pk, pub) != 0)
        abort();
}

/* Next '\n'-terminated field as a NUL-terminated malloc'd string (stops at a NUL byte). */
static char *field(const uint8_t **p, const uint8_t *end)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    size_t n = nl != NULL ? (size_t)(nl - *p) : (size_t)(end - *p);
    char *s = malloc(n + 1);

    if (s == NULL)
        abort();
    memcpy(s, *p, n);
    s[n] = '\0';
    *p += n + (nl != NULL);
    return s;
}

/* The harness's own reading of a timestamp header: 1..19 digits fitting int64_t. */
static int ts_value(const char *s, int64_t *out)
{
    int64_t v = 0;

    if (*s == '\0')
        return 0;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9' || v > (INT64_MAX - (*s - '0')) / 10)
            return 0;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    char *id, *ts, *sig, mine[PROTO_SIG_MAX], *hdr, b64[256];
    unsigned char dec[256], k[PROTO_SECRET_MAX];
    const char *body;
    size_t len, n;
    int64_t tsv;
    int rc;

    if (key == NULL)
        init();
    id = field(&p, end);
    ts = field(&p, end);
    sig = field(&p, end);
    body = (const char *)p;
    len = (size_t)(end - p);

    rc = proto_sw_verify(key, pub, id, ts, sig, body, len, 1787055532, PROTO_SW_TOLERANCE_S);
    if (rc != 0 && rc != PROTO_ESIG && rc != PROTO_ESTALE && rc != PROTO_EVALUE)
        abort();
    if ((rc == PROTO_EVALUE) != !ts_value(ts, &tsv))
        abort();
    if (rc == 0) {                          /* only with our real signature in the header */
        char v1[PROTO_SIG_MAX], v1a[PROTO_SIG_MAX];
        if (proto_sw_sign(key, id, tsv, body, len, v1, sizeof(v1)) != 0 ||
            proto_sw_sign_ed25519(seed, id, tsv, body, len, v1a, sizeof(v1a)) != 0 ||
            (strstr(sig, v1) == NULL && strstr(sig, v1a) == NULL))
            abort();
    }

    if (rc != PROTO_EVALUE && (hdr = malloc(strlen(sig) + PROTO_SIG_MAX + 2)) != NULL) {
        int ed = (size & 7) == 0;           /* Ed25519 on a share of inputs: it is slow */
        if ((ed ? proto_sw_sign_ed25519(seed, id, tsv, body, len, mine, sizeof(mine))
                : proto_sw_sign(key, id, tsv, body, len, mine, sizeof(mine))) != 0)
            abort();
        strcpy(hdr, mine);
        strcat(hdr, " ");
        strcat(hdr, sig);
        if (proto_sw_verify(ed ? NULL : key, ed ? pub : NULL, id, ts, hdr, body, len, tsv, 0) != 0)
            abort();
        free(hdr);
    }

    /* base64 and key texts. */
    n = size < 150 ? size : 150;
    if (proto_base64_encode(data, n, b64, sizeof(b64)) != 0 ||
        proto_base64_decode(b64, strlen(b64), dec, sizeof(dec), &len) != 0 || len != n ||
        memcmp(dec, data, n) != 0)
        abort();
    (void)proto_base64_decode(sig, strlen(sig), dec, sizeof(dec), &len);
    (void)proto_whsec_parse(sig, k, &len);
    (void)proto_whpk_parse(sig, dec);

    free(id);
    free(ts);
    free(sig);
    return 0;
}
