/* test_facts.c - unit tests for protocol/facts.c: every /requests/v3 fixture item into its
 * facts (wallets, times, amounts, transactions with explorer links, fees and route as given),
 * the explorer-link rule and the chain-list lookup (known and unknown chains, paths with and
 * without {TX_HASH}, query params, hostile URLs), caps, malformed items, the merge rule (row
 * table), relinking, and allocation failure in every entry point (chaos allocator).
 * runs on: the test process, one thread. Run from the repository root. */
#include "tests/unit/proto_test.h"

#include <ctype.h>

#include "protocol/event.c"
#include "protocol/facts.c"
#include "protocol/json.c"
#include "protocol/normalize.c"
#include "protocol/proto.c"
#include "protocol/record.c"
#include "protocol/requests_v3.c"

#define N_ROWS(a) (sizeof(a) / sizeof((a)[0]))

/* The chain list the tests use: a {TX_HASH} path, a bare base with a trailing slash (no
 * path), a path with query params. 42161 is not listed (unknown chain). */
static const char CHAINS[] =
    "{\"chains\":[{\"id\":137,\"name\":\"polygon\",\"explorerUrl\":\"https://polygonscan.com\","
    "\"explorerPaths\":{\"transaction\":\"/tx/{TX_HASH}\",\"address\":\"/address/{ADDRESS}\"}},"
    "{\"id\":8453,\"explorerUrl\":\"https://basescan.org/\",\"explorerPaths\":null},"
    "{\"id\":792703809,\"explorerUrl\":\"https://solscan.io\",\"explorerPaths\":"
    "{\"transaction\":\"/tx/{TX_HASH}\"},\"explorerQueryParams\":{\"cluster\":\"main net\"}}]}";

static void load_chains(struct proto_explorers *ex)
{
    struct proto_err err;
    assert_int_equal(proto_explorers_from_chains(CHAINS, strlen(CHAINS), ex, &err), 0);
    assert_int_equal(ex->n, 3);
}

/* Facts of item text (NUL-terminated) with ex, as a jansson object (caller json_decref). */
static json_t *facts_of(const char *item, const struct proto_explorers *ex)
{
    struct proto_err err = {0};
    char *out;
    size_t n;
    int rc = proto_facts_from_item(item, strlen(item), ex, &out, &n, &err);
    if (rc != 0)
        fail_msg("%.300s\n  -> %d (%s: %s)", item, rc, err.field, err.msg);
    assert_int_equal(strlen(out), n);
    json_t *j = json_loadb(out, n, JSON_REJECT_DUPLICATES, NULL);
    assert_non_null(j);
    free(out);
    return j;
}

/* The items of the page fixture as NUL-terminated texts (real_free each). */
static json_t *page_items(void)
{
    size_t len;
    char *page = fixture("requests_v3_page.json", &len);
    assert_non_null(page);
    json_t *j = json_loadb(page, len, 0, NULL);
    free(page);
    assert_non_null(j);
    return j;
}

static const char *const KEYS[] = {
    "createdAt", "updatedAt", "user", "sender", "recipient", "refundTo", "referrer",
    "requestType", "depositAddress", "currencyIn", "currencyOut", "refundCurrency", "inTxs",
    "outTxs", "fees", "appFees", "route", "orderId", "supersededByRequestId"};
static const char *const TX_KEYS[] = {"txHash", "chainId", "explorerUrl", "block",
                                      "timestamp", "status", "type", "fee", "feeUsd"};

/* Every key present, in the canonical order, nothing else. */
static void check_keys(json_t *obj, const char *const *keys, size_t n)
{
    assert_int_equal(json_object_size(obj), n);
    void *it = json_object_iter(obj);
    for (size_t i = 0; i < n; i++, it = json_object_iter_next(obj, it))
        assert_string_equal(json_object_iter_key(it), keys[i]);
}

static const char *jstr(json_t *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *v = o;
    for (char *save, *k = strtok_r(buf, ".", &save); k != NULL; k = strtok_r(NULL, ".", &save))
        v = isdigit((unsigned char)k[0]) ? json_array_get(v, (size_t)atoi(k))
                                          : json_object_get(v, k);
    return json_is_null(v) ? NULL : json_string_value(v);
}

