/* fuzz_json.c - libFuzzer target for protocol/json.c: the strict reader (pjson_parse), the
 * UTF-8 validator and the string escaper. Invariants: the reader agrees with jansson on what
 * is JSON (fuzz_diff_json in proto_fuzz.h) and only fails with PROTO_EJSON / PROTO_ETOOLONG
 * and an "invalid JSON at byte N" message inside the input; an accepted tree holds valid
 * UTF-8 strings without NUL, no duplicate keys, text spans inside the input, depth at most
 * PROTO_MAX_DEPTH, and its compact text reads back to the same compact text; every string
 * (and the whole input as one string) goes through the escaper and reads back to the same
 * bytes, or to valid UTF-8 with U+FFFD where the input was not UTF-8.
 * runs on: the fuzzer process, one thread. */
#include "tests/fuzz/proto_fuzz.h"

#include "protocol/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Escape s[0..n) and read it back. */
static void check_escape(const char *s, size_t n)
{
    struct pjson_buf b = {0};
    pjson_put_strn(&b, s, n);
    size_t len;
    char *text = pjson_buf_finish(&b, &len);
    FUZZ_CHECK(text != NULL && strlen(text) == len && proto_utf8_valid(text, len));
    struct pjson_doc doc;
    int rc = pjson_parse(text, len, &doc, NULL);
    if (memchr(s, '\0', n) != NULL) { /* escaped as \u0000, which the reader refuses */
        FUZZ_CHECK(rc == PROTO_EJSON || len > PROTO_MAX_INPUT);
    } else if (len <= PROTO_MAX_INPUT) {
        FUZZ_CHECK(rc == 0 && doc.root->type == PJSON_STR);
        const struct pjson *v = doc.root;
        if (proto_utf8_valid(s, n))
            FUZZ_CHECK(v->u.str.n == n && memcmp(v->u.str.s, s, n) == 0);
        else
            FUZZ_CHECK(proto_utf8_valid(v->u.str.s, v->u.str.n) &&
                       strstr(v->u.str.s, "\xef\xbf\xbd") != NULL);
        pjson_free(&doc);
    }
    free(text);
}

/* A decoded string or key: NUL-terminated, no NUL inside, valid UTF-8. */
static void check_str(const char *s, size_t n)
{
    FUZZ_CHECK(s[n] == '\0' && strlen(s) == n && proto_utf8_valid(s, n));
}

static void check_tree(const struct pjson *v, const uint8_t *data, size_t size, int depth)
{
    FUZZ_CHECK(depth <= PROTO_MAX_DEPTH && v->type <= PJSON_OBJ);
    FUZZ_CHECK((const uint8_t *)v->raw >= data && v->rawlen <= size &&
               (const uint8_t *)v->raw + v->rawlen <= data + size);
    FUZZ_CHECK(pjson_compact(v, NULL, 0) <= v->rawlen);
    if (v->type == PJSON_STR) {
        check_str(v->u.str.s, v->u.str.n);
        check_escape(v->u.str.s, v->u.str.n);
    }
    if (v->type != PJSON_ARR && v->type != PJSON_OBJ)
        return;
    uint32_t n = 0;
    for (const struct pjson *c = v->u.kids.first; c != NULL; c = c->next, n++) {
        if (v->type == PJSON_OBJ) {
            FUZZ_CHECK(c->key != NULL);
            check_str(c->key, c->klen);
            FUZZ_CHECK(pjson_get(v, c->key) != NULL);
            for (const struct pjson *o = v->u.kids.first; o != c && n < 64; o = o->next)
                FUZZ_CHECK(o->klen != c->klen || memcmp(o->key, c->key, c->klen) != 0);
        } else {
            FUZZ_CHECK(c->key == NULL);
        }
        check_tree(c, data, size, depth + 1);
    }
    FUZZ_CHECK(n == v->u.kids.n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pjson_doc doc;
    struct proto_err err;
    memset(&err, 0, sizeof(err));
    int rc = pjson_parse((const char *)data, size, &doc, &err);
    FUZZ_CHECK(rc == 0 || rc == PROTO_EJSON || rc == PROTO_ETOOLONG);
    FUZZ_CHECK(rc == 0 ? err.code == 0 : err.code == rc);
    fuzz_diff_json(data, size, rc, &err);
    check_escape((const char *)data, size);
    if (rc != 0) {
        FUZZ_CHECK(doc.mem == NULL && doc.root == NULL);
        unsigned long at;
        if (rc == PROTO_EJSON)
            FUZZ_CHECK(sscanf(err.msg, "invalid JSON at byte %lu: ", &at) == 1 && at <= size);
        return 0;
    }
    check_tree(doc.root, data, size, 0);
    FUZZ_CHECK(pjson_depth(doc.root) <= PROTO_MAX_DEPTH);

    /* the compact text is JSON, and compact already */
    struct pjson_buf b = {0};
    pjson_put_value(&b, doc.root);
    size_t len;
    char *text = pjson_buf_finish(&b, &len);
    FUZZ_CHECK(text != NULL && len == pjson_compact(doc.root, NULL, 0));
    FUZZ_CHECK(pjson_text_depth(text, len) == pjson_depth(doc.root));
    struct pjson_doc again;
    FUZZ_CHECK(pjson_parse(text, len, &again, NULL) == 0);
    FUZZ_CHECK(again.root->type == doc.root->type && again.root->rawlen == len);
    FUZZ_CHECK(pjson_compact(again.root, NULL, 0) == len);
    char *text2 = malloc(len + 1);
    FUZZ_CHECK(text2 != NULL);
    pjson_compact(again.root, text2, len);
    FUZZ_CHECK(memcmp(text, text2, len) == 0);
    free(text2);
    pjson_free(&again);
    free(text);
    pjson_free(&doc);
    return 0;
}
