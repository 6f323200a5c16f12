/* fuzz_upstream_verify.c - libFuzzer target for proto_upstream_verify (X-Signature-SHA256).
 *
 * Input: "<timestamp header>\n<signature hex>\n<body...>".
 * Properties: never crashes; only our real signature verifies (no forgery); ours over the
 * same timestamp text and body verifies in either hex case at the matching time.
 * runs on: the fuzzer's thread. */
#include "protocol/sign.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct proto_hmac *key;

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
    char *ts, *sig, hex[65];
    const char *body;
    size_t len, i;
    int64_t tsv;
    int rc;

    if (key == NULL &&
        (key = proto_hmac_new((const unsigned char *)"example-api-key-not-a-real-key", 30)) == NULL)
        abort();
    ts = field(&p, end);
    sig = field(&p, end);
    body = (const char *)p;
    len = (size_t)(end - p);

    rc = proto_upstream_verify(key, ts, sig, body, len, 1787055532140, 300);
    if (rc != 0 && rc != PROTO_ESIG && rc != PROTO_ESTALE && rc != PROTO_EVALUE)
        abort();
    if ((rc == PROTO_EVALUE) != !ts_value(ts, &tsv))
        abort();

    if (proto_upstream_sign(key, ts, body, len, hex) != 0 || strlen(hex) != 64)
        abort();
    if (rc == 0 && strcasecmp(sig, hex) != 0)   /* only our real signature verifies */
        abort();
    if (rc != PROTO_EVALUE) {
        int64_t ms = tsv > 1000000000000LL ? tsv : tsv * 1000;
        if (proto_upstream_verify(key, ts, hex, body, len, ms, 0) != 0)
            abort();
        for (i = 0; i < 64; i++)
            if (hex[i] >= 'a' && hex[i] <= 'f')
                hex[i] = (char)(hex[i] - 'a' + 'A');
        if (proto_upstream_verify(key, ts, hex, body, len, ms, 0) != 0)
            abort();
    }
    free(ts);
    free(sig);
    return 0;
}