static long long jint(json_t *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *v = o;
    for (char *save, *k = strtok_r(buf, ".", &save); k != NULL; k = strtok_r(NULL, ".", &save))
        v = isdigit((unsigned char)k[0]) ? json_array_get(v, (size_t)atoi(k))
                                          : json_object_get(v, k);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static void want_str(const char *got, const char *want, const char *what)
{
    if (got == NULL ? want != NULL : want == NULL || strcmp(got, want) != 0)
        fail_msg("%s: got %s, want %s", what, got ? got : "null", want ? want : "null");
}

/* ---- fixture items ------------------------------------------------------------------------- */

struct want_item {
    long long created, updated;
    const char *user, *refund_to, *referrer, *request_type, *deposit_type, *order_id;
    size_t n_in, n_out;
    long long in_chain, in_block, in_ts;
    const char *in_url, *out_url;
    long long cin_chain, cin_dec, cout_chain, cout_dec;
    const char *cin_amount, *cin_usd, *cout_symbol, *cout_amount, *cout_usd;
};

static const struct want_item fixture_rows[] = {
    {1787049650912, 1787049674337, "0xa4c123b1612dd272d1371c17149d439536b3216f", NULL, NULL,
     "Bridge", NULL, "0xd2802827283e0ad84173581569969e58b081006f7e3dfc967a64cb14028d512c", 1, 1,
     137, 44841887, 1787040071000,
     "https://polygonscan.com/tx/"
     "0xc255404e4fb440034d6608697a8d41bed440e50454f31af3176813e02ea68ef7",
     "https://basescan.org/tx/0x6e4d3cea27d26934b484e73cf575dcad6ba2b0aee0ca923732881584d8c4fa28",
     137, 6, 8453, 6, "25000000", "24.996250", "USDC", "24983690", "24.980943"},
    {1787051371004, 1787051425518, "0xdaeeb975729fae923d5a4fd12aabfe228f219e9c",
     "0xdaeeb975729fae923d5a4fd12aabfe228f219e9c", "example-app", "Bridge", "strict",
     "0x287db7f1adbc60926f6967e7893f57fd14c1604d115cea325a65e19cbae53028", 1, 1, 8453, 76860010,
     1787041800000,
     "https://basescan.org/tx/0x478da6bd0c621de49f145fda9988c79fc35526f7eaed46725a2a7b860dcd6c8a",
     "https://basescan.org/tx/0x8b46287cced9041dff02cee737443e210471948d33296c87009e8a7f770d9106",
     8453, 18, 42161, 18, "10000000000000000", "43.712000", "ETH", "9985000000000000",
     "43.646432"},
    {1787058800118, 1787058813418, "0xb0eb53f16947ccf25ec84d8dbc74254770f58904", NULL, NULL,
     "Crosschain Swap", NULL, "0x9731662b5e803b61ba4168160adb59261ff2d3c425c8d99d19bdd0b6cc60d5d3",
     1, 0, 792703809, 15417277, 1787049213000,
     "https://solscan.io/tx/ZDSqBGT5i3XcbMBUy75Hg6E7TYnVCF9TWgzkGpbwrjq8rvKKJdJQHpHDVGCGGAKyeDM5SH"
     "GZaFit7iW371XyuFvV?cluster=main+net",
     NULL, 792703809, 9, 8453, 6, "150000000", "27.401250", "USDC", "27355000", "27.351717"},
    /* a same-chain swap: currencyOut is the origin's output */
    {1787061951004, 1787062000551, "0xdba41ecccc3fc1626e53a13043b026c48bbf33fe", NULL, NULL,
     "Same-chain Swap", NULL, "0x38cb8cb4ba2e751989a01749ddb14f71010b93b7d946bf54074e3248c801bef7",
     1, 0, 8453, 87852145, 1787052350000,
     "https://basescan.org/tx/0x0fe7ee5fc324bdb2e1142a21c402364f9572b85a8e48f687ab165c58ac5831be",
     NULL, 8453, 18, 8453, 6, "2000000000000", "0.008742", "USDC", "8700", "0.008699"},
};

static void test_fixture_items(void **state)
{
    (void)state;
    struct proto_explorers ex;
    load_chains(&ex);
    json_t *page = page_items(), *items = json_object_get(page, "requests");
    assert_int_equal(json_array_size(items), N_ROWS(fixture_rows));
    for (size_t i = 0; i < N_ROWS(fixture_rows); i++) {
        const struct want_item *w = &fixture_rows[i];
        json_t *item = json_array_get(items, i), *data = json_object_get(item, "data");
        char *text = json_dumps(item, JSON_COMPACT);
        json_t *f = facts_of(text, &ex);
        real_free(text);
        check_keys(f, KEYS, N_ROWS(KEYS));
        assert_int_equal(jint(f, "createdAt"), w->created);
        assert_int_equal(jint(f, "updatedAt"), w->updated);
        want_str(jstr(f, "user"), w->user, "user");
        want_str(jstr(f, "sender"), jstr(item, "sender"), "sender");
        want_str(jstr(f, "recipient"), jstr(item, "recipient"), "recipient");
        want_str(jstr(f, "refundTo"), w->refund_to, "refundTo");
        want_str(jstr(f, "referrer"), w->referrer, "referrer");
        want_str(jstr(f, "requestType"), w->request_type, "requestType");
        want_str(jstr(f, "orderId"), w->order_id, "orderId");
        assert_true(json_is_null(json_object_get(f, "supersededByRequestId")));
        want_str(jstr(f, "depositAddress.type"), w->deposit_type, "depositAddress.type");
        if (w->deposit_type != NULL)
            assert_true(json_equal(json_object_get(f, "depositAddress"),
                                   json_object_get(item, "depositAddress")));
        else
            assert_true(json_is_null(json_object_get(f, "depositAddress")));
        /* transactions */
        assert_int_equal(json_array_size(json_object_get(f, "inTxs")), w->n_in);
        assert_int_equal(json_array_size(json_object_get(f, "outTxs")), w->n_out);
        json_t *tx = json_array_get(json_object_get(f, "inTxs"), 0);
        check_keys(tx, TX_KEYS, N_ROWS(TX_KEYS));
        want_str(jstr(f, "inTxs.0.txHash"), jstr(data, "inTxs.0.txHash"), "inTxs[0].txHash");
        assert_int_equal(jint(f, "inTxs.0.chainId"), w->in_chain);
        assert_int_equal(jint(f, "inTxs.0.block"), w->in_block);
        assert_int_equal(jint(f, "inTxs.0.timestamp"), w->in_ts);
        want_str(jstr(f, "inTxs.0.status"), "success", "inTxs[0].status");
        want_str(jstr(f, "inTxs.0.type"), "onchain", "inTxs[0].type");
        want_str(jstr(f, "inTxs.0.fee"), jstr(data, "inTxs.0.fee"), "inTxs[0].fee");
        assert_true(json_is_null(json_object_get(tx, "feeUsd")));
        want_str(jstr(f, "inTxs.0.explorerUrl"), w->in_url, "inTxs[0].explorerUrl");
        if (w->n_out > 0)
            want_str(jstr(f, "outTxs.0.explorerUrl"), w->out_url, "outTxs[0].explorerUrl");
        /* fees and route as given */
        assert_true(json_equal(json_object_get(f, "fees"), json_object_get(data, "fees")));
        assert_true(json_equal(json_object_get(f, "route"), json_object_get(data, "route")));
        assert_true(json_is_null(json_object_get(f, "appFees")));
        assert_true(json_is_null(json_object_get(f, "refundCurrency")));
        /* amounts */
        assert_int_equal(jint(f, "currencyIn.chainId"), w->cin_chain);
        assert_int_equal(jint(f, "currencyIn.decimals"), w->cin_dec);
        want_str(jstr(f, "currencyIn.amount"), w->cin_amount, "currencyIn.amount");
        want_str(jstr(f, "currencyIn.amountUsd"), w->cin_usd, "currencyIn.amountUsd");
        want_str(jstr(f, "currencyIn.basis"), "actual", "currencyIn.basis");
        assert_int_equal(jint(f, "currencyOut.chainId"), w->cout_chain);
        assert_int_equal(jint(f, "currencyOut.decimals"), w->cout_dec);
        want_str(jstr(f, "currencyOut.symbol"), w->cout_symbol, "currencyOut.symbol");
        want_str(jstr(f, "currencyOut.amount"), w->cout_amount, "currencyOut.amount");
        want_str(jstr(f, "currencyOut.amountUsd"), w->cout_usd, "currencyOut.amountUsd");
        assert_true(json_is_null(json_object_get(json_object_get(f, "currencyOut"),
                                                 "minimumAmount")));
        json_decref(f);
    }
    json_decref(page);
    proto_explorers_cleanup(&ex);
}

/* The same items through a page walk of our own reader (proto_facts_from_pjson) give the
 * same text; a failing item names its place in the page. */
static void test_from_pjson(void **state)
{
    (void)state;
    size_t len;
    char *page = fixture("requests_v3_page.json", &len);
    struct pjson_doc doc;
    struct proto_err err;
    assert_int_equal(pjson_parse(page, len, &doc, &err), 0);
    const struct pjson *reqs = pjson_get(doc.root, "requests");
    size_t i = 0;
    for (const struct pjson *it = reqs->u.kids.first; it != NULL; it = it->next, i++) {
        char *a, *b;
        size_t an, bn;
        assert_int_equal(proto_facts_from_pjson(it, "requests[0].", NULL, &a, &an, &err), 0);
        assert_int_equal(proto_facts_from_item(it->raw, it->rawlen, NULL, &b, &bn, &err), 0);
        assert_int_equal(an, bn);
        assert_memory_equal(a, b, an);
        assert_null(strstr(a, "\"explorerUrl\":\"")); /* no chain list: no links */
        free(a);
        free(b);
    }
    pjson_free(&doc);
    free(page);
    const char bad[] = "{\"data\":{\"inTxs\":[{\"txHash\":\"0xab\",\"chainId\":\"1\"}]}}";
    assert_int_equal(pjson_parse(bad, strlen(bad), &doc, &err), 0);
    char *out = (char *)&err;
    assert_int_equal(proto_facts_from_pjson(doc.root, "requests[3].", NULL, &out, NULL, &err),
                     PROTO_ETYPE);
    assert_null(out);
    assert_string_equal(err.field, "requests[3].data.inTxs[0].chainId");
    pjson_free(&doc);
}

/* ---- explorer links ------------------------------------------------------------------------ */

struct link_row {
    const char *chain; /* one chain object */
    long long id;
    const char *hash, *want; /* want NULL: no link */
};

static const struct link_row link_rows[] = {
    /* the upstream's shape: a {TX_HASH} path */
    {"{\"id\":1,\"explorerUrl\":\"https://etherscan.io\",\"explorerPaths\":{\"transaction\":"
     "\"/tx/{TX_HASH}\"}}", 1, "0xab", "https://etherscan.io/tx/0xab"},
    /* trailing slashes of the base go; a path without a leading slash gets one */
    {"{\"id\":1,\"explorerUrl\":\"https://x.io//\",\"explorerPaths\":{\"transaction\":"
     "\"tx/{TX_HASH}/view\"}}", 1, "0xab", "https://x.io/tx/0xab/view"},
    /* every placeholder replaced */
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\",\"explorerPaths\":{\"transaction\":"
     "\"/t/{TX_HASH}#{TX_HASH}\"}}", 1, "h", "https://x.io/t/h#h"},
    /* a path without the placeholder: base / path / hash */
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\",\"explorerPaths\":{\"transaction\":"
     "\"/transaction/\"}}", 1, "h", "https://x.io/transaction/h"},
    /* no path (absent, null, non-string, empty): /tx/ */
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\"}", 1, "h", "https://x.io/tx/h"},
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\",\"explorerPaths\":null}", 1, "h",
     "https://x.io/tx/h"},
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\",\"explorerPaths\":{\"transaction\":7}}", 1, "h",
     "https://x.io/tx/h"},
    {"{\"id\":1,\"explorerUrl\":\"http://x.io\",\"explorerPaths\":{\"transaction\":\"\"}}", 1,
     "h", "http://x.io/tx/h"},
    /* query params: strings, integers, booleans, form-encoded; objects skipped */
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\",\"explorerQueryParams\":{\"cluster\":"
     "\"dev net\",\"n\":3,\"t\":true,\"o\":{\"a\":1},\"k&\":\"a=b\"}}", 1, "h",
     "https://x.io/tx/h?cluster=dev+net&n=3&t=true&k%26=a%3Db"},
    /* a path with its own query: & */
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\",\"explorerPaths\":{\"transaction\":"
     "\"/tx?hash={TX_HASH}\"},\"explorerQueryParams\":{\"net\":\"main\"}}", 1, "h",
     "https://x.io/tx?hash=h&net=main"},
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\",\"explorerQueryParams\":{}}", 1, "h",
     "https://x.io/tx/h"},
    /* the hash is encoded as encodeURIComponent does */
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\"}", 1, "a/b?c#d&e=f%g!~*'()",
     "https://x.io/tx/a%2Fb%3Fc%23d%26e%3Df%25g!~*'()"},
    /* unknown chain, empty hash */
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\"}", 2, "h", NULL},
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\"}", 1, "", NULL},
    /* hostile or unusable lists: no link */
    {"{\"id\":1,\"explorerUrl\":\"javascript:alert(1)//\"}", 1, "h", NULL},
    {"{\"id\":1,\"explorerUrl\":\"ftp://x.io\"}", 1, "h", NULL},
    {"{\"id\":1,\"explorerUrl\":\"https://\"}", 1, "h", NULL},
    {"{\"id\":1,\"explorerUrl\":\"https:///\"}", 1, "h", NULL},
    {"{\"id\":1,\"explorerUrl\":\"https://x.io/\\\"><script>\"}", 1, "h", NULL},
    {"{\"id\":1,\"explorerUrl\":\"https://x .io\"}", 1, "h", NULL},
    {"{\"id\":1,\"explorerUrl\":\"https://x.io\",\"explorerPaths\":{\"transaction\":"
     "\"/tx/{TX_HASH} x\"}}", 1, "h", NULL},
    {"{\"id\":1,\"explorerUrl\":7}", 1, "h", NULL},
    {"{\"id\":\"1\",\"explorerUrl\":\"https://x.io\"}", 1, "h", NULL},
    {"{\"id\":0,\"explorerUrl\":\"https://x.io\"}", 0, "h", NULL},
    {"{\"id\":1.5,\"explorerUrl\":\"https://x.io\"}", 1, "h", NULL},
    {"{\"explorerUrl\":\"https://x.io\"}", 1, "h", NULL},
    {"7", 1, "h", NULL},
    {"{\"id\":1,\"explorerUrl\":\"HTTPS://X.io\"}", 1, "h", "HTTPS://X.io/tx/h"},
};

