/* test_json.c - unit tests for protocol/json.c: the strict reader as row tables (valid and
 * invalid documents with the exact error message and byte offset, duplicate keys, depth,
 * numbers), proto_utf8_valid (overlong forms, surrogates, > U+10FFFF, truncated sequences),
 * the writer (integers, the string escaper's exact output, escaper -> reader round trips,
 * compact values) and allocation failure in both.
 * runs on: the test process, one thread. Run from the repository root. */
#include "tests/unit/proto_test.h"

#include "protocol/json.c"
#include "protocol/proto.c"

#define N_ROWS(a) (sizeof(a) / sizeof((a)[0]))

/* Parse a C string; returns the code and leaves err->msg filled. */
static int parse(const char *s, struct pjson_doc *doc, struct proto_err *err)
{
    memset(err, 0, sizeof(*err));
    return pjson_parse(s, strlen(s), doc, err);
}

/* The writer's text for one call, freed by the caller. */
static char *finish(struct pjson_buf *b, size_t *len)
{
    char *t = pjson_buf_finish(b, len);
    assert_non_null(t);
    return t;
}

/* ---- reader: valid documents ------------------------------------------------------------- */

static void test_valid(void **state)
{
    static const struct {
        const char *doc;
        enum pjson_type type;
        const char *compact; /* pjson_compact of the root */
    } rows[] = {
        {"null", PJSON_NULL, "null"},
        {"true", PJSON_TRUE, "true"},
        {" false ", PJSON_FALSE, "false"},
        {"0", PJSON_INT, "0"},
        {"-0", PJSON_INT, "-0"},
        {"1.5e-3", PJSON_REAL, "1.5e-3"},
        {"1E+2", PJSON_REAL, "1E+2"},
        {"\"\"", PJSON_STR, "\"\""},
        {"[]", PJSON_ARR, "[]"},
        {"{}", PJSON_OBJ, "{}"},
        {"\t[ 1 ,\n2 ,\r3 ]\n", PJSON_ARR, "[1,2,3]"},
        {"{ \"a\" : { \"b\" : [ { \"c\" : \"d e\" } ] } }", PJSON_OBJ,
         "{\"a\":{\"b\":[{\"c\":\"d e\"}]}}"},
        {"\"a \\\" b\"", PJSON_STR, "\"a \\\" b\""},
        {"[\"\\\\\", \" \"]", PJSON_ARR, "[\"\\\\\",\" \"]"},
        /* the same key in two objects */
        {"{\"a\":1,\"b\":{\"a\":2}}", PJSON_OBJ, "{\"a\":1,\"b\":{\"a\":2}}"},
        {"[{\"a\":1},{\"a\":2}]", PJSON_ARR, "[{\"a\":1},{\"a\":2}]"},
        {"\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", PJSON_STR,
         "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct pjson_doc doc;
        struct proto_err err;
        char out[256];
        if (parse(rows[i].doc, &doc, &err) != 0)
            fail_msg("%s: %s", rows[i].doc, err.msg);
        assert_int_equal(doc.root->type, rows[i].type);
        size_t n = pjson_compact(doc.root, out, sizeof(out));
        assert_true(n < sizeof(out));
        out[n] = '\0';
        assert_string_equal(out, rows[i].compact);
        assert_int_equal(pjson_compact(doc.root, NULL, 0), n);
        pjson_free(&doc);
        assert_null(doc.mem);
    }
}

/* Decoded strings: escapes become UTF-8 bytes. */
static void test_strings(void **state)
{
    static const struct { const char *doc, *want; } rows[] = {
        {"\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t"},
        {"\"\\u0041\\u00e9\\u20AC\"", "A\xc3\xa9\xe2\x82\xac"},
        {"\"\\u007f\\u0080\\u07ff\\u0800\\uffff\"", "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf"},
        {"\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80"},
        {"\"\\udbff\\udfff\"", "\xf4\x8f\xbf\xbf"},
        {"\"\x7f\"", "\x7f"},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct pjson_doc doc;
        struct proto_err err;
        assert_int_equal(parse(rows[i].doc, &doc, &err), 0);
        assert_int_equal(doc.root->type, PJSON_STR);
        assert_int_equal(doc.root->u.str.n, strlen(rows[i].want));
        assert_string_equal(doc.root->u.str.s, rows[i].want);
        pjson_free(&doc);
    }
}

/* ---- reader: invalid documents ----------------------------------------------------------- */

static void test_invalid(void **state)
{
    static const struct { const char *doc, *msg; } rows[] = {
        {"", "invalid JSON at byte 0: unexpected end of input"},
        {"   ", "invalid JSON at byte 3: unexpected end of input"},
        {"{", "invalid JSON at byte 1: expected a string key"},
        {"[", "invalid JSON at byte 1: unexpected end of input"},
        {"[1,]", "invalid JSON at byte 3: unexpected character"},
        {"[1 2]", "invalid JSON at byte 3: expected ',' or ']'"},
        {"{\"a\" 1}", "invalid JSON at byte 5: expected ':'"},
        {"{\"a\":1 \"b\":2}", "invalid JSON at byte 7: expected ',' or '}'"},
        {"{1:2}", "invalid JSON at byte 1: expected a string key"},
        {"[1]]", "invalid JSON at byte 3: trailing characters"},
        {"[] []", "invalid JSON at byte 3: trailing characters"},
        {"\xef\xbb\xbf[]", "invalid JSON at byte 0: unexpected character"},
        {"nul", "invalid JSON at byte 0: invalid literal"},
        {"True", "invalid JSON at byte 0: unexpected character"},
        {"01", "invalid JSON at byte 1: trailing characters"},
        {"1.", "invalid JSON at byte 0: bad number"},
        {".1", "invalid JSON at byte 0: unexpected character"},
        {"+1", "invalid JSON at byte 0: unexpected character"},
        {"-", "invalid JSON at byte 0: bad number"},
        {"1e", "invalid JSON at byte 0: bad number"},
        {"\"abc", "invalid JSON at byte 4: unterminated string"},
        {"\"a\\", "invalid JSON at byte 2: unterminated string"},
        {"\"a\nb\"", "invalid JSON at byte 2: control character in string"},
        {"\"\\x\"", "invalid JSON at byte 3: bad escape"},
        {"\"\\u12\"", "invalid JSON at byte 3: bad \\u escape"},
        {"\"\\u12g4\"", "invalid JSON at byte 3: bad \\u escape"},
        {"\"\\u0000\"", "invalid JSON at byte 7: \\u0000 in string"},
        {"{\"\\u0000\":1}", "invalid JSON at byte 8: \\u0000 in string"},
        {"\"\\ud800\"", "invalid JSON at byte 7: lone high surrogate"},
        {"\"\\ud800\\u0041\"", "invalid JSON at byte 7: lone high surrogate"},
        {"\"\\udc00\"", "invalid JSON at byte 7: lone low surrogate"},
        {"\"\xff\"", "invalid JSON at byte 1: invalid UTF-8"},
        {"\"\xc0\x80\"", "invalid JSON at byte 1: invalid UTF-8"},
        {"\"\xed\xa0\x80\"", "invalid JSON at byte 1: invalid UTF-8"},
        {"\"\xf4\x90\x80\x80\"", "invalid JSON at byte 1: invalid UTF-8"},
        {"\"ab\xe2\x82\"", "invalid JSON at byte 3: invalid UTF-8"},
        /* duplicate keys, compared after decoding escapes */
        {"{\"a\":1,\"a\":2}", "invalid JSON at byte 12: duplicate key"},
        {"{\"a\":1,\"\\u0061\":2}", "invalid JSON at byte 17: duplicate key"},
        {"{\"x\":{\"k\":[],\"j\":0,\"k\":null}}", "invalid JSON at byte 27: duplicate key"},
        {"{\"\":1,\"\":1}", "invalid JSON at byte 10: duplicate key"},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct pjson_doc doc;
        struct proto_err err;
        int rc = parse(rows[i].doc, &doc, &err);
        if (rc != PROTO_EJSON || strcmp(err.msg, rows[i].msg) != 0)
            fail_msg("row %zu: rc %d msg \"%s\", want \"%s\"", i, rc, err.msg, rows[i].msg);
        assert_int_equal(err.code, PROTO_EJSON);
        assert_string_equal(err.field, "");
        assert_null(doc.mem);
        assert_null(doc.root);
        pjson_free(&doc); /* safe on an empty doc */
    }
    /* raw NUL bytes are never JSON, wherever they are */
    static const char nul_rows[][6] = {"\"a\0b\"", "[1]\0", "\0[1]"};
    for (size_t i = 0; i < N_ROWS(nul_rows); i++) {
        struct pjson_doc doc;
        assert_int_equal(pjson_parse(nul_rows[i], 5, &doc, NULL), PROTO_EJSON);
    }
    /* NULL with length 0 is the empty document; over PROTO_MAX_INPUT is too long */
    struct pjson_doc doc;
    struct proto_err err;
    assert_int_equal(pjson_parse(NULL, 0, &doc, &err), PROTO_EJSON);
    assert_int_equal(pjson_parse("1", PROTO_MAX_INPUT + 1, &doc, &err), PROTO_ETOOLONG);
}

/* ---- reader: numbers, depth, lookups ----------------------------------------------------- */

static void test_numbers(void **state)
{
    static const struct { const char *doc; int type, big; int64_t i; } rows[] = {
        {"0", PJSON_INT, 0, 0},
        {"-1", PJSON_INT, 0, -1},
        {"9007199254740991", PJSON_INT, 0, 9007199254740991LL},
        {"9223372036854775807", PJSON_INT, 0, INT64_MAX},
        {"-9223372036854775808", PJSON_INT, 0, INT64_MIN},
        {"9223372036854775808", PJSON_INT, 1, INT64_MAX},
        {"-9223372036854775809", PJSON_INT, 1, INT64_MIN},
        {"18446744073709551616", PJSON_INT, 1, INT64_MAX},
        {"123456789012345678901234567890", PJSON_INT, 1, INT64_MAX},
        {"1.0", PJSON_REAL, 0, 0},
        {"1e400", PJSON_REAL, 0, 0},
        {"-0.0e-0", PJSON_REAL, 0, 0},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct pjson_doc doc;
        struct proto_err err;
        assert_int_equal(parse(rows[i].doc, &doc, &err), 0);
        assert_int_equal(doc.root->type, rows[i].type);
        assert_int_equal(doc.root->big, rows[i].big);
        if (rows[i].type == PJSON_INT)
            assert_true(doc.root->u.i == rows[i].i);
        pjson_free(&doc);
    }
}

static char *nested(int depth, const char *inner)
{
    size_t n = strlen(inner);
    char *s = malloc(2 * (size_t)depth + n + 1);
    memset(s, '[', (size_t)depth);
    memcpy(s + depth, inner, n);
    memset(s + depth + n, ']', (size_t)depth);
    s[2 * depth + n] = '\0';
    return s;
}

static void test_depth(void **state)
{
    (void)state;
    struct pjson_doc doc;
    struct proto_err err;
    /* PROTO_MAX_DEPTH levels parse; one more is refused where it opens */
    char *s = nested(PROTO_MAX_DEPTH, "1");
    assert_int_equal(parse(s, &doc, &err), 0);
    assert_int_equal(pjson_depth(doc.root), PROTO_MAX_DEPTH);
    pjson_free(&doc);
    free(s);
    s = nested(PROTO_MAX_DEPTH + 1, "1");
    assert_int_equal(parse(s, &doc, &err), PROTO_EJSON);
    char want[64];
    snprintf(want, sizeof(want), "invalid JSON at byte %d: nesting too deep", PROTO_MAX_DEPTH);
    assert_string_equal(err.msg, want);
    free(s);
    s = nested(10000, "");
    assert_int_equal(parse(s, &doc, &err), PROTO_EJSON);
    free(s);
    /* objects count as levels too */
    s = malloc(8 * PROTO_MAX_DEPTH + 16);
    size_t n = 0;
    for (int i = 0; i < PROTO_MAX_DEPTH + 1; i++)
        n += (size_t)sprintf(s + n, "{\"a\":");
    strcpy(s + n, "1");
    assert_int_equal(parse(s, &doc, &err), PROTO_EJSON);
    assert_non_null(strstr(err.msg, "nesting too deep"));
    free(s);

    static const struct { const char *text; int depth; } rows[] = {
        {"1", 0}, {"\"[{\"", 0}, {"[]", 1}, {"{\"a\":1}", 1}, {"[[],[[]]]", 3},
        {"{\"a\":\"]]\",\"b\":[{}]}", 3}, {"[\"\\\"[\"]", 1},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        assert_int_equal(pjson_text_depth(rows[i].text, strlen(rows[i].text)), rows[i].depth);
        assert_int_equal(parse(rows[i].text, &doc, &err), 0);
        assert_int_equal(pjson_depth(doc.root), rows[i].depth);
        pjson_free(&doc);
    }
}

static void test_get(void **state)
{
    (void)state;
    struct pjson_doc doc;
    struct proto_err err;
    assert_int_equal(parse("{\"a\":1,\"ab\":[true],\"\":null,\"b\":{\"a\":\"x\"}}", &doc, &err),
                     0);
    const struct pjson *r = doc.root;
    assert_int_equal(r->u.kids.n, 4);
    assert_int_equal(pjson_get(r, "a")->u.i, 1);
    assert_int_equal(pjson_get(r, "ab")->type, PJSON_ARR);
    assert_int_equal(pjson_get(r, "")->type, PJSON_NULL);
    assert_string_equal(pjson_get(pjson_get(r, "b"), "a")->u.str.s, "x");
    assert_null(pjson_get(r, "A"));
    assert_null(pjson_get(r, "abc"));
    assert_null(pjson_get(pjson_get(r, "ab"), "a")); /* not an object */
    assert_null(pjson_get(NULL, "a"));
    /* each member keeps its key, and its text span in the input */
    const struct pjson *ab = pjson_get(r, "ab");
    assert_string_equal(ab->key, "ab");
    assert_int_equal(ab->rawlen, 6);
    assert_memory_equal(ab->raw, "[true]", 6);
    assert_null(r->key);
    pjson_free(&doc);
}

/* ---- UTF-8 ------------------------------------------------------------------------------- */

static void test_utf8(void **state)
{
    static const struct { const char *s; size_t n; int valid; } rows[] = {
        {"", 0, 1},
        {"plain ascii \x7f", 13, 1},
        {"\xc2\x80", 2, 1},                 /* U+0080 */
        {"\xdf\xbf", 2, 1},                 /* U+07FF */
        {"\xe0\xa0\x80", 3, 1},             /* U+0800 */
        {"\xed\x9f\xbf", 3, 1},             /* U+D7FF */
        {"\xee\x80\x80", 3, 1},             /* U+E000 */
        {"\xef\xbf\xbf", 3, 1},             /* U+FFFF */
        {"\xf0\x90\x80\x80", 4, 1},         /* U+10000 */
        {"\xf4\x8f\xbf\xbf", 4, 1},         /* U+10FFFF */
        {"\0", 1, 1},                       /* NUL is UTF-8 (the JSON reader refuses it) */
        /* overlong forms */
        {"\xc0\x80", 2, 0},
        {"\xc1\xbf", 2, 0},
        {"\xe0\x80\x80", 3, 0},
        {"\xe0\x9f\xbf", 3, 0},
        {"\xf0\x80\x80\x80", 4, 0},
        {"\xf0\x8f\xbf\xbf", 4, 0},
        /* surrogates U+D800..U+DFFF */
        {"\xed\xa0\x80", 3, 0},
        {"\xed\xbf\xbf", 3, 0},
        {"\xed\xa0\xbd\xed\xb8\x80", 6, 0}, /* CESU-8 pair */
        /* above U+10FFFF, and bytes that never occur */
        {"\xf4\x90\x80\x80", 4, 0},
        {"\xf5\x80\x80\x80", 4, 0},
        {"\xf8\x88\x80\x80\x80", 5, 0},
        {"\xfe", 1, 0},
        {"\xff", 1, 0},
        /* lone continuation bytes, truncated sequences */
        {"\x80", 1, 0},
        {"a\xbf", 2, 0},
        {"\xc2", 1, 0},
        {"\xe2\x82", 2, 0},
        {"\xf0\x9f\x98", 3, 0},
        {"\xc2\x41", 2, 0},
        {"\xe2\x28\xa1", 3, 0},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        if (proto_utf8_valid(rows[i].s, rows[i].n) != rows[i].valid)
            fail_msg("row %zu: proto_utf8_valid != %d", i, rows[i].valid);
        /* the reader applies the same rule inside strings (NUL aside) */
        if (rows[i].n > 0 && rows[i].s[0] == '\0')
            continue;
        char doc[16];
        doc[0] = '"';
        memcpy(doc + 1, rows[i].s, rows[i].n);
        doc[rows[i].n + 1] = '"';
        struct pjson_doc d;
        int rc = pjson_parse(doc, rows[i].n + 2, &d, NULL);
        if ((rc == 0) != rows[i].valid)
            fail_msg("row %zu: reader rc %d", i, rc);
        if (rc == 0)
            pjson_free(&d);
    }
}

/* ---- writer ------------------------------------------------------------------------------ */

static void test_integers(void **state)
{
    static const struct { int64_t v; const char *want; } rows[] = {
        {0, "0"}, {-1, "-1"}, {7, "7"}, {1787000000000LL, "1787000000000"},
        {INT64_MAX, "9223372036854775807"}, {INT64_MIN, "-9223372036854775808"},
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct pjson_buf b = {0};
        pjson_put_i64(&b, rows[i].v);
        char *t = finish(&b, NULL);
        assert_string_equal(t, rows[i].want);
        free(t);
    }
    struct pjson_buf b = {0};
    pjson_put_u64(&b, UINT64_MAX);
    PJSON_PUT_LIT(&b, ",");
    pjson_put_u64(&b, 0);
    size_t len;
    char *t = finish(&b, &len);
    assert_string_equal(t, "18446744073709551615,0");
    assert_int_equal(len, 22);
    free(t);
}

/* The escaper's exact output. */
static void test_escaper(void **state)
{
    static const struct { const char *s; size_t n; const char *want; } rows[] = {
        {"", 0, "\"\""},
        {"plain", 5, "\"plain\""},
        {"q\"b\\s/", 6, "\"q\\\"b\\\\s/\""},
        {"\b\f\n\r\t", 5, "\"\\b\\f\\n\\r\\t\""},
        {"\x01\x1f\x7f", 3, "\"\\u0001\\u001f\x7f\""},
        {"a\0b", 3, "\"a\\u0000b\""},
        {"caf\xc3\xa9 \xf0\x9f\x98\x80", 10, "\"caf\xc3\xa9 \xf0\x9f\x98\x80\""},
        /* each byte that starts no valid sequence becomes U+FFFD; valid text around it stays */
        {"\xff", 1, "\"\\ufffd\""},
        {"a\xc0\x80z", 4, "\"a\\ufffd\\ufffdz\""},
        {"\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\""},
        {"\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
        {"\xc3\xa9\xe2\x82", 4, "\"\xc3\xa9\\ufffd\\ufffd\""}, /* cut mid-character */
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct pjson_buf b = {0};
        pjson_put_strn(&b, rows[i].s, rows[i].n);
        char *t = finish(&b, NULL);
        if (strcmp(t, rows[i].want) != 0)
            fail_msg("row %zu: %s", i, t);
        free(t);
    }
    struct pjson_buf b = {0};
    pjson_put_str(&b, NULL);
    PJSON_PUT_LIT(&b, ",");
    pjson_put_str(&b, "x\ty");
    char *t = finish(&b, NULL);
    assert_string_equal(t, "null,\"x\\ty\"");
    free(t);
}

/* Escape, read back: the reader gets the same bytes (valid UTF-8 without NUL), or the
 * replacement character for each invalid byte. */
static void roundtrip(const char *s, size_t n)
{
    struct pjson_buf b = {0};
    pjson_put_strn(&b, s, n);
    size_t len;
    char *t = finish(&b, &len);
    struct pjson_doc doc;
    struct proto_err err;
    if (pjson_parse(t, len, &doc, &err) != 0)
        fail_msg("escaped text does not parse: %s (%s)", t, err.msg);
    assert_int_equal(doc.root->type, PJSON_STR);
    if (proto_utf8_valid(s, n)) {
        assert_int_equal(doc.root->u.str.n, n);
        assert_memory_equal(doc.root->u.str.s, s, n);
    } else {
        assert_true(proto_utf8_valid(doc.root->u.str.s, doc.root->u.str.n));
        assert_non_null(strstr(doc.root->u.str.s, "\xef\xbf\xbd"));
    }
    pjson_free(&doc);
    free(t);
}

static void test_roundtrip(void **state)
{
    static const char *const rows[] = {
        "", "a", "\"", "\\", "\\\"", "/", "\x01\x02\x03\x1e\x1f", "\b\f\n\r\t", "\x7f",
        "\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf",
        "{\"json\":[1,2]} inside", "\xc0\x80", "\xed\xa0\x80", "x\xff\xfey", "\xe2\x82",
    };
    (void)state;
    for (size_t i = 0; i < N_ROWS(rows); i++)
        roundtrip(rows[i], strlen(rows[i]));
    /* every single byte and every pair of bytes (NUL aside: the reader refuses \u0000) */
    for (unsigned c = 1; c < 256; c++) {
        char s[2] = {(char)c, 0};
        roundtrip(s, 1);
        for (unsigned d = 1; d < 256; d += 3) {
            char p[2] = {(char)c, (char)d};
            roundtrip(p, 2);
        }
    }
}

static void test_put_value(void **state)
{
    (void)state;
    struct pjson_doc doc;
    struct proto_err err;
    assert_int_equal(parse("{ \"a\" : [ 1 , \"x y\" , { } ] , \"b\" : null }", &doc, &err), 0);
    struct pjson_buf b = {0};
    pjson_put_value(&b, pjson_get(doc.root, "a"));
    PJSON_PUT_LIT(&b, "|");
    pjson_put_value(&b, pjson_get(doc.root, "b"));
    PJSON_PUT_LIT(&b, "|");
    pjson_put_value(&b, pjson_get(doc.root, "missing"));
    PJSON_PUT_LIT(&b, "|");
    pjson_put_value(&b, doc.root);
    char *t = finish(&b, NULL);
    assert_string_equal(t, "[1,\"x y\",{}]|null|null|{\"a\":[1,\"x y\",{}],\"b\":null}");
    free(t);
    pjson_free(&doc);
    /* a long text grows the buffer past its first 1024 bytes */
    struct pjson_buf g = {0};
    for (int i = 0; i < 1000; i++)
        PJSON_PUT_LIT(&g, "0123456789");
    size_t len;
    t = finish(&g, &len);
    assert_int_equal(len, 10000);
    assert_int_equal(strlen(t), 10000);
    free(t);
}

/* ---- allocation failure ------------------------------------------------------------------ */

static void test_chaos(void **state)
{
    (void)state;
    static const char doc[] = "{\"a\":[1,2,{\"b\":\"caf\\u00e9\"}],\"c\":\"d\"}";
    /* reader: one allocation, the arena */
    for (long n = 1;; n++) {
        struct pjson_doc d;
        struct proto_err err;
        long live = chaos_live;
        chaos_arm(n);
        int rc = pjson_parse(doc, strlen(doc), &d, &err);
        chaos_disarm();
        if (chaos_tripped) {
            assert_int_equal(rc, PROTO_ENOMEM);
            assert_string_equal(err.msg, "out of memory");
            assert_null(d.mem);
        } else {
            assert_int_equal(rc, 0);
            pjson_free(&d);
        }
        assert_int_equal(chaos_live, live);
        if (!chaos_tripped)
            break;
    }
    /* writer: sticky failure, every later write a no-op, NULL result, nothing leaked */
    for (long n = 1;; n++) {
        long live = chaos_live;
        struct pjson_buf b = {0};
        chaos_arm(n);
        for (int i = 0; i < 300; i++) {
            pjson_put_str(&b, "escaped \"text\"\n");
            pjson_put_i64(&b, -i);
        }
        size_t len = 99;
        char *t = pjson_buf_finish(&b, &len);
        chaos_disarm();
        if (chaos_tripped) {
            assert_null(t);
            assert_int_equal(len, 0);
        } else {
            assert_non_null(t);
            free(t);
        }
        assert_int_equal(chaos_live, live);
        if (!chaos_tripped)
            break;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),     cmocka_unit_test(test_strings),
        cmocka_unit_test(test_invalid),   cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_depth),     cmocka_unit_test(test_get),
        cmocka_unit_test(test_utf8),      cmocka_unit_test(test_integers),
        cmocka_unit_test(test_escaper),   cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_put_value), cmocka_unit_test(test_chaos),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
