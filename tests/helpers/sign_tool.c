/* sign_tool.c - command-line front end to protocol/sign.c for tests and operators: sign and
 * verify Standard Webhooks (v1 HMAC, v1a Ed25519) and upstream X-Signature-SHA256 values,
 * generate secrets, and measure the signing rate.
 *
 *   sign_tool sw-sign WHSEC MSGID TS BODYFILE            print "v1,<base64>"
 *   sign_tool sw-sign-ed SEEDHEX MSGID TS BODYFILE       print "v1a,<base64>"
 *   sign_tool sw-verify KEY MSGID TS SIGHEADER BODYFILE [NOW_S [TOLERANCE_S]]
 *                                                        KEY is whsec_... or whpk_...
 *   sign_tool ed-public SEEDHEX                          print "whpk_<base64>"
 *   sign_tool upstream-sign KEY TS BODYFILE              print lowercase hex
 *   sign_tool upstream-verify KEY TS SIGHEX BODYFILE [NOW_MS [TOLERANCE_S]]
 *   sign_tool whsec-gen [BYTES]                          print a new "whsec_..." secret
 *   sign_tool bench [SECONDS [BODYBYTES]]                print v1 signatures per second
 *
 * BODYFILE "-" reads stdin. Verify commands exit 0 (valid), 1 (invalid, reason on stderr);
 * every command exits 2 on bad usage. NOW defaults to the current time.
 * runs on: its own process, one thread. */
#include "protocol/sign.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

static int usage(void)
{
    fprintf(stderr,
            "usage: sign_tool sw-sign WHSEC MSGID TS BODYFILE\n"
            "       sign_tool sw-sign-ed SEEDHEX MSGID TS BODYFILE\n"
            "       sign_tool sw-verify WHSEC|WHPK MSGID TS SIGHEADER BODYFILE [NOW_S [TOL_S]]\n"
            "       sign_tool ed-public SEEDHEX\n"
            "       sign_tool upstream-sign KEY TS BODYFILE\n"
            "       sign_tool upstream-verify KEY TS SIGHEX BODYFILE [NOW_MS [TOL_S]]\n"
            "       sign_tool whsec-gen [BYTES]\n"
            "       sign_tool bench [SECONDS [BODYBYTES]]\n");
    return 2;
}

/* Whole file (or stdin for "-") into a malloc'd buffer; exits 2 on failure. */
static char *read_body(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    size_t cap = 65536, n = 0, r;
    char *buf = malloc(cap);

    if (f == NULL || buf == NULL) {
        fprintf(stderr, "sign_tool: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap && (buf = realloc(buf, cap *= 2)) == NULL) {
            fprintf(stderr, "sign_tool: out of memory\n");
            exit(2);
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "sign_tool: %s: read error\n", path);
        exit(2);
    }
    if (f != stdin)
        fclose(f);
    *len = n;
    return buf;
}

static int64_t parse_i64(const char *s, const char *what)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
        fprintf(stderr, "sign_tool: bad %s \"%s\"\n", what, s);
        exit(2);
    }
    return v;
}

static void parse_seed(const char *hex, unsigned char seed[PROTO_ED25519_SEED])
{
    size_t i;

    if (strlen(hex) != 2 * PROTO_ED25519_SEED)
        goto bad;
    for (i = 0; i < PROTO_ED25519_SEED; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            goto bad;
        seed[i] = (unsigned char)v;
    }
    return;
bad:
    fprintf(stderr, "sign_tool: SEEDHEX must be 64 hex digits\n");
    exit(2);
}

static struct proto_hmac *whsec_key(const char *secret)
{
    unsigned char key[PROTO_SECRET_MAX];
    struct proto_hmac *h;
    size_t n;