static void test_explorer_links(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_ROWS(link_rows); i++) {
        const struct link_row *r = &link_rows[i];
        char body[1024];
        struct proto_explorers ex;
        struct proto_err err;
        char *url = (char *)&err;
        snprintf(body, sizeof(body), "{\"chains\":[%s]}", r->chain);
        assert_int_equal(proto_explorers_from_chains(body, strlen(body), &ex, &err), 0);
        assert_int_equal(proto_explorer_tx_url(&ex, r->id, r->hash, strlen(r->hash), &url), 0);
        if (r->want == NULL ? url != NULL : url == NULL || strcmp(url, r->want) != 0)
            fail_msg("row %zu: %s\n  got %s\n want %s", i, r->chain, url ? url : "(none)",
                     r->want ? r->want : "(none)");
        free(url);
        proto_explorers_cleanup(&ex);
    }
}

static void test_explorer_list(void **state)
{
    (void)state;
    struct proto_explorers ex;
    struct proto_err err;
    char *url;
    /* the first entry of an id wins; entries are sorted for the lookup */
    const char two[] = "{\"chains\":[{\"id\":9,\"explorerUrl\":\"https://a.io\"},{\"id\":3,"
                       "\"explorerUrl\":\"https://c.io\"},{\"id\":9,\"explorerUrl\":"
                       "\"https://b.io\"}],\"other\":1}";
    assert_int_equal(proto_explorers_from_chains(two, strlen(two), &ex, &err), 0);
    assert_int_equal(ex.n, 2);
    assert_int_equal(ex.v[0].chain_id, 3);
    assert_string_equal(proto_explorers_find(&ex, 9)->base, "https://a.io");
    assert_null(proto_explorers_find(&ex, 4));
    assert_null(proto_explorers_find(NULL, 9));
    /* add replaces; bad parts are refused */
    assert_int_equal(proto_explorers_add(&ex, 9, "https://b.io/", NULL, NULL), 0);
    assert_int_equal(ex.n, 2);
    assert_int_equal(proto_explorer_tx_url(&ex, 9, "h", 1, &url), 0);
    assert_string_equal(url, "https://b.io/tx/h");
    free(url);
    assert_int_equal(proto_explorers_add(&ex, 0, "https://b.io", NULL, NULL), PROTO_ERANGE);
    assert_int_equal(proto_explorers_add(&ex, PROTO_MAX_CHAIN_ID + 1, "https://b.io", NULL,
                                         NULL), PROTO_ERANGE);
    assert_int_equal(proto_explorers_add(&ex, 5, NULL, NULL, NULL), PROTO_EVALUE);
    assert_int_equal(proto_explorers_add(&ex, 5, "b.io", NULL, NULL), PROTO_EVALUE);
    assert_int_equal(proto_explorer_tx_url(NULL, 9, "h", 1, &url), 0);
    assert_null(url);
    proto_explorers_cleanup(&ex);
    proto_explorers_cleanup(&ex); /* twice is fine */
    proto_explorers_cleanup(NULL);

    /* a link over PROTO_EXPLORER_MAX_LINK: none */
    char path[PROTO_EXPLORER_MAX_URL + 1];
    for (size_t i = 0; i + 9 <= PROTO_EXPLORER_MAX_URL; i += 9)
        memcpy(path + i, "{TX_HASH}", 9);
    path[PROTO_EXPLORER_MAX_URL / 9 * 9] = '\0';
    assert_int_equal(proto_explorers_add(&ex, 1, "https://x.io", path, NULL), 0);
    assert_int_equal(proto_explorer_tx_url(&ex, 1, "0xab", 4, &url), 0);
    assert_non_null(url); /* 56 short hashes fit */
    free(url);
    char slashes[PROTO_MAX_HASH + 1];
    memset(slashes, '/', PROTO_MAX_HASH);
    assert_int_equal(proto_explorer_tx_url(&ex, 1, slashes, PROTO_MAX_HASH, &url), 0);
    assert_null(url); /* 56 x 384 bytes do not */
    char over[PROTO_EXPLORER_MAX_URL + 2];
    memset(over, 'a', sizeof(over) - 1);
    over[sizeof(over) - 1] = '\0';
    assert_int_equal(proto_explorers_add(&ex, 2, "https://x.io", over, NULL), PROTO_EVALUE);
    proto_explorers_cleanup(&ex);

    /* not a chain list */
    static const struct { const char *body; int code; } bad[] = {
        {"", PROTO_EJSON},
        {"{\"chains\":[}", PROTO_EJSON},
        {"[]", PROTO_ETYPE},
        {"{\"chains\":{}}", PROTO_ETYPE},
        {"{}", PROTO_ETYPE},
        {"{\"chains\":[],\"chains\":[]}", PROTO_EJSON},
    };
    for (size_t i = 0; i < N_ROWS(bad); i++) {
        ex.n = 99;
        assert_int_equal(proto_explorers_from_chains(bad[i].body, strlen(bad[i].body), &ex, &err),
                         bad[i].code);
        assert_int_equal(ex.n, 0);
        assert_null(ex.v);
    }

    /* more chains than PROTO_EXPLORERS_MAX: the first ones are kept; a body over 1 MiB (the
     * upstream's list carries tokens) is read */
    size_t cap = 2 * 1024 * 1024, n = 0;
    char *big = malloc(cap);
    n += (size_t)snprintf(big + n, cap - n, "{\"pad\":\"");
    memset(big + n, 'p', 1100 * 1000);
    n += 1100 * 1000;
    n += (size_t)snprintf(big + n, cap - n, "\",\"chains\":[");
    for (int i = 1; i <= PROTO_EXPLORERS_MAX + 10; i++)
        n += (size_t)snprintf(big + n, cap - n, "%s{\"id\":%d,\"explorerUrl\":\"https://e%d.io\"}",
                              i > 1 ? "," : "", i, i);
    n += (size_t)snprintf(big + n, cap - n, "]}");
    assert_true(n > PROTO_MAX_INPUT);
    assert_int_equal(proto_explorers_from_chains(big, n, &ex, &err), 0);
    assert_int_equal(ex.n, PROTO_EXPLORERS_MAX);
    assert_non_null(proto_explorers_find(&ex, PROTO_EXPLORERS_MAX));
    assert_null(proto_explorers_find(&ex, PROTO_EXPLORERS_MAX + 1));
    proto_explorers_cleanup(&ex);
    free(big);
}

