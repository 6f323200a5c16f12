/* test_sign.c - unit tests for protocol/sign.c: base64, whsec_/whpk_ texts, HMAC-SHA256 with
 * the precomputed key schedule, Standard Webhooks v1/v1a signing and verification, the
 * upstream X-Signature-SHA256 scheme, and allocation failure (chaos allocator).
 *
 * Independent checks: RFC 4231 / RFC 4648 / RFC 8032 vectors, the Standard Webhooks
 * reference vector, the upstream fixture, and the openssl command line (dgst -hmac, dgst
 * -mac HMAC -macopt hexkey:, base64, pkeyutl for Ed25519) run through popen.
 * runs on: the test process, one thread. Run from the repository root. */
#include "protocol/sign.c"

#include <jansson.h>
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- helpers --------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void rng_fill(unsigned char *p, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        p[i] = (unsigned char)rng();
}

static void to_hex(const unsigned char *p, size_t n, char *out)
{
    static const char h[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        out[2 * i] = h[p[i] >> 4];
        out[2 * i + 1] = h[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static size_t from_hex(const char *s, unsigned char *out, size_t outsz)
{
    size_t i, n = strlen(s) / 2;

    assert_true(n <= outsz);
    for (i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(s + 2 * i, "%2x", &v), 1);
        out[i] = (unsigned char)v;
    }
    return n;
}

/* Write data to a fresh temporary file; returns its malloc'd path. */
static char *write_tmp(const void *data, size_t n)
{
    char *path = strdup("/tmp/test_sign.XXXXXX");
    int fd;

    assert_non_null(path);
    assert_true((fd = mkstemp(path)) >= 0);
    assert_true(n == 0 || write(fd, data, n) == (ssize_t)n);
    close(fd);
    return path;
}

/* Run a shell command, capture up to outsz-1 bytes of stdout; returns the exit status. */
static int run(const char *cmd, char *out, size_t outsz)
{
    FILE *f = popen(cmd, "r");
    size_t n = 0, r;
    int st;

    assert_non_null(f);
    while (out != NULL && n + 1 < outsz && (r = fread(out + n, 1, outsz - 1 - n, f)) > 0)
        n += r;
    if (out != NULL)
        out[n] = '\0';
    st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* HMAC-SHA256 hex by the openssl command line: string key via -hmac, else hexkey. */
static void openssl_hmac(const unsigned char *key, size_t keylen, int string_key,
                         const void *msg, size_t len, char hex_out[65])
{
    char cmd[1024], out[512], khex[2 * 256 + 1];
    char *path = write_tmp(msg, len);

    assert_true(keylen <= 256);
    if (string_key) {
        assert_null(memchr(key, '\'', keylen));
        snprintf(cmd, sizeof(cmd), "openssl dgst -sha256 -hmac '%.*s' -r %s", (int)keylen,
                 (const char *)key, path);
    } else {
        to_hex(key, keylen, khex);
        snprintf(cmd, sizeof(cmd), "openssl dgst -sha256 -mac HMAC -macopt hexkey:%s -r %s",
                 khex, path);
    }
    assert_int_equal(run(cmd, out, sizeof(out)), 0);
    unlink(path);
    free(path);
    assert_true(strlen(out) >= 64);
    memcpy(hex_out, out, 64);
    hex_out[64] = '\0';
}

static struct proto_hmac *hmac_from_secret(const char *whsec)
{
    unsigned char key[PROTO_SECRET_MAX];
    size_t keylen;
    struct proto_hmac *h;

    assert_int_equal(proto_whsec_parse(whsec, key, &keylen), 0);
    assert_non_null(h = proto_hmac_new(key, keylen));
    return h;
}

/* ---- base64 ---------------------------------------------------------------------------- */

static void test_base64_rfc4648(void **state)
{
    static const struct { const char *in, *out; } rows[] = {
        {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="},
        {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
    };
    char out[64];
    unsigned char dec[64];
    size_t i, n;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        assert_int_equal(proto_base64_encode(rows[i].in, strlen(rows[i].in), out, sizeof(out)), 0);
        assert_string_equal(out, rows[i].out);
        assert_int_equal(strlen(out), PROTO_BASE64_LEN(strlen(rows[i].in)));
        assert_int_equal(proto_base64_decode(out, strlen(out), dec, sizeof(dec), &n), 0);
        assert_int_equal(n, strlen(rows[i].in));
        assert_memory_equal(dec, rows[i].in, n);
    }
    /* Exactly enough room, then one byte short. */
    assert_int_equal(proto_base64_encode("foo", 3, out, 5), 0);
    assert_int_equal(proto_base64_encode("foo", 3, out, 4), PROTO_ETOOLONG);
    assert_int_equal(proto_base64_decode("Zm9vYg==", 8, dec, 4, &n), 0);
    assert_int_equal(proto_base64_decode("Zm9vYg==", 8, dec, 3, &n), PROTO_ETOOLONG);
}

static void test_base64_invalid(void **state)
{
    static const char *const bad[] = {
        "Zg=", "Z", "Zm9", "Z===", "====", "Zg==Zg==", "Zm=v", "Zm9v\n", "Zm-v", "Zm_v",
        " Zm9v", "Zm9v ", "Zg==\n", "Zm9\xc3\xa9", "Zg\0=",
    };
    unsigned char dec[64];
    size_t i, n;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t len = i == sizeof(bad) / sizeof(bad[0]) - 1 ? 4 : strlen(bad[i]);
        assert_int_equal(proto_base64_decode(bad[i], len, dec, sizeof(dec), &n), PROTO_EVALUE);
    }
    /* Unused trailing bits are ignored, as @stablelib/base64 and Python do. */
    assert_int_equal(proto_base64_decode("Zh==", 4, dec, sizeof(dec), &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(dec[0], 'f');
}

static void test_base64_vs_openssl(void **state)
{
    unsigned char data[300], dec[300];
    char enc[PROTO_BASE64_LEN(300) + 1], out[1024], cmd[256];
    size_t lens[] = {1, 2, 3, 31, 32, 33, 64, 299, 300}, i, n;

    for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        char *path;
        rng_fill(data, lens[i]);
        path = write_tmp(data, lens[i]);
        snprintf(cmd, sizeof(cmd), "openssl base64 -A -in %s", path);
        assert_int_equal(run(cmd, out, sizeof(out)), 0);
        unlink(path);
        free(path);
        assert_int_equal(proto_base64_encode(data, lens[i], enc, sizeof(enc)), 0);
        assert_string_equal(enc, out);
        assert_int_equal(proto_base64_decode(enc, strlen(enc), dec, sizeof(dec), &n), 0);
        assert_int_equal(n, lens[i]);
        assert_memory_equal(dec, data, n);
    }
}

/* ---- whsec_ / whpk_ -------------------------------------------------------------------- */

static void test_whsec(void **state)
{
    unsigned char rnd[PROTO_SECRET_MAX + 1], key[PROTO_SECRET_MAX];
    char s[PROTO_WHSEC_MAX], big[400];
    size_t keylen, n;

    rng_fill(rnd, sizeof(rnd));
    for (n = 24; n <= PROTO_SECRET_MAX; n++) {
        assert_int_equal(proto_whsec_format(rnd, n, s, sizeof(s)), 0);
        assert_int_equal(strncmp(s, "whsec_", 6), 0);
        assert_int_equal(strlen(s), 6 + PROTO_BASE64_LEN(n));
        assert_int_equal(proto_whsec_parse(s, key, &keylen), 0);
        assert_int_equal(keylen, n);
        assert_memory_equal(key, rnd, n);
        assert_int_equal(proto_whsec_parse(s + 6, key, &keylen), 0);    /* prefix optional */
        assert_int_equal(keylen, n);
    }
    assert_int_equal(proto_whsec_format(rnd, PROTO_SECRET_BYTES, s, sizeof(s)), 0);
    assert_int_equal(strlen(s), 6 + 44);
    assert_int_equal(proto_whsec_format(rnd, 23, s, sizeof(s)), PROTO_EVALUE);
    assert_int_equal(proto_whsec_format(rnd, PROTO_SECRET_MAX + 1, s, sizeof(s)), PROTO_EVALUE);
    assert_int_equal(proto_whsec_format(rnd, 24, s, 6 + 32), PROTO_EVALUE);
    assert_int_equal(proto_whsec_format(rnd, 24, s, 6 + 32 + 1), 0);
    assert_int_equal(proto_whsec_format(NULL, 24, s, sizeof(s)), PROTO_EVALUE);

    /* The Standard Webhooks reference secret (24 bytes, no padding). */
    assert_int_equal(proto_whsec_parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", key, &keylen), 0);
    assert_int_equal(keylen, 24);
    {
        static const char *const bad[] = {
            "", "whsec_", "whsec_!!!!", "whsec_abc", "whsec_whsec_MfKQ9r8GKYqrTwjUPD8I",
            "whsec_MfKQ 9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw=",
        };
        size_t i;
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
            assert_int_equal(proto_whsec_parse(bad[i], key, &keylen), PROTO_EVALUE);
        assert_int_equal(proto_whsec_parse(NULL, key, &keylen), PROTO_EVALUE);
    }
    /* 128 decoded bytes is the limit; 129 is refused; a huge text is refused quickly. */
    memcpy(big, "whsec_", 6);
    assert_int_equal(proto_base64_encode(rnd, PROTO_SECRET_MAX, big + 6, sizeof(big) - 6), 0);
    assert_int_equal(proto_whsec_parse(big, key, &keylen), 0);
    assert_int_equal(keylen, PROTO_SECRET_MAX);
    assert_int_equal(proto_base64_encode(rnd, PROTO_SECRET_MAX + 1, big + 6, sizeof(big) - 6),
                     0);
    assert_int_equal(proto_whsec_parse(big, key, &keylen), PROTO_EVALUE);
    memset(big, 'A', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(proto_whsec_parse(big, key, &keylen), PROTO_EVALUE);
}

/* RFC 8032 section 7.1, test 1: seed -> public key; whpk_ text round trip. */
static void test_ed25519_public(void **state)
{
    unsigned char seed[32], pub[32], want[32];
    char text[PROTO_WHPK_MAX], b64[64];

    from_hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", seed, 32);
    from_hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", want, 32);
    assert_int_equal(proto_ed25519_public(seed, text, sizeof(text)), 0);
    assert_int_equal(proto_base64_encode(want, 32, b64, sizeof(b64)), 0);
    assert_int_equal(strncmp(text, "whpk_", 5), 0);
    assert_string_equal(text + 5, b64);
    assert_int_equal(proto_whpk_parse(text, pub), 0);
    assert_memory_equal(pub, want, 32);
    assert_int_equal(proto_whpk_parse(text + 5, pub), 0);
    assert_memory_equal(pub, want, 32);
    assert_int_equal(proto_ed25519_public(seed, text, 49), PROTO_EVALUE);
    assert_int_equal(proto_whpk_parse("whpk_", pub), PROTO_EVALUE);
    assert_int_equal(proto_whpk_parse("whpk_Zm9vYmFy", pub), PROTO_EVALUE);     /* 6 bytes */
    assert_int_equal(proto_whpk_parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", pub),
                     PROTO_EVALUE);
}

/* ---- HMAC ------------------------------------------------------------------------------ */

static void test_hmac_rfc4231(void **state)
{
    static const struct { const char *key_hex, *data, *data_hex, *mac; } rows[] = {
        {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "Hi There", NULL,
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"4a656665", "what do ya want for nothing?", NULL,
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", NULL,
         "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
         "dddddddddddddddd",
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {"0102030405060708090a0b0c0d0e0f10111213141516171819", NULL,
         "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
         "cdcdcdcdcdcdcdcd",
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {NULL, "Test Using Larger Than Block-Size Key - Hash Key First", NULL,
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {NULL,
         "This is a test using a larger than block-size key and a larger than block-size data."
         " The key needs to be hashed before being used by the HMAC algorithm.", NULL,
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
        {"", "", NULL, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"},
    };
    unsigned char key[200], data[200], mac[32];
    char hex[65];
    size_t i;

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        size_t klen, dlen;
        struct proto_hmac *h;
        if (rows[i].key_hex != NULL) {
            klen = from_hex(rows[i].key_hex, key, sizeof(key));
        } else {
            klen = 131;
            memset(key, 0xaa, klen);
        }
        if (rows[i].data != NULL) {
            dlen = strlen(rows[i].data);
            memcpy(data, rows[i].data, dlen);
        } else {
            dlen = from_hex(rows[i].data_hex, data, sizeof(data));
        }
        assert_non_null(h = proto_hmac_new(key, klen));
        /* Twice with the same key object: the precomputed states must stay intact. */
        assert_int_equal(proto_hmac_4(h, data, dlen, NULL, 0, NULL, 0, NULL, 0, mac), 0);
        to_hex(mac, 32, hex);
        assert_string_equal(hex, rows[i].mac);
        assert_int_equal(proto_hmac_4(h, data, dlen / 3, NULL, 0, data + dlen / 3,
                                      dlen - dlen / 3, NULL, 0, mac), 0);
        to_hex(mac, 32, hex);
        assert_string_equal(hex, rows[i].mac);
        proto_hmac_free(h);
    }
    proto_hmac_free(NULL);
    assert_null(proto_hmac_new(NULL, 3));
}

/* Random keys (binary, hexkey) and messages split across the four parts, against the
 * openssl command line; one key object signs many messages. */
static void test_hmac_vs_openssl(void **state)
{
    static const size_t klens[] = {1, 20, 32, 63, 64, 65, 131, 200};
    static const size_t mlens[] = {0, 1, 55, 56, 63, 64, 65, 1024, 100000};
    unsigned char key[200], mac[32];
    unsigned char *msg = malloc(100000);
    char got[65], want[65];
    size_t k, m;

    assert_non_null(msg);
    for (k = 0; k < sizeof(klens) / sizeof(klens[0]); k++) {
        struct proto_hmac *h;
        rng_fill(key, klens[k]);
        assert_non_null(h = proto_hmac_new(key, klens[k]));
        for (m = 0; m < sizeof(mlens) / sizeof(mlens[0]); m++) {
            size_t n = mlens[m], a = n ? rng() % n : 0, b = n ? a + rng() % (n - a + 1) : 0;
            size_t c = n ? b + rng() % (n - b + 1) : 0;
            if ((k + m) % 3 != 0 && n > 1000)
                continue;                           /* keep the process count down */
            rng_fill(msg, n);
            assert_int_equal(proto_hmac_4(h, msg, a, msg + a, b - a, msg + b, c - b, msg + c,
                                          n - c, mac), 0);
            to_hex(mac, 32, got);
            openssl_hmac(key, klens[k], 0, msg, n, want);
            assert_string_equal(got, want);
        }
        proto_hmac_free(h);
    }
    free(msg);
}

/* ---- Standard Webhooks ----------------------------------------------------------------- */

#define REF_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define REF_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define REF_TS 1614265330
#define REF_BODY "{\"test\": 2432232314}"
#define REF_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static void test_sw_reference_vector(void **state)
{
    struct proto_hmac *h = hmac_from_secret(REF_SECRET);
    char sig[PROTO_SIG_MAX];

    assert_int_equal(proto_sw_sign(h, REF_ID, REF_TS, REF_BODY, strlen(REF_BODY), sig,
                                   sizeof(sig)), 0);
    assert_string_equal(sig, REF_SIG);
    assert_int_equal(proto_sw_verify(h, NULL, REF_ID, "1614265330", REF_SIG, REF_BODY,
                                     strlen(REF_BODY), REF_TS, PROTO_SW_TOLERANCE_S), 0);
    /* Argument checks. */
    assert_int_equal(proto_sw_sign(h, REF_ID, REF_TS, REF_BODY, 3, sig, 47), PROTO_EVALUE);
    assert_int_equal(proto_sw_sign(h, REF_ID, REF_TS, REF_BODY, 3, sig, 48), 0);
    assert_int_equal(proto_sw_sign(h, NULL, REF_TS, REF_BODY, 3, sig, sizeof(sig)),
                     PROTO_EVALUE);
    assert_int_equal(proto_sw_sign(NULL, REF_ID, REF_TS, REF_BODY, 3, sig, sizeof(sig)),
                     PROTO_EVALUE);
    assert_int_equal(proto_sw_sign(h, REF_ID, -1, REF_BODY, 3, sig, sizeof(sig)),
                     PROTO_EVALUE);
    assert_int_equal(proto_sw_sign(h, REF_ID, REF_TS, NULL, 0, sig, sizeof(sig)), 0);
    proto_hmac_free(h);
}

/* v1 against "openssl dgst -mac HMAC -macopt hexkey:<decoded secret> -binary | base64". */
static void test_sw_vs_openssl(void **state)
{
    unsigned char rnd[32], key[PROTO_SECRET_MAX];
    char secret[PROTO_WHSEC_MAX], sig[PROTO_SIG_MAX], khex[2 * PROTO_SECRET_MAX + 1];
    char cmd[1024], out[256], content[600];
    int i;

    for (i = 0; i < 4; i++) {
        static const char *const bodies[] = {
            "{}", "",
            "{\"event\":\"request.status.updated\",\"x\":\"\xe2\x82\xac \xf0\x9f\x98\x80\"}",
            "line1\nline2\r\n\ttab \"quote\" 'single' $dollar `tick`",
        };
        struct proto_hmac *h;
        size_t keylen, clen;
        char *path;
        int64_t ts = 1700000000 + i * 7919;
        rng_fill(rnd, sizeof(rnd));
        assert_int_equal(proto_whsec_format(rnd, 24 + (size_t)i * 2, secret, sizeof(secret)), 0);
        h = hmac_from_secret(secret);
        assert_int_equal(proto_sw_sign(h, "evt_01HZX", ts, bodies[i], strlen(bodies[i]), sig,
                                       sizeof(sig)), 0);
        clen = (size_t)snprintf(content, sizeof(content), "evt_01HZX.%lld.%s", (long long)ts,
                                bodies[i]);
        path = write_tmp(content, clen);
        assert_int_equal(proto_whsec_parse(secret, key, &keylen), 0);
        to_hex(key, keylen, khex);
        snprintf(cmd, sizeof(cmd),
                 "openssl dgst -sha256 -mac HMAC -macopt hexkey:%s -binary %s | openssl base64 -A",
                 khex, path);
        assert_int_equal(run(cmd, out, sizeof(out)), 0);
        unlink(path);
        free(path);
        assert_int_equal(strncmp(sig, "v1,", 3), 0);
        assert_string_equal(sig + 3, out);
        proto_hmac_free(h);
    }
}

enum { T_OLD = 1, T_NEW = 2, T_ED = 4 };

/* Table-driven verification: header built from parts, tampering, tolerance, malformed. */
static void test_sw_verify_table(void **state)
{
    const int64_t now = 1787055532;
    const char *body = "{\"event\":\"request.status.updated\"}";
    struct proto_hmac *old = hmac_from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    struct proto_hmac *neu = hmac_from_secret("whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LQ==");
    struct proto_hmac *other = hmac_from_secret("whsec_b3RoZXItb3RoZXItb3RoZXItb3RoZXItb3RoZXI=");
    unsigned char seed[32], pub[32], pub2[32], seed2[32];
    char s_old[PROTO_SIG_MAX], s_new[PROTO_SIG_MAX], s_ed[PROTO_SIG_MAX], pk[PROTO_WHPK_MAX];
    char hdr[4096], ts[32];
    size_t i, o;

    rng_fill(seed, 32);
    rng_fill(seed2, 32);
    assert_int_equal(proto_ed25519_public(seed, pk, sizeof(pk)), 0);
    assert_int_equal(proto_whpk_parse(pk, pub), 0);
    assert_int_equal(proto_ed25519_public(seed2, pk, sizeof(pk)), 0);
    assert_int_equal(proto_whpk_parse(pk, pub2), 0);

    struct row {
        const char *hdr;        /* "%O" old v1, "%N" new v1, "%E" v1a; literal otherwise */
        int64_t ts_off;         /* signed at now + ts_off, and that is the header ts */
        const char *ts_text;    /* the header ts text instead */
        int keys;               /* which verification keys are given */
        const char *id, *body;  /* override the signed id/body at verification */
        int want;
    } rows[] = {
        {"%N", 0, NULL, T_NEW, NULL, NULL, 0},
        {"%O", 0, NULL, T_OLD, NULL, NULL, 0},
        {"%O", 0, NULL, T_NEW, NULL, NULL, PROTO_ESIG},
        {"%N %O", 0, NULL, T_OLD, NULL, NULL, 0},           /* rotation: both sent */
        {"%N %O", 0, NULL, T_NEW, NULL, NULL, 0},
        {"%O %N", 0, NULL, T_NEW, NULL, NULL, 0},
        {"%N %O", 0, NULL, 0, NULL, NULL, PROTO_ESIG},      /* no key at all */
        {"%E", 0, NULL, T_ED, NULL, NULL, 0},
        {"%N %E", 0, NULL, T_ED, NULL, NULL, 0},
        {"%E %N", 0, NULL, T_NEW, NULL, NULL, 0},
        {"%E", 0, NULL, T_NEW, NULL, NULL, PROTO_ESIG},
        /* Tampering. */
        {"%N", 0, NULL, T_NEW, "evt_other", NULL, PROTO_ESIG},
        {"%N", 0, NULL, T_NEW, NULL, "{\"event\":\"request.status.updated\" }", PROTO_ESIG},
        {"%N", 0, NULL, T_NEW, NULL, "", PROTO_ESIG},
        {"%N", 0, "1787055533", T_NEW, NULL, NULL, PROTO_ESIG},   /* header ts + 1 s */
        {"%E", 0, NULL, T_ED, "evt_other", NULL, PROTO_ESIG},
        {"%E", 0, NULL, T_ED, NULL, "{}", PROTO_ESIG},
        {"%E", 0, "1787055531", T_ED, NULL, NULL, PROTO_ESIG},
        /* Tolerance edges: |now - ts| <= 300 passes. The signature covers the header ts. */
        {"%N", -300, NULL, T_NEW, NULL, NULL, 0},
        {"%N", 300, NULL, T_NEW, NULL, NULL, 0},
        {"%N", -301, NULL, T_NEW, NULL, NULL, PROTO_ESTALE},
        {"%N", 301, NULL, T_NEW, NULL, NULL, PROTO_ESTALE},
        {"%N", -100000000, NULL, T_NEW, NULL, NULL, PROTO_ESTALE},
        {"%E", -301, NULL, T_ED, NULL, NULL, PROTO_ESTALE},
        /* Leading zeros: parsed as parseInt does, signed content uses the integer. */
        {"%N", 0, "0001787055532", T_NEW, NULL, NULL, 0},
        /* Malformed timestamps. */
        {"%N", 0, "", T_NEW, NULL, NULL, PROTO_EVALUE},
        {"%N", 0, "abc", T_NEW, NULL, NULL, PROTO_EVALUE},
        {"%N", 0, "-1787055532", T_NEW, NULL, NULL, PROTO_EVALUE},
        {"%N", 0, "+1787055532", T_NEW, NULL, NULL, PROTO_EVALUE},
        {"%N", 0, " 1787055532", T_NEW, NULL, NULL, PROTO_EVALUE},
        {"%N", 0, "1787055532 ", T_NEW, NULL, NULL, PROTO_EVALUE},
        {"%N", 0, "1787055532.5", T_NEW, NULL, NULL, PROTO_EVALUE},
        {"%N", 0, "1787055532000", T_NEW, NULL, NULL, PROTO_ESTALE},      /* ms: wrong unit */
        {"%N", 0, "9223372036854775807", T_NEW, NULL, NULL, PROTO_ESTALE},
        {"%N", 0, "9223372036854775808", T_NEW, NULL, NULL, PROTO_EVALUE},
        {"%N", 0, "99999999999999999999999", T_NEW, NULL, NULL, PROTO_EVALUE},
        /* Malformed signature headers. */
        {"", 0, NULL, T_NEW | T_ED, NULL, NULL, PROTO_ESIG},
        {"   ", 0, NULL, T_NEW | T_ED, NULL, NULL, PROTO_ESIG},
        {"v1", 0, NULL, T_NEW, NULL, NULL, PROTO_ESIG},
        {"v1,", 0, NULL, T_NEW, NULL, NULL, PROTO_ESIG},
        {"v1a,", 0, NULL, T_ED, NULL, NULL, PROTO_ESIG},
        {"v1,abc", 0, NULL, T_NEW, NULL, NULL, PROTO_ESIG},
        {"v1a,abc", 0, NULL, T_ED, NULL, NULL, PROTO_ESIG},
        {"v1a,!!!!", 0, NULL, T_ED, NULL, NULL, PROTO_ESIG},
        {"  %N  ", 0, NULL, T_NEW, NULL, NULL, 0},
        {"v2,xyz %N", 0, NULL, T_NEW, NULL, NULL, 0},       /* unknown versions skipped */
        {"v1,AAAA %N", 0, NULL, T_NEW, NULL, NULL, 0},
        {"%N,", 0, NULL, T_NEW, NULL, NULL, PROTO_ESIG},
        {"%Nx", 0, NULL, T_NEW, NULL, NULL, PROTO_ESIG},
        {"x%N", 0, NULL, T_NEW, NULL, NULL, PROTO_ESIG},
        {"%N\t", 0, NULL, T_NEW, NULL, NULL, PROTO_ESIG},   /* only spaces separate */
        {"%N,%O", 0, NULL, T_NEW, NULL, NULL, PROTO_ESIG},
    };

    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *r = &rows[i];
        const char *id = "evt_01J0000000000000000000000", *p;
        const char *vbody = r->body != NULL ? r->body : body;
        int64_t sts = now + r->ts_off;
        int rc;

        assert_int_equal(proto_sw_sign(old, id, sts, body, strlen(body), s_old, sizeof(s_old)),
                         0);
        assert_int_equal(proto_sw_sign(neu, id, sts, body, strlen(body), s_new, sizeof(s_new)),
                         0);
        assert_int_equal(proto_sw_sign_ed25519(seed, id, sts, body, strlen(body), s_ed,
                                               sizeof(s_ed)), 0);
        for (o = 0, p = r->hdr; *p != '\0'; p++) {
            const char *ins = NULL;
            if (p[0] == '%' && p[1] == 'O')
                ins = s_old;
            else if (p[0] == '%' && p[1] == 'N')
                ins = s_new;
            else if (p[0] == '%' && p[1] == 'E')
                ins = s_ed;
            if (ins != NULL) {
                o += (size_t)snprintf(hdr + o, sizeof(hdr) - o, "%s", ins);
                p++;
            } else {
                hdr[o++] = *p;
            }
        }
        hdr[o] = '\0';
        if (r->ts_text != NULL)
            snprintf(ts, sizeof(ts), "%s", r->ts_text);
        else
            snprintf(ts, sizeof(ts), "%lld", (long long)sts);
        rc = proto_sw_verify((r->keys & T_NEW) ? neu : (r->keys & T_OLD) ? old : NULL,
                             (r->keys & T_ED) ? pub : NULL, r->id != NULL ? r->id : id, ts, hdr,
                             vbody, strlen(vbody), now, PROTO_SW_TOLERANCE_S);
        if (rc != r->want)
            fail_msg("row %zu: hdr=\"%s\" ts=%s: got %d want %d", i, r->hdr, ts, rc, r->want);
        /* A different Ed25519 key or HMAC key never verifies. */
        if (r->want == 0 && (r->keys & T_ED))
            assert_int_equal(proto_sw_verify(NULL, pub2, r->id != NULL ? r->id : id, ts, hdr,
                                             vbody, strlen(vbody), now, PROTO_SW_TOLERANCE_S),
                             PROTO_ESIG);
        if (r->want == 0 && !(r->keys & T_ED))
            assert_int_equal(proto_sw_verify(other, NULL, r->id != NULL ? r->id : id, ts, hdr,
                                             vbody, strlen(vbody), now, PROTO_SW_TOLERANCE_S),
                             PROTO_ESIG);
    }

    /* NULL pieces. */
    snprintf(ts, sizeof(ts), "%lld", (long long)now);
    assert_int_equal(proto_sw_sign(neu, "id", now, body, strlen(body), s_new, sizeof(s_new)), 0);
    assert_int_equal(proto_sw_verify(neu, NULL, NULL, ts, s_new, body, strlen(body), now, 300),
                     PROTO_ESIG);
    assert_int_equal(proto_sw_verify(neu, NULL, "id", ts, NULL, body, strlen(body), now, 300),
                     PROTO_ESIG);
    assert_int_equal(proto_sw_verify(neu, NULL, "id", NULL, s_new, body, strlen(body), now, 300),
                     PROTO_EVALUE);
    /* Negative tolerance acts as 0; extreme now values do not overflow. */
    assert_int_equal(proto_sw_verify(neu, NULL, "id", ts, s_new, body, strlen(body), now, -5), 0);
    assert_int_equal(proto_sw_verify(neu, NULL, "id", ts, s_new, body, strlen(body),
                                     INT64_MAX, INT64_MAX), 0);
    assert_int_equal(proto_sw_verify(neu, NULL, "id", ts, s_new, body, strlen(body),
                                     INT64_MIN, 300), PROTO_ESTALE);

    /* Only PROTO_SW_MAX_SIGS entries are examined. */
    for (i = 0, o = 0; i < PROTO_SW_MAX_SIGS - 1; i++)
        o += (size_t)snprintf(hdr + o, sizeof(hdr) - o, "v1,junk%zu ", i);
    snprintf(hdr + o, sizeof(hdr) - o, "%s", s_new);
    assert_int_equal(proto_sw_verify(neu, NULL, "id", ts, hdr, body, strlen(body), now, 300), 0);
    snprintf(hdr + o, sizeof(hdr) - o, "v1,junk %s", s_new);
    assert_int_equal(proto_sw_verify(neu, NULL, "id", ts, hdr, body, strlen(body), now, 300),
                     PROTO_ESIG);

    proto_hmac_free(old);
    proto_hmac_free(neu);
    proto_hmac_free(other);
}

/* Every single-bit flip of a v1/v1a signature, id, ts or body fails. */
static void test_sw_bitflips(void **state)
{
    struct proto_hmac *h = hmac_from_secret(REF_SECRET);
    unsigned char seed[32], pub[32];
    char sig[PROTO_SIG_MAX], sig2[PROTO_SIG_MAX], pk[PROTO_WHPK_MAX], body[] = REF_BODY;
    char id[] = REF_ID, ts[] = "1614265330";
    size_t i;
    int b, ed;

    rng_fill(seed, 32);
    assert_int_equal(proto_ed25519_public(seed, pk, sizeof(pk)), 0);
    assert_int_equal(proto_whpk_parse(pk, pub), 0);
    for (ed = 0; ed < 2; ed++) {
        if (ed)
            assert_int_equal(proto_sw_sign_ed25519(seed, id, REF_TS, body, strlen(body), sig,
                                                   sizeof(sig)), 0);
        else
            assert_int_equal(proto_sw_sign(h, id, REF_TS, body, strlen(body), sig, sizeof(sig)),
                             0);
        for (i = 0; i < strlen(sig); i++) {
            for (b = 0; b < 8; b += ed ? 7 : 1) {
                memcpy(sig2, sig, sizeof(sig));
                sig2[i] ^= (char)(1 << b);
                assert_int_not_equal(proto_sw_verify(h, pub, id, ts, sig2, body, strlen(body),
                                                     REF_TS, 300), 0);
            }
        }
        for (i = 0; i < strlen(body); i++) {
            body[i] ^= 1;
            assert_int_equal(proto_sw_verify(h, pub, id, ts, sig, body, strlen(body), REF_TS,
                                             300), PROTO_ESIG);
            body[i] ^= 1;
        }
        for (i = 0; i < strlen(id); i++) {
            id[i] ^= 1;
            assert_int_equal(proto_sw_verify(h, pub, id, ts, sig, body, strlen(body), REF_TS,
                                             300), PROTO_ESIG);
            id[i] ^= 1;
        }
        for (i = 0; i < strlen(ts); i++) {
            ts[i] ^= 1;                     /* digits stay digits: '0' <-> '1' etc. */
            assert_int_not_equal(proto_sw_verify(h, pub, id, ts, sig, body, strlen(body),
                                                 REF_TS, 100000000), 0);
            ts[i] ^= 1;
        }
        assert_int_equal(proto_sw_verify(h, pub, id, ts, sig, body, strlen(body), REF_TS, 300),
                         0);
    }
    proto_hmac_free(h);
}

/* v1a: our signature is RFC 8032 Ed25519 as the openssl CLI computes it (deterministic), and
 * the CLI verifies it; a tampered message fails there too. */
static void test_ed25519_vs_openssl(void **state)
{
    static const char der_priv[] = "302e020100300506032b657004220420";
    static const char der_pub[] = "302a300506032b6570032100";
    unsigned char seed[32], pub[32], der[64], raw[64];
    char pk[PROTO_WHPK_MAX], sig[PROTO_SIG_MAX], pem[256], b64[128], cmd[1024], out[512];
    char *msgf, *sigf, *privf, *pubf, *ourf, *badf;
    const char *body = "{\"data\":{\"status\":\"success\",\"x\":\"\xc3\xa9\"}}";
    char content[256];
    size_t n, clen;

    rng_fill(seed, 32);
    assert_int_equal(proto_ed25519_public(seed, pk, sizeof(pk)), 0);
    assert_int_equal(proto_whpk_parse(pk, pub), 0);
    assert_int_equal(proto_sw_sign_ed25519(seed, "evt_1", 1787055532, body, strlen(body), sig,
                                           sizeof(sig)), 0);
    assert_int_equal(strncmp(sig, "v1a,", 4), 0);
    assert_int_equal(strlen(sig), 4 + 88);
    clen = (size_t)snprintf(content, sizeof(content), "evt_1.1787055532.%s", body);
    msgf = write_tmp(content, clen);
    badf = write_tmp(content, clen - 1);

    n = from_hex(der_priv, der, sizeof(der));
    memcpy(der + n, seed, 32);
    assert_int_equal(proto_base64_encode(der, n + 32, b64, sizeof(b64)), 0);
    snprintf(pem, sizeof(pem), "-----BEGIN PRIVATE KEY-----\n%s\n-----END PRIVATE KEY-----\n",
             b64);
    privf = write_tmp(pem, strlen(pem));
    n = from_hex(der_pub, der, sizeof(der));
    memcpy(der + n, pub, 32);
    assert_int_equal(proto_base64_encode(der, n + 32, b64, sizeof(b64)), 0);
    snprintf(pem, sizeof(pem), "-----BEGIN PUBLIC KEY-----\n%s\n-----END PUBLIC KEY-----\n", b64);
    pubf = write_tmp(pem, strlen(pem));

    /* Public key derivation agrees with the CLI. */
    snprintf(cmd, sizeof(cmd), "openssl pkey -in %s -pubout", privf);
    assert_int_equal(run(cmd, out, sizeof(out)), 0);
    assert_string_equal(out, pem);

    /* Same signature bytes as the CLI. */
    sigf = write_tmp("", 0);
    snprintf(cmd, sizeof(cmd), "openssl pkeyutl -sign -inkey %s -rawin -in %s -out %s", privf,
             msgf, sigf);
    assert_int_equal(run(cmd, NULL, 0), 0);
    {
        FILE *f = fopen(sigf, "rb");
        assert_non_null(f);
        assert_int_equal(fread(raw, 1, sizeof(raw), f), 64);
        fclose(f);
    }
    assert_int_equal(proto_base64_encode(raw, 64, b64, sizeof(b64)), 0);
    assert_string_equal(sig + 4, b64);

    /* The CLI verifies ours; a shortened message fails. */
    assert_int_equal(proto_base64_decode(sig + 4, strlen(sig + 4), raw, sizeof(raw), &n), 0);
    ourf = write_tmp(raw, n);
    snprintf(cmd, sizeof(cmd),
             "openssl pkeyutl -verify -pubin -inkey %s -rawin -in %s -sigfile %s >/dev/null",
             pubf, msgf, ourf);
    assert_int_equal(run(cmd, NULL, 0), 0);
    snprintf(cmd, sizeof(cmd),
             "openssl pkeyutl -verify -pubin -inkey %s -rawin -in %s -sigfile %s >/dev/null 2>&1",
             pubf, badf, ourf);
    assert_int_not_equal(run(cmd, NULL, 0), 0);
    assert_int_equal(proto_sw_verify(NULL, pub, "evt_1", "1787055532", sig, body, strlen(body),
                                     1787055532, 300), 0);

    unlink(msgf), unlink(badf), unlink(sigf), unlink(privf), unlink(pubf), unlink(ourf);
    free(msgf), free(badf), free(sigf), free(privf), free(pubf), free(ourf);
}

/* ---- the upstream scheme --------------------------------------------------------------- */

static void test_upstream_fixture(void **state)
{
    char path[512], hex[65], upper[65];
    const char *file = __FILE__, *slash = strrchr(file, '/');
    json_error_t jerr;
    json_t *root, *headers;
    const char *key, *ts, *want, *body;
    struct proto_hmac *h;
    int64_t ts_ms;
    size_t i, blen;

    /* __FILE__ is tests/unit/test_sign.c: the fixture is tests/fixtures/upstream/. */
    assert_non_null(slash);
    snprintf(path, sizeof(path), "%.*s/../fixtures/upstream/webhook_delivery_signed.json",
             (int)(slash - file), file);
    root = json_load_file(path, 0, &jerr);
    if (root == NULL)
        fail_msg("%s: %s", path, jerr.text);
    headers = json_object_get(root, "headers");
    key = json_string_value(json_object_get(root, "signingKey"));
    body = json_string_value(json_object_get(root, "body"));
    blen = json_string_length(json_object_get(root, "body"));
    ts = json_string_value(json_object_get(headers, "X-Signature-Timestamp"));
    want = json_string_value(json_object_get(headers, "X-Signature-SHA256"));
    assert_non_null(key), assert_non_null(body), assert_non_null(ts), assert_non_null(want);
    ts_ms = strtoll(ts, NULL, 10);

    assert_non_null(h = proto_hmac_new((const unsigned char *)key, strlen(key)));
    assert_int_equal(proto_upstream_sign(h, ts, body, blen, hex), 0);
    assert_string_equal(hex, want);
    {                                       /* and the openssl CLI agrees */
        char content[4096], cli[65];
        size_t clen = (size_t)snprintf(content, sizeof(content), "%s.%s", ts, body);
        assert_true(clen < sizeof(content));
        openssl_hmac((const unsigned char *)key, strlen(key), 1, content, clen, cli);
        assert_string_equal(cli, want);
    }
    assert_int_equal(proto_upstream_verify(h, ts, want, body, blen, ts_ms, 300), 0);
    for (i = 0; i < 64; i++)
        upper[i] = (char)(want[i] >= 'a' && want[i] <= 'f' ? want[i] - 32 : want[i]);
    upper[64] = '\0';
    assert_int_equal(proto_upstream_verify(h, ts, upper, body, blen, ts_ms, 300), 0);
    /* Tolerance in ms precision: the header is ms (> 10^12). */
    assert_int_equal(proto_upstream_verify(h, ts, want, body, blen, ts_ms + 300000, 300), 0);
    assert_int_equal(proto_upstream_verify(h, ts, want, body, blen, ts_ms + 300001, 300),
                     PROTO_ESTALE);
    assert_int_equal(proto_upstream_verify(h, ts, want, body, blen, ts_ms - 300001, 300),
                     PROTO_ESTALE);
    /* Tampering. */
    assert_int_equal(proto_upstream_verify(h, ts, want, body, blen - 1, ts_ms, 300), PROTO_ESIG);
    {
        char ts2[32];
        snprintf(ts2, sizeof(ts2), "%lld", (long long)ts_ms + 1);
        assert_int_equal(proto_upstream_verify(h, ts2, want, body, blen, ts_ms, 300),
                         PROTO_ESIG);
    }
    upper[63] = upper[63] == '0' ? '1' : '0';
    assert_int_equal(proto_upstream_verify(h, ts, upper, body, blen, ts_ms, 300), PROTO_ESIG);
    proto_hmac_free(h);
    assert_non_null(h = proto_hmac_new((const unsigned char *)"wrong-key", 9));
    assert_int_equal(proto_upstream_verify(h, ts, want, body, blen, ts_ms, 300), PROTO_ESIG);
    proto_hmac_free(h);
    json_decref(root);
}

static void test_upstream_table(void **state)
{
    const char *key = "example-api-key-not-a-real-key", *body = "{\"a\":1}";
    struct proto_hmac *h = proto_hmac_new((const unsigned char *)key, strlen(key));
    const int64_t now_ms = 1787055532140;
    char good_s[65], good_ms[65], cli[65], content[64], longsig[80];
    size_t clen;
    size_t i;

    assert_non_null(h);
    assert_int_equal(proto_upstream_sign(h, "1787055532", body, strlen(body), good_s), 0);
    assert_int_equal(proto_upstream_sign(h, "1787055532140", body, strlen(body), good_ms), 0);
    clen = (size_t)snprintf(content, sizeof(content), "1787055532.%s", body);
    openssl_hmac((const unsigned char *)key, strlen(key), 1, content, clen, cli);
    assert_string_equal(good_s, cli);
    snprintf(longsig, sizeof(longsig), "%s0", good_s);

    struct { const char *ts, *sig; int64_t now; int want; } rows[] = {
        {"1787055532", good_s, now_ms, 0},                      /* seconds */
        {"1787055532140", good_ms, now_ms, 0},                  /* milliseconds */
        {"1787055532", good_s, 1787055532000 + 300000, 0},
        {"1787055532", good_s, 1787055532000 + 300001, PROTO_ESTALE},
        {"1787055532", good_s, 1787055532000 - 300001, PROTO_ESTALE},
        {"1000000000000", good_s, now_ms, PROTO_ESTALE},        /* 10^12 is seconds: far */
        {"1787055532", good_ms, now_ms, PROTO_ESIG},            /* sig of another ts text */
        {"1787055532", "", now_ms, PROTO_ESIG},
        {"1787055532", "zz", now_ms, PROTO_ESIG},
        {"1787055532", longsig, now_ms, PROTO_ESIG},
        {"1787055532", "sha256=0000", now_ms, PROTO_ESIG},
        {"1787055532", NULL, now_ms, PROTO_ESIG},
        {"", good_s, now_ms, PROTO_EVALUE},
        {NULL, good_s, now_ms, PROTO_EVALUE},
        {"17870555x2", good_s, now_ms, PROTO_EVALUE},
        {"-1787055532", good_s, now_ms, PROTO_EVALUE},
        {"99999999999999999999", good_s, now_ms, PROTO_EVALUE},
        {"9223372036854775807", good_s, now_ms, PROTO_ESTALE},
    };
    for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int rc = proto_upstream_verify(h, rows[i].ts, rows[i].sig, body, strlen(body),
                                       rows[i].now, 300);
        if (rc != rows[i].want)
            fail_msg("row %zu: got %d want %d", i, rc, rows[i].want);
    }
    {   /* a non-hex char in an otherwise right-length signature */
        char bad[65];
        memcpy(bad, good_s, 65);
        bad[10] = 'g';
        assert_int_equal(proto_upstream_verify(h, "1787055532", bad, body, strlen(body), now_ms,
                                               300), PROTO_ESIG);
    }
    assert_int_equal(proto_upstream_verify(NULL, "1787055532", good_s, body, strlen(body),
                                           now_ms, 300), PROTO_ESIG);
    assert_int_equal(proto_upstream_verify(h, "1787055532", good_s, body, strlen(body), now_ms,
                                           INT64_MAX), 0);
    assert_int_equal(proto_upstream_sign(h, NULL, body, 1, good_s), PROTO_EVALUE);
    proto_hmac_free(h);
}

/* ---- allocation failure ---------------------------------------------------------------- */

struct chaos {
    long count, fail_at;    /* fail the allocation numbered fail_at (0-based) when armed */
    int armed, tripped;
};
static struct chaos chaos;

static int chaos_trip(void)
{
    if (!chaos.armed || chaos.count++ != chaos.fail_at)
        return 0;
    chaos.tripped = 1;
    return 1;
}

static void *chaos_malloc(size_t n, const char *file, int line)
{
    return chaos_trip() ? NULL : malloc(n);
}

static void *chaos_realloc(void *p, size_t n, const char *file, int line)
{
    return chaos_trip() ? NULL : realloc(p, n);
}

static void chaos_free(void *p, const char *file, int line)
{
    free(p);
}

/* One pass over every allocating entry point; results must be success or a clean failure,
 * and a success must be the right answer. */
static void chaos_pass(const unsigned char *key, const unsigned char *seed,
                       const unsigned char *pub, const char *ref_v1, const char *ref_v1a,
                       const char *ref_up, const char *hdr_both, const char *hdr_bad)
{
    const char *body = "{\"event\":\"request.status.updated\",\"data\":{}}";
    char sig[PROTO_SIG_MAX], pk[PROTO_WHPK_MAX], hex[65];
    struct proto_hmac *h = proto_hmac_new(key, 32);
    int rc;

    if (h != NULL) {
        rc = proto_sw_sign(h, "evt_1", 1787055532, body, strlen(body), sig, sizeof(sig));
        assert_true(rc == 0 || rc == PROTO_ENOMEM);
        if (rc == 0)
            assert_string_equal(sig, ref_v1);
        rc = proto_upstream_sign(h, "1787055532", body, strlen(body), hex);
        assert_true(rc == 0 || rc == PROTO_ENOMEM);
        if (rc == 0)
            assert_string_equal(hex, ref_up);
        rc = proto_upstream_verify(h, "1787055532", ref_up, body, strlen(body), 1787055532000,
                                   300);
        assert_true(rc == 0 || rc == PROTO_ENOMEM);
    }
    rc = proto_sw_verify(h, pub, "evt_1", "1787055532", hdr_both, body, strlen(body),
                         1787055532, 300);
    assert_true(rc == 0 || rc == PROTO_ENOMEM || (h == NULL && rc == PROTO_ESIG) ||
                (chaos.tripped && rc == PROTO_ESIG));
    rc = proto_sw_verify(h, pub, "evt_1", "1787055532", hdr_bad, body, strlen(body),
                         1787055532, 300);
    assert_true(rc == PROTO_ESIG || rc == PROTO_ENOMEM);
    rc = proto_sw_sign_ed25519(seed, "evt_1", 1787055532, body, strlen(body), sig, sizeof(sig));
    assert_true(rc == 0 || rc == PROTO_ENOMEM);
    if (rc == 0)
        assert_string_equal(sig, ref_v1a);
    rc = proto_ed25519_public(seed, pk, sizeof(pk));
    assert_true(rc == 0 || rc == PROTO_ENOMEM);
    proto_hmac_free(h);
}

static void test_chaos_allocator(void **state)
{
    const char *body = "{\"event\":\"request.status.updated\",\"data\":{}}";
    unsigned char key[32], seed[32], pub[32];
    char v1[PROTO_SIG_MAX], v1a[PROTO_SIG_MAX], up[65], pk[PROTO_WHPK_MAX];
    char both[256], bad[256];
    struct proto_hmac *h;
    long n;

    if (*(int *)*state == 0)
        skip();                             /* hooks could not be installed */
    rng_fill(key, 32);
    rng_fill(seed, 32);
    assert_non_null(h = proto_hmac_new(key, 32));
    assert_int_equal(proto_sw_sign(h, "evt_1", 1787055532, body, strlen(body), v1, sizeof(v1)),
                     0);
    assert_int_equal(proto_upstream_sign(h, "1787055532", body, strlen(body), up), 0);
    proto_hmac_free(h);
    assert_int_equal(proto_sw_sign_ed25519(seed, "evt_1", 1787055532, body, strlen(body), v1a,
                                           sizeof(v1a)), 0);
    assert_int_equal(proto_ed25519_public(seed, pk, sizeof(pk)), 0);
    assert_int_equal(proto_whpk_parse(pk, pub), 0);
    snprintf(both, sizeof(both), "v1,AAAA %s %s", v1a, v1);
    snprintf(bad, sizeof(bad), "v1,AAAA %s %s", v1a, v1);  /* one char off in each */
    bad[8 + 10] = bad[8 + 10] == 'A' ? 'B' : 'A';
    bad[8 + strlen(v1a) + 1 + 10] = bad[8 + strlen(v1a) + 1 + 10] == 'A' ? 'B' : 'A';
    chaos_pass(key, seed, pub, v1, v1a, up, both, bad);   /* warm up lazy OpenSSL state */

    for (n = 0; n < 100000; n++) {
        chaos.count = 0;
        chaos.fail_at = n;
        chaos.tripped = 0;
        chaos.armed = 1;
        chaos_pass(key, seed, pub, v1, v1a, up, both, bad);
        chaos.armed = 0;
        if (!chaos.tripped)
            break;                          /* every allocation has failed once */
    }
    print_message("chaos allocator: %ld allocation points failed in turn\n", n);
    assert_true(n > 10 && n < 100000);
}

int main(void)
{
    static int hooks;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64_rfc4648),
        cmocka_unit_test(test_base64_invalid),
        cmocka_unit_test(test_base64_vs_openssl),
        cmocka_unit_test(test_whsec),
        cmocka_unit_test(test_ed25519_public),
        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_hmac_vs_openssl),
        cmocka_unit_test(test_sw_reference_vector),
        cmocka_unit_test(test_sw_vs_openssl),
        cmocka_unit_test(test_sw_verify_table),
        cmocka_unit_test(test_sw_bitflips),
        cmocka_unit_test(test_ed25519_vs_openssl),
        cmocka_unit_test(test_upstream_fixture),
        cmocka_unit_test(test_upstream_table),
        cmocka_unit_test_prestate(test_chaos_allocator, &hooks),
    };

    /* Must run before libcrypto allocates anything. */
    hooks = CRYPTO_set_mem_functions(chaos_malloc, chaos_realloc, chaos_free);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