    if (proto_whsec_parse(secret, key, &n) != 0) {
        fprintf(stderr, "sign_tool: not a whsec_ secret\n");
        exit(2);
    }
    if ((h = proto_hmac_new(key, n)) == NULL) {
        fprintf(stderr, "sign_tool: out of memory\n");
        exit(2);
    }
    return h;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmd_sw_sign(char **argv, int ed)
{
    char sig[PROTO_SIG_MAX], *body;
    size_t len;
    int64_t ts = parse_i64(argv[3], "TS");
    int rc;

    body = read_body(argv[4], &len);
    if (ed) {
        unsigned char seed[PROTO_ED25519_SEED];
        parse_seed(argv[1], seed);
        rc = proto_sw_sign_ed25519(seed, argv[2], ts, body, len, sig, sizeof(sig));
    } else {
        struct proto_hmac *h = whsec_key(argv[1]);
        rc = proto_sw_sign(h, argv[2], ts, body, len, sig, sizeof(sig));
        proto_hmac_free(h);
    }
    free(body);
    if (rc != 0) {
        fprintf(stderr, "sign_tool: sign failed: %s\n", proto_strerror(rc));
        return 2;
    }
    printf("%s\n", sig);
    return 0;
}

static int cmd_sw_verify(int argc, char **argv)
{
    unsigned char pub[PROTO_ED25519_PUB];
    struct proto_hmac *h = NULL;
    int64_t now = argc > 6 ? parse_i64(argv[6], "NOW_S") : now_ms() / 1000;
    int64_t tol = argc > 7 ? parse_i64(argv[7], "TOLERANCE_S") : PROTO_SW_TOLERANCE_S;
    int is_pk = strncmp(argv[1], "whpk_", 5) == 0, rc;
    size_t len;
    char *body;

    if (is_pk && proto_whpk_parse(argv[1], pub) != 0) {
        fprintf(stderr, "sign_tool: not a whpk_ public key\n");
        return 2;
    }
    if (!is_pk)
        h = whsec_key(argv[1]);
    body = read_body(argv[5], &len);
    rc = proto_sw_verify(h, is_pk ? pub : NULL, argv[2], argv[3], argv[4], body, len, now, tol);
    free(body);
    proto_hmac_free(h);
    if (rc != 0) {
        fprintf(stderr, "sign_tool: invalid: %s\n", proto_strerror(rc));
        return 1;
    }
    return 0;
}

static int cmd_upstream(int argc, char **argv, int verify)
{
    struct proto_hmac *h = proto_hmac_new((const unsigned char *)argv[1], strlen(argv[1]));
    char hex[65], *body;
    size_t len;
    int rc;

    if (h == NULL)
        return 2;
    body = read_body(argv[verify ? 4 : 3], &len);
    if (verify) {
        int64_t now = argc > 5 ? parse_i64(argv[5], "NOW_MS") : now_ms();
        int64_t tol = argc > 6 ? parse_i64(argv[6], "TOLERANCE_S") : PROTO_SW_TOLERANCE_S;
        rc = proto_upstream_verify(h, argv[2], argv[3], body, len, now, tol);
        if (rc != 0)
            fprintf(stderr, "sign_tool: invalid: %s\n", proto_strerror(rc));
        rc = rc == 0 ? 0 : 1;
    } else if ((rc = proto_upstream_sign(h, argv[2], body, len, hex)) == 0) {
        printf("%s\n", hex);
    } else {
        fprintf(stderr, "sign_tool: sign failed: %s\n", proto_strerror(rc));
        rc = 2;
    }
    free(body);
    proto_hmac_free(h);
    return rc;
}

static int cmd_whsec_gen(int argc, char **argv)
{
    unsigned char rnd[PROTO_SECRET_MAX];
    char s[PROTO_WHSEC_MAX];
    int64_t n = argc > 1 ? parse_i64(argv[1], "BYTES") : PROTO_SECRET_BYTES;

    if (n < 24 || n > PROTO_SECRET_MAX || RAND_bytes(rnd, (int)n) != 1 ||
        proto_whsec_format(rnd, (size_t)n, s, sizeof(s)) != 0)
        return usage();
    printf("%s\n", s);
    return 0;
}

/* v1 signatures per second with one reused key over a body of the given size. */
static int cmd_bench(int argc, char **argv)
{
    double secs = argc > 1 ? (double)parse_i64(argv[1], "SECONDS") : 2.0, t0, t;
    int64_t bodylen = argc > 2 ? parse_i64(argv[2], "BODYBYTES") : 1024;
    unsigned char key[PROTO_SECRET_BYTES];
    char sig[PROTO_SIG_MAX], *body;
    struct proto_hmac *h;
    long n = 0, k;

    if (bodylen < 0 || bodylen > PROTO_MAX_INPUT || (body = malloc((size_t)bodylen + 1)) == NULL)
        return usage();
    memset(body, 'x', (size_t)bodylen);
    memset(key, 7, sizeof(key));
    if ((h = proto_hmac_new(key, sizeof(key))) == NULL)
        return 2;
    t0 = mono_s();
    do {
        for (k = 0; k < 1000; k++, n++)
            if (proto_sw_sign(h, "evt_01J9ZQ4X3V5K7M2N8P0R6S1T4W", 1787055532 + n, body,
                              (size_t)bodylen, sig, sizeof(sig)) != 0)
                return 2;
    } while ((t = mono_s() - t0) < secs);
    printf("v1 sign: %.0f/s (%" PRId64 "-byte body, one reused key, %ld signatures in %.2f s)\n",
           (double)n / t, bodylen, n, t);
    proto_hmac_free(h);
    free(body);
    return 0;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "";

    argc--, argv++;
    if (strcmp(cmd, "sw-sign") == 0 && argc == 5)
        return cmd_sw_sign(argv, 0);
    if (strcmp(cmd, "sw-sign-ed") == 0 && argc == 5)
        return cmd_sw_sign(argv, 1);
    if (strcmp(cmd, "sw-verify") == 0 && argc >= 6 && argc <= 8)
        return cmd_sw_verify(argc, argv);
    if (strcmp(cmd, "ed-public") == 0 && argc == 2) {
        unsigned char seed[PROTO_ED25519_SEED];
        char pk[PROTO_WHPK_MAX];
        parse_seed(argv[1], seed);
        if (proto_ed25519_public(seed, pk, sizeof(pk)) != 0)
            return 2;
        printf("%s\n", pk);
        return 0;
    }
    if (strcmp(cmd, "upstream-sign") == 0 && argc == 4)
        return cmd_upstream(argc, argv, 0);
    if (strcmp(cmd, "upstream-verify") == 0 && argc >= 5 && argc <= 7)
        return cmd_upstream(argc, argv, 1);
    if (strcmp(cmd, "whsec-gen") == 0 && argc <= 2)
        return cmd_whsec_gen(argc, argv);
    if (strcmp(cmd, "bench") == 0 && argc <= 3)
        return cmd_bench(argc, argv);
    return usage();
}