/* ---- caps and malformed items -------------------------------------------------------------- */

static char *repeat(const char *unit, size_t n)
{
    size_t u = strlen(unit);
    char *s = malloc(u * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(s + i * u, unit, u);
    s[u * n] = '\0';
    return s;
}

/* "{...}" with a list of n transactions {"txHash":"0x<i>","chainId":1} under data.inTxs. */
static char *item_with_txs(size_t n, int same_hash)
{
    size_t cap = 64 + n * 48, len = 0;
    char *s = malloc(cap);
    len += (size_t)snprintf(s + len, cap - len, "{\"data\":{\"inTxs\":[");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s{\"txHash\":\"0x%zx\",\"chainId\":1}",
                                i ? "," : "", same_hash ? (size_t)0 : i);
    snprintf(s + len, cap - len, "]}}");
    return s;
}

static void test_caps(void **state)
{
    (void)state;
    struct proto_err err;
    char *out = NULL, *s;
    size_t n;

    /* PROTO_MAX_HASHES transactions are kept, one more is refused (as the status normaliser) */
    s = item_with_txs(PROTO_MAX_HASHES, 0);
    json_t *f = facts_of(s, NULL);
    assert_int_equal(json_array_size(json_object_get(f, "inTxs")), PROTO_MAX_HASHES);
    json_decref(f);
    free(s);
    s = item_with_txs(PROTO_MAX_HASHES + 1, 0);
    assert_int_equal(proto_facts_from_item(s, strlen(s), NULL, &out, &n, &err), PROTO_ETOOLONG);
    assert_string_equal(err.field, "data.inTxs");
    assert_null(out);
    free(s);
    /* a repeated hash is one transaction (the first) */
    s = item_with_txs(5, 1);
    f = facts_of(s, NULL);
    assert_int_equal(json_array_size(json_object_get(f, "inTxs")), 1);
    json_decref(f);
    free(s);

    /* wallets at most PROTO_FACTS_MAX_ADDR bytes */
    char *addr = repeat("a", PROTO_FACTS_MAX_ADDR), *doc = malloc(PROTO_FACTS_MAX_ADDR + 64);
    snprintf(doc, PROTO_FACTS_MAX_ADDR + 64, "{\"user\":\"%s\"}", addr);
    f = facts_of(doc, NULL);
    assert_int_equal(strlen(jstr(f, "user")), PROTO_FACTS_MAX_ADDR);
    json_decref(f);
    snprintf(doc, PROTO_FACTS_MAX_ADDR + 64, "{\"recipient\":\"%sa\"}", addr);
    assert_int_equal(proto_facts_from_item(doc, strlen(doc), NULL, &out, &n, &err),
                     PROTO_ETOOLONG);
    assert_string_equal(err.field, "recipient");
    free(addr);
    free(doc);

    /* fees / appFees over PROTO_FACTS_MAX_BLOB, route over PROTO_FACTS_MAX_ROUTE or too deep:
     * null; the amounts are still read from the route */
    char *pad = repeat("x", PROTO_FACTS_MAX_ROUTE);
    size_t cap = 3 * PROTO_FACTS_MAX_ROUTE;
    doc = malloc(cap);
    snprintf(doc, cap,
             "{\"data\":{\"fees\":{\"pad\":\"%.*s\"},\"appFees\":{\"quoted\":[]},\"route\":"
             "{\"pad\":\"%s\",\"quoted\":{\"origin\":{\"inputCurrency\":{\"currency\":{"
             "\"chainId\":1,\"decimals\":6},\"amount\":\"5\"}}}}}}",
             PROTO_FACTS_MAX_BLOB, pad, pad);
    f = facts_of(doc, NULL);
    assert_true(json_is_null(json_object_get(f, "fees")));
    assert_true(json_is_null(json_object_get(f, "route")));
    assert_true(json_is_object(json_object_get(f, "appFees")));
    assert_int_equal(jint(f, "currencyIn.chainId"), 1);
    assert_int_equal(jint(f, "currencyIn.decimals"), 6);
    want_str(jstr(f, "currencyIn.amount"), "5", "amount");
    want_str(jstr(f, "currencyIn.basis"), "quoted", "basis");
    assert_true(json_is_null(json_object_get(f, "currencyOut")));
    json_decref(f);
    free(pad);
    char *deep = repeat("{\"a\":", 40), *close = repeat("}", 40);
    snprintf(doc, cap, "{\"data\":{\"route\":%s1%s,\"fees\":{\"a\":1}}}", deep, close);
    f = facts_of(doc, NULL);
    assert_true(json_is_null(json_object_get(f, "route")));
    assert_true(json_is_object(json_object_get(f, "fees")));
    json_decref(f);
    free(deep);
    free(close);
    free(doc);

    /* derived amounts are best effort: wrong types become null, never an error */
    const char loose[] = "{\"data\":{\"route\":{\"actual\":{\"origin\":{\"inputCurrency\":{"
                         "\"currency\":{\"chainId\":\"1\",\"decimals\":300,\"symbol\":7},"
                         "\"amount\":1,\"amountUsd\":\"2\"}}},\"quoted\":5},"
                         "\"refundCurrencyData\":{\"currency\":{\"chainId\":10,\"symbol\":"
                         "\"ETH\",\"decimals\":18},\"amount\":\"7\",\"amountFormatted\":"
                         "\"0.000000000000000007\"}}}";
    f = facts_of(loose, NULL);
    assert_int_equal(jint(f, "currencyIn.chainId"), -1);
    assert_int_equal(jint(f, "currencyIn.decimals"), -1);
    assert_null(jstr(f, "currencyIn.symbol"));
    assert_null(jstr(f, "currencyIn.amount"));
    want_str(jstr(f, "currencyIn.amountUsd"), "2", "amountUsd");
    want_str(jstr(f, "currencyIn.basis"), "actual", "basis");
    assert_int_equal(jint(f, "refundCurrency.chainId"), 10);
    want_str(jstr(f, "refundCurrency.amount"), "7", "refund amount");
    assert_null(jstr(f, "refundCurrency.basis"));
    json_decref(f);

    /* an empty object: every key null, lists empty */
    f = facts_of("{}", NULL);
    check_keys(f, KEYS, N_ROWS(KEYS));
    for (size_t i = 0; i < N_ROWS(KEYS); i++) {
        json_t *v = json_object_get(f, KEYS[i]);
        assert_true(json_is_null(v) || json_array_size(v) == 0);
    }
    json_decref(f);
}

struct bad_row {
    const char *doc;
    int code;
    const char *field;
};

static const struct bad_row bad_rows[] = {
    {"", PROTO_EJSON, ""},
    {"{\"user\":\"0xab\"", PROTO_EJSON, ""},
    {"[]", PROTO_ETYPE, ""},
    {"null", PROTO_ETYPE, ""},
    {"{\"user\":1}", PROTO_ETYPE, "user"},
    {"{\"user\":\"0x a\"}", PROTO_EVALUE, "user"},
    {"{\"sender\":\"0x\\\"a\"}", PROTO_EVALUE, "sender"},
    {"{\"refundTo\":[]}", PROTO_ETYPE, "refundTo"},
    {"{\"createdAt\":1787049650912}", PROTO_ETYPE, "createdAt"},
    {"{\"createdAt\":\"yesterday\"}", PROTO_EVALUE, "createdAt"},
    {"{\"updatedAt\":\"2026-02-30T00:00:00Z\"}", PROTO_EVALUE, "updatedAt"},
    {"{\"requestType\":{}}", PROTO_ETYPE, "requestType"},
    {"{\"depositAddress\":\"0xab\"}", PROTO_ETYPE, "depositAddress"},
    {"{\"depositAddress\":{\"type\":\"a b\"}}", PROTO_EVALUE, "depositAddress.type"},
    {"{\"protocol\":{\"orderId\":5}}", PROTO_ETYPE, "protocol.orderId"},
    {"{\"protocol\":[]}", PROTO_ETYPE, "protocol"},
    {"{\"data\":[]}", PROTO_ETYPE, "data"},
    {"{\"data\":{\"referrer\":5}}", PROTO_ETYPE, "data.referrer"},
    {"{\"data\":{\"inTxs\":{}}}", PROTO_ETYPE, "data.inTxs"},
    {"{\"data\":{\"outTxs\":[1]}}", PROTO_ETYPE, "data.outTxs"},
    {"{\"data\":{\"inTxs\":[{\"txHash\":7}]}}", PROTO_ETYPE, "data.inTxs[0].txHash"},
    {"{\"data\":{\"inTxs\":[{\"txHash\":\"0xa\",\"chainId\":\"1\"}]}}", PROTO_ETYPE,
     "data.inTxs[0].chainId"},
    {"{\"data\":{\"inTxs\":[{\"txHash\":\"0xa\",\"chainId\":0}]}}", PROTO_ERANGE,
     "data.inTxs[0].chainId"},
    {"{\"data\":{\"inTxs\":[{\"txHash\":\"0xa\",\"chainId\":9007199254740992}]}}", PROTO_ERANGE,
     "data.inTxs[0].chainId"},
    {"{\"data\":{\"outTxs\":[{},{\"txHash\":\"0xa\",\"block\":-1}]}}", PROTO_ERANGE,
     "data.outTxs[1].block"},
    {"{\"data\":{\"inTxs\":[{\"txHash\":\"0xa\",\"timestamp\":9007199254741}]}}", PROTO_ERANGE,
     "data.inTxs[0].timestamp"},
    {"{\"data\":{\"inTxs\":[{\"txHash\":\"0xa\",\"timestamp\":1.5}]}}", PROTO_ETYPE,
     "data.inTxs[0].timestamp"},
    {"{\"data\":{\"inTxs\":[{\"txHash\":\"0xa\",\"status\":\"ok then\"}]}}", PROTO_EVALUE,
     "data.inTxs[0].status"},
    {"{\"data\":{\"inTxs\":[{\"txHash\":\"0xa\",\"fee\":1}]}}", PROTO_ETYPE,
     "data.inTxs[0].fee"},
    {"{\"data\":{\"fees\":[]}}", PROTO_ETYPE, "data.fees"},
    {"{\"data\":{\"route\":\"r\"}}", PROTO_ETYPE, "data.route"},
    {"{\"data\":{\"appFees\":1}}", PROTO_ETYPE, "data.appFees"},
    {"{\"data\":{\"refundCurrencyData\":1}}", PROTO_ETYPE, "data.refundCurrencyData"},
};

static void test_malformed(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_ROWS(bad_rows); i++) {
        const struct bad_row *r = &bad_rows[i];
        struct proto_err err = {0};
        char *out = (char *)&err;
        size_t n = 99;
        int rc = proto_facts_from_item(r->doc, strlen(r->doc), NULL, &out, &n, &err);
        if (rc != r->code || strcmp(err.field, r->field) != 0)
            fail_msg("row %zu %s\n  -> %d %s (%s), want %d %s", i, r->doc, rc, err.field,
                     err.msg, r->code, r->field);
        assert_int_equal(err.code, rc);
        assert_null(out);
        assert_int_equal(n, 0);
    }
    /* allowed: null and "" read as null, a transaction without a hash is skipped, unknown
     * fields are ignored, the top-level referrer when data has none */
    json_t *f = facts_of("{\"user\":\"\",\"sender\":null,\"x\":[1],\"referrer\":\"top\","
                         "\"data\":{\"referrer\":null,\"inTxs\":[{\"chainId\":1},{\"txHash\":"
                         "\"0xa\",\"chainId\":null,\"block\":null}],\"fees\":null,"
                         "\"unknown\":{}}}", NULL);
    assert_null(jstr(f, "user"));
    assert_null(jstr(f, "sender"));
    want_str(jstr(f, "referrer"), "top", "referrer");
    assert_int_equal(json_array_size(json_object_get(f, "inTxs")), 1);
    assert_int_equal(jint(f, "inTxs.0.chainId"), -1);
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(f, "inTxs"), 0),
                                             "explorerUrl")));
    json_decref(f);
}

/* ---- merge --------------------------------------------------------------------------------- */

static char *merge_ok(const char *a, const char *b);

/* The canonical text of a (partial) facts text: every key, links kept. Caller frees. */
static char *canon(const char *s)
{
    return merge_ok(s, s);
}

struct merge_row {
    const char *name, *a, *b, *want;
};

#define TX(h, extra) "{\"txHash\":\"" h "\"" extra "}"

static const struct merge_row merge_rows[] = {
    {"newer values win, nulls keep the older",
     "{\"updatedAt\":1,\"user\":\"0xu\",\"sender\":\"0xs\",\"referrer\":\"app\","
     "\"createdAt\":5,\"requestType\":\"Bridge\"}",
     "{\"updatedAt\":2,\"user\":\"0xU\",\"sender\":null,\"recipient\":\"0xr\"}",
     "{\"updatedAt\":2,\"user\":\"0xU\",\"sender\":\"0xs\",\"recipient\":\"0xr\","
     "\"referrer\":\"app\",\"createdAt\":5,\"requestType\":\"Bridge\"}"},
    {"the later updatedAt is the newer, whatever the order",
     "{\"updatedAt\":2,\"user\":\"0xnew\"}", "{\"updatedAt\":1,\"user\":\"0xold\"}",
     "{\"updatedAt\":2,\"user\":\"0xnew\"}"},
    {"a tie: the second wins", "{\"updatedAt\":2,\"user\":\"0xa\"}",
     "{\"updatedAt\":2,\"user\":\"0xb\"}", "{\"updatedAt\":2,\"user\":\"0xb\"}"},
    {"no updatedAt on either: the second wins", "{\"user\":\"0xa\"}", "{\"user\":\"0xb\"}",
     "{\"user\":\"0xb\"}"},
    {"a known updatedAt beats a null one", "{\"updatedAt\":1,\"user\":\"0xa\"}",
     "{\"user\":\"0xb\"}", "{\"updatedAt\":1,\"user\":\"0xa\"}"},
    {"fees: quoted at quote time, actual at fill",
     "{\"updatedAt\":1,\"fees\":{\"quoted\":{\"swap\":{\"usd\":\"1\"}},\"actual\":null}}",
     "{\"updatedAt\":2,\"fees\":{\"quoted\":{\"swap\":{\"usd\":\"1\"}},\"actual\":{\"swap\":"
     "{\"usd\":\"0.9\"}}}}",
     "{\"updatedAt\":2,\"fees\":{\"quoted\":{\"swap\":{\"usd\":\"1\"}},\"actual\":{\"swap\":"
     "{\"usd\":\"0.9\"}}}}"},
    {"fees: a newer answer without actual keeps the older actual",
     "{\"updatedAt\":1,\"fees\":{\"quoted\":{\"q\":1},\"actual\":{\"a\":1}}}",
     "{\"updatedAt\":2,\"fees\":{\"quoted\":{\"q\":2},\"actual\":null,\"currency\":{}}}",
     "{\"updatedAt\":2,\"fees\":{\"quoted\":{\"q\":2},\"actual\":{\"a\":1},\"currency\":{}}}"},
    {"fees: members only the older has are kept, after the newer's",
     "{\"updatedAt\":1,\"fees\":{\"actual\":{\"a\":1},\"quoted\":{\"q\":1}}}",
     "{\"updatedAt\":2,\"fees\":{\"quoted\":{\"q\":2}}}",
     "{\"updatedAt\":2,\"fees\":{\"quoted\":{\"q\":2},\"actual\":{\"a\":1}}}"},
    {"route: actual appears later; a null newer route keeps the older",
     "{\"updatedAt\":1,\"route\":{\"quoted\":{\"o\":1}},\"appFees\":{\"quoted\":[]}}",
     "{\"updatedAt\":2,\"route\":{\"quoted\":{\"o\":1},\"actual\":{\"o\":2}},\"appFees\":null}",
     "{\"updatedAt\":2,\"route\":{\"quoted\":{\"o\":1},\"actual\":{\"o\":2}},\"appFees\":"
     "{\"quoted\":[]}}"},
    {"outTxs appear at success",
     "{\"updatedAt\":1,\"inTxs\":[" TX("0xi", ",\"chainId\":1") "],\"outTxs\":[]}",
     "{\"updatedAt\":2,\"inTxs\":[" TX("0xi", ",\"chainId\":1") "],\"outTxs\":[" TX("0xo", "")
     "]}",
     "{\"updatedAt\":2,\"inTxs\":[" TX("0xi", ",\"chainId\":1") "],\"outTxs\":[" TX("0xo", "")
     "]}"},
    {"a sparse newer answer does not erase transactions",
     "{\"updatedAt\":1,\"inTxs\":[" TX("0xi", "") "],\"outTxs\":[" TX("0xo", ",\"block\":9") "]}",
     "{\"updatedAt\":2,\"inTxs\":[],\"outTxs\":[]}",
     "{\"updatedAt\":2,\"inTxs\":[" TX("0xi", "") "],\"outTxs\":[" TX("0xo", ",\"block\":9")
     "]}"},
    {"a reorg replaces the deposit list",
     "{\"updatedAt\":1,\"inTxs\":[" TX("0xold", ",\"block\":5") "]}",
     "{\"updatedAt\":2,\"inTxs\":[" TX("0xnew", "") "]}",
     "{\"updatedAt\":2,\"inTxs\":[" TX("0xnew", "") "]}"},
    {"the same transaction: null fields from the other answer",
     "{\"updatedAt\":1,\"outTxs\":[" TX("0xo", ",\"chainId\":8,\"block\":9,\"timestamp\":7000,"
     "\"explorerUrl\":\"https://x.io/tx/0xo\",\"fee\":\"1\"") "]}",
     "{\"updatedAt\":2,\"outTxs\":[" TX("0xo", ",\"status\":\"success\",\"fee\":\"2\"") ","
     TX("0xp", "") "]}",
     "{\"updatedAt\":2,\"outTxs\":[" TX("0xo", ",\"chainId\":8,\"explorerUrl\":"
     "\"https://x.io/tx/0xo\",\"block\":9,\"timestamp\":7000,\"status\":\"success\","
     "\"fee\":\"2\"") "," TX("0xp", "") "]}"},
    {"deposit address: member by member",
     "{\"updatedAt\":1,\"depositAddress\":{\"address\":\"0xd\",\"type\":\"open\","
     "\"depositor\":\"0xe\"}}",
     "{\"updatedAt\":2,\"depositAddress\":{\"address\":\"0xd\",\"depositTxHash\":\"0xh\"}}",
     "{\"updatedAt\":2,\"depositAddress\":{\"address\":\"0xd\",\"type\":\"open\","
     "\"depositor\":\"0xe\",\"depositTxHash\":\"0xh\"}}"},
    {"deposit address and amounts: a null newer keeps the older",
     "{\"updatedAt\":1,\"depositAddress\":{\"address\":\"0xd\"},\"currencyIn\":{\"chainId\":1,"
     "\"amount\":\"5\",\"basis\":\"quoted\"}}",
     "{\"updatedAt\":2,\"depositAddress\":null,\"currencyIn\":null}",
     "{\"updatedAt\":2,\"depositAddress\":{\"address\":\"0xd\"},\"currencyIn\":{\"chainId\":1,"
     "\"amount\":\"5\",\"basis\":\"quoted\"}}"},
    {"amounts: the newer object whole",
     "{\"updatedAt\":1,\"currencyOut\":{\"chainId\":1,\"amount\":\"5\",\"amountUsd\":\"1\","
     "\"basis\":\"quoted\"}}",
     "{\"updatedAt\":2,\"currencyOut\":{\"chainId\":1,\"amount\":\"4\",\"basis\":\"actual\"}}",
     "{\"updatedAt\":2,\"currencyOut\":{\"chainId\":1,\"amount\":\"4\",\"basis\":\"actual\"}}"},
    {"unknown keys are dropped", "{\"x\":1,\"user\":\"0xa\"}", "{\"y\":{}}",
     "{\"user\":\"0xa\"}"},
};

static char *merge_ok(const char *a, const char *b)
{
    struct proto_err err;
    char *out;
    size_t n;
    int rc = proto_facts_merge(a, strlen(a), b, strlen(b), &out, &n, &err);
    if (rc != 0)
        fail_msg("merge: %d (%s: %s)\n  a=%s\n  b=%s", rc, err.field, err.msg, a, b);
    assert_int_equal(strlen(out), n);
    return out;
}

static void test_merge_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_ROWS(merge_rows); i++) {
        const struct merge_row *r = &merge_rows[i];
        char *got = merge_ok(r->a, r->b), *want = canon(r->want);
        if (strcmp(got, want) != 0)
            fail_msg("row %zu (%s)\n  got  %s\n  want %s", i, r->name, got, want);
        /* merging the result again with either input changes nothing */
        char *again = merge_ok(got, r->b);
        if (strstr(r->name, "tie") == NULL && strstr(r->name, "no updatedAt") == NULL)
            assert_string_equal(again, got);
        free(again);
        again = merge_ok(got, got);
        assert_string_equal(again, got);
        free(again);
        free(got);
        free(want);
    }
}

/* The fixture items: merge(x, x) == x; an older pending item then the item itself (in either
 * order) ends as the item; relinking facts built without links gives the linked facts. */
static void test_merge_fixtures(void **state)
{
    (void)state;
    struct proto_explorers ex;
    load_chains(&ex);
    json_t *page = page_items(), *items = json_object_get(page, "requests");
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        char *text = json_dumps(item, JSON_COMPACT), *x, *bare, *linked, *m;
        size_t n, bn, ln;
        struct proto_err err;
        assert_int_equal(proto_facts_from_item(text, strlen(text), &ex, &x, &n, &err), 0);
        m = merge_ok(x, x);
        assert_string_equal(m, x);
        free(m);
        /* relink */
        assert_int_equal(proto_facts_from_item(text, strlen(text), NULL, &bare, &bn, &err), 0);
        assert_int_equal(proto_facts_relink(bare, bn, &ex, &linked, &ln, &err), 0);
        assert_string_equal(linked, x);
        free(linked);
        assert_int_equal(proto_facts_relink(x, n, NULL, &linked, &ln, &err), 0);
        assert_string_equal(linked, bare);
        free(linked);
        free(bare);
        /* an earlier pending answer: no outTxs, no actual fees or route, no referrer */
        json_t *early = json_deep_copy(item), *ed = json_object_get(early, "data");
        json_object_set_new(early, "updatedAt", json_string("2026-08-18T00:00:00.000Z"));
        json_object_set_new(ed, "outTxs", json_array());
        json_object_set_new(json_object_get(ed, "fees"), "actual", json_null());
        json_object_del(json_object_get(ed, "route"), "actual");
        json_object_del(ed, "referrer");
        char *etext = json_dumps(early, JSON_COMPACT), *e;
        assert_int_equal(proto_facts_from_item(etext, strlen(etext), &ex, &e, &n, &err), 0);
        json_t *ef = json_loads(e, 0, NULL);
        want_str(jstr(ef, "currencyOut.basis"), "quoted", "early basis");
        json_decref(ef);
        m = merge_ok(e, x);
        assert_string_equal(m, x);
        free(m);
        m = merge_ok(x, e);
        assert_string_equal(m, x);
        free(m);
        free(e);
        real_free(etext);
        json_decref(early);
        free(x);
        real_free(text);
    }
    json_decref(page);
    proto_explorers_cleanup(&ex);
}

static void test_merge_malformed(void **state)
{
    (void)state;
    static const struct { const char *a, *b; int code; const char *field; } rows[] = {
        {"", "{}", PROTO_EJSON, ""},
        {"{}", "[]", PROTO_ETYPE, "b."},
        {"{\"inTxs\":[{\"chainId\":1}]}", "{}", PROTO_EMISSING, "a.inTxs[0].txHash"},
        {"{}", "{\"updatedAt\":\"2026-08-18T00:00:00Z\"}", PROTO_ETYPE, "b.updatedAt"},
        {"{\"fees\":1}", "{}", PROTO_ETYPE, "a.fees"},
        {"{}", "{\"currencyIn\":[]}", PROTO_ETYPE, "b.currencyIn"},
        {"{}", "{\"outTxs\":[{\"txHash\":\"0xa\",\"explorerUrl\":\"a b\"}]}", PROTO_EVALUE,
         "b.outTxs[0].explorerUrl"},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        struct proto_err err = {0};
        char *out = (char *)&err;
        size_t n = 5;
        int rc = proto_facts_merge(rows[i].a, strlen(rows[i].a), rows[i].b, strlen(rows[i].b),
                                   &out, &n, &err);
        if (rc != rows[i].code || strcmp(err.field, rows[i].field) != 0)
            fail_msg("row %zu -> %d %s (%s)", i, rc, err.field, err.msg);
        assert_null(out);
        assert_int_equal(n, 0);
        rc = proto_facts_relink(rows[i].a, strlen(rows[i].a), NULL, &out, &n, &err);
        assert_true(rc == 0 || out == NULL);
        free(out);
    }
}

/* ---- allocation failure -------------------------------------------------------------------- */

enum op { OP_ITEM, OP_MERGE, OP_RELINK, OP_CHAINS, OP_LINK };

static int run_op(enum op op, const char *a, const char *b, const struct proto_explorers *ex,
                  char **out)
{
    struct proto_err err;
    size_t n;
    struct proto_explorers tmp;
    *out = NULL;
    switch (op) {
    case OP_ITEM: return proto_facts_from_item(a, strlen(a), ex, out, &n, &err);
    case OP_MERGE: return proto_facts_merge(a, strlen(a), b, strlen(b), out, &n, &err);
    case OP_RELINK: return proto_facts_relink(a, strlen(a), ex, out, &n, &err);
    case OP_CHAINS: {
        int rc = proto_explorers_from_chains(a, strlen(a), &tmp, &err);
        if (rc == 0) {
            *out = strdup(tmp.n > 0 ? tmp.v[tmp.n - 1].query : "");
            proto_explorers_cleanup(&tmp);
            if (*out == NULL)
                rc = PROTO_ENOMEM;
        } else {
            assert_int_equal(tmp.n, 0);
        }
        return rc;
    }
    case OP_LINK: return proto_explorer_tx_url(ex, 792703809, a, strlen(a), out);
    }
    return -100;
}

static void test_chaos(void **state)
{
    (void)state;
    struct proto_explorers ex;
    load_chains(&ex);
    json_t *page = page_items();
    char *item = json_dumps(json_array_get(json_object_get(page, "requests"), 1), JSON_COMPACT);
    char *facts, *older;
    struct proto_err err;
    size_t n;
    assert_int_equal(proto_facts_from_item(item, strlen(item), &ex, &facts, &n, &err), 0);
    older = canon("{\"updatedAt\":1,\"outTxs\":[{\"txHash\":\"0x8b46287cced9041dff02cee737443e2"
                  "10471948d33296c87009e8a7f770d9106\",\"block\":1}],\"fees\":{\"x\":1},"
                  "\"route\":{\"actual\":{\"a\":1},\"y\":2},\"appFees\":{\"z\":1}}");
    struct { enum op op; const char *a, *b; } rows[] = {
        {OP_ITEM, item, NULL}, {OP_MERGE, facts, older}, {OP_MERGE, older, facts},
        {OP_RELINK, facts, NULL}, {OP_CHAINS, CHAINS, NULL}, {OP_LINK, "0x/ab", NULL},
    };
    for (size_t i = 0; i < N_ROWS(rows); i++) {
        char *ref;
        assert_int_equal(run_op(rows[i].op, rows[i].a, rows[i].b, &ex, &ref), 0);
        long k;
        for (k = 1;; k++) {
            char *out;
            long live = chaos_live;
            chaos_arm(k);
            int rc = run_op(rows[i].op, rows[i].a, rows[i].b, &ex, &out);
            chaos_disarm();
            assert_int_equal(rc != 0, chaos_tripped);
            if (rc != 0) {
                assert_int_equal(rc, PROTO_ENOMEM);
                assert_null(out);
            } else {
                assert_string_equal(out, ref);
                free(out);
            }
            assert_int_equal(chaos_live, live);
            if (rc == 0)
                break;
        }
        assert_true(k > 1);
        free(ref);
    }
    /* proto_explorers_add: nothing changes on failure */
    for (long k = 1; k <= 4; k++) {
        size_t before = ex.n;
        chaos_arm(k);
        int rc = proto_explorers_add(&ex, 1000 + k, "https://n.io", "/tx/{TX_HASH}", "a=b");
        chaos_disarm();
        assert_int_equal(rc != 0, chaos_tripped);
        assert_int_equal(ex.n, before + (rc == 0));
    }
    free(older);
    free(facts);
    real_free(item);
    json_decref(page);
    proto_explorers_cleanup(&ex);
}

/* The wallets of a facts text for the endpoint filter "users": user, sender, recipient, once
 * each (0x addresses case-insensitively), nulls left out; not a facts object: typed errors. */
static void test_wallets(void **state)
{
    (void)state;
    char w[3][PROTO_FACTS_MAX_ADDR + 1];
    size_t n = 9;
    struct proto_err e;
    const char *t = "{\"createdAt\":1,\"user\":\"0xAbC\",\"sender\":\"0xabc\","
                    "\"recipient\":\"So1ana\",\"refundTo\":\"0xdef\"}";
    assert_int_equal(proto_facts_wallets(t, strlen(t), w, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(w[0], "0xAbC");
    assert_string_equal(w[1], "So1ana");
    t = "{\"user\":null,\"sender\":null,\"recipient\":\"0x1\"}";
    assert_int_equal(proto_facts_wallets(t, strlen(t), w, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(w[0], "0x1");
    assert_int_equal(proto_facts_wallets("{}", 2, w, &n, &e), 0);
    assert_int_equal(n, 0);
    assert_int_equal(proto_facts_wallets("[]", 2, w, &n, &e), PROTO_ETYPE);
    assert_int_equal(proto_facts_wallets("{\"user\":1}", 10, w, &n, &e), PROTO_ETYPE);
    assert_string_equal(e.field, "user");
    assert_int_equal(n, 0);
    assert_int_equal(proto_facts_wallets("{", 1, w, &n, &e), PROTO_EJSON);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_items),  cmocka_unit_test(test_from_pjson),
        cmocka_unit_test(test_explorer_links), cmocka_unit_test(test_explorer_list),
        cmocka_unit_test(test_caps),           cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_merge_rows),     cmocka_unit_test(test_merge_fixtures),
        cmocka_unit_test(test_merge_malformed), cmocka_unit_test(test_chaos),
        cmocka_unit_test(test_wallets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
