/* fuzz_facts.c - libFuzzer target for protocol/facts.c on the same bytes read four ways: as a
 * /requests/v3 item, as a page of items (each item's facts merged into the previous ones), as
 * a facts text of ours (merge, relink, its wallets) and as a GET /chains body (explorer links).
 * Invariants: every return code is a known PROTO_E* (never PROTO_ENOMEM) matching err->code,
 * with no output on failure; every facts text handed out is JSON jansson reads (duplicates
 * rejected), an object with the canonical keys, at most PROTO_FACTS_MAX_INPUT bytes, and
 * canonical: merge(x, x) == x, relink(x, the list it was built with) == x, relinking without
 * a list and back gives x; a merge of two facts texts is canonical too; a link starts with its
 * chain's base and holds only printable ASCII without space, quote or backslash.
 * runs on: the fuzzer process, one thread. */
#include "tests/fuzz/fuzz_check.h"

#include "protocol/facts.h"

#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char CHAINS[] =
    "{\"chains\":[{\"id\":1,\"explorerUrl\":\"https://etherscan.io\",\"explorerPaths\":"
    "{\"transaction\":\"/tx/{TX_HASH}\"}},{\"id\":8453,\"explorerUrl\":\"https://basescan.org/\"},"
    "{\"id\":137,\"explorerUrl\":\"https://polygonscan.com\",\"explorerPaths\":{\"transaction\":"
    "\"tx\"}},{\"id\":792703809,\"explorerUrl\":\"https://solscan.io\",\"explorerPaths\":"
    "{\"transaction\":\"/tx/{TX_HASH}\"},\"explorerQueryParams\":{\"cluster\":\"main net\"}}]}";

static struct proto_explorers ex;
static int ex_ready;

static void check_rc(int rc, const struct proto_err *err, const char *out)
{
    FUZZ_CHECK(rc <= 0 && rc >= PROTO_EEVENT && rc != PROTO_ENOMEM);
    if (rc != 0) {
        FUZZ_CHECK(err->code == rc && out == NULL);
        FUZZ_CHECK(memchr(err->field, '\0', sizeof(err->field)) != NULL);
        FUZZ_CHECK(memchr(err->msg, '\0', sizeof(err->msg)) != NULL);
    }
}

/* A facts text: JSON, the canonical keys, canonical under merge and relink (with lists l). */
static void check_facts(const char *s, size_t n, const struct proto_explorers *l)
{
    static const char *const keys[] = {
        "createdAt", "updatedAt", "user", "sender", "recipient", "refundTo", "referrer",
        "requestType", "depositAddress", "currencyIn", "currencyOut", "refundCurrency",
        "inTxs", "outTxs", "fees", "appFees", "route", "orderId", "supersededByRequestId"};
    struct proto_err err;
    char *m;
    size_t mn;
    FUZZ_CHECK(s != NULL && strlen(s) == n && n <= PROTO_FACTS_MAX_INPUT);
    json_t *j = json_loadb(s, n, JSON_REJECT_DUPLICATES, NULL);
    FUZZ_CHECK(json_is_object(j) && json_object_size(j) == sizeof(keys) / sizeof(keys[0]));
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        FUZZ_CHECK(json_object_get(j, keys[i]) != NULL);
    json_decref(j);
    FUZZ_CHECK(proto_facts_merge(s, n, s, n, &m, &mn, &err) == 0);
    FUZZ_CHECK(mn == n && memcmp(m, s, n) == 0);
    free(m);
    if (l == (const struct proto_explorers *)-1)
        return; /* a merge result: links are the inputs', not a list's */
    FUZZ_CHECK(proto_facts_relink(s, n, l, &m, &mn, &err) == 0);
    FUZZ_CHECK(mn == n && memcmp(m, s, n) == 0);
    free(m);
    char *bare;
    size_t bn;
    FUZZ_CHECK(proto_facts_relink(s, n, NULL, &bare, &bn, &err) == 0);
    FUZZ_CHECK(proto_facts_relink(bare, bn, l, &m, &mn, &err) == 0);
    FUZZ_CHECK(mn == n && memcmp(m, s, n) == 0);
    free(m);
    free(bare);
}

/* The page walk: facts of each item, merged into the previous ones. */
static void walk_page(const char *buf, size_t len)
{
    struct pjson_doc doc;
    struct proto_err err;
    if (pjson_parse(buf, len, &doc, &err) != 0)
        return;
    const struct pjson *reqs = pjson_get(doc.root, "requests");
    char *acc = NULL;
    size_t acc_n = 0;
    for (const struct pjson *it = reqs != NULL && reqs->type == PJSON_ARR ? reqs->u.kids.first
                                                                          : NULL;
         it != NULL; it = it->next) {
        char *f, *m;
        size_t n, mn;
        int rc = proto_facts_from_pjson(it, "requests[0].", &ex, &f, &n, &err);
        check_rc(rc, &err, f);
        if (rc != 0)
            continue;
        check_facts(f, n, &ex);
        if (acc == NULL) {
            acc = f;
            acc_n = n;
            continue;
        }
        FUZZ_CHECK(proto_facts_merge(acc, acc_n, f, n, &m, &mn, &err) == 0);
        check_facts(m, mn, (const struct proto_explorers *)-1);
        free(acc);
        free(f);
        acc = m;
        acc_n = mn;
    }
    free(acc);
    pjson_free(&doc);
}

static void check_chains(const char *buf, size_t len)
{
    struct proto_explorers l;
    struct proto_err err;
    int rc = proto_explorers_from_chains(buf, len, &l, &err);
    FUZZ_CHECK(rc == 0 || rc == PROTO_EJSON || rc == PROTO_ETYPE || rc == PROTO_ETOOLONG);
    FUZZ_CHECK(rc == 0 || (l.n == 0 && l.v == NULL));
    for (size_t i = 0; i < l.n && i < 64; i++) {
        static const char hash[] = "0xab/?#&c";
        char *url;
        FUZZ_CHECK(i == 0 || l.v[i - 1].chain_id < l.v[i].chain_id);
        FUZZ_CHECK(proto_explorer_tx_url(&l, l.v[i].chain_id, hash, sizeof(hash) - 1, &url) ==
                   0);
        if (url == NULL)
            continue;
        size_t n = strlen(url);
        FUZZ_CHECK(n <= PROTO_EXPLORER_MAX_LINK);
        FUZZ_CHECK(strncmp(url, l.v[i].base, strlen(l.v[i].base)) == 0);
        for (size_t k = 0; k < n; k++)
            FUZZ_CHECK(url[k] > 0x20 && url[k] < 0x7f && url[k] != '"' && url[k] != '\\');
        free(url);
    }
    proto_explorers_cleanup(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    struct proto_err err;
    char *out = (char *)&err, *m;
    size_t n, mn;
    if (!ex_ready) {
        FUZZ_CHECK(proto_explorers_from_chains(CHAINS, strlen(CHAINS), &ex, &err) == 0);
        ex_ready = 1;
    }
    /* an item */
    int rc = proto_facts_from_item(buf, size, &ex, &out, &n, &err);
    check_rc(rc, &err, out);
    if (rc == 0) {
        check_facts(out, n, &ex);
        free(out);
    }
    /* a page */
    walk_page(buf, size);
    /* a facts text of ours (a stored one read back) */
    out = (char *)&err;
    rc = proto_facts_merge(buf, size, buf, size, &out, &n, &err);
    check_rc(rc, &err, out);
    if (rc == 0) {
        check_facts(out, n, (const struct proto_explorers *)-1);
        FUZZ_CHECK(proto_facts_relink(buf, size, &ex, &m, &mn, &err) == 0);
        check_facts(m, mn, &ex);
        free(m);
        free(out);
    }
    /* the wallets of a facts text (the endpoint filter "users"): at most 3, each a string
     * within bounds, none twice (ASCII case aside) */
    char w[3][PROTO_FACTS_MAX_ADDR + 1];
    size_t nw = 9;
    rc = proto_facts_wallets(buf, size, w, &nw, &err);
    FUZZ_CHECK(rc <= 0 && rc >= PROTO_EEVENT && rc != PROTO_ENOMEM);
    FUZZ_CHECK(nw <= 3 && (rc == 0 || nw == 0));
    for (size_t i = 0; i < nw; i++) {
        FUZZ_CHECK(strlen(w[i]) <= PROTO_FACTS_MAX_ADDR);
        for (size_t k = 0; k < i; k++)
            FUZZ_CHECK(strcasecmp(w[i], w[k]) != 0 || strlen(w[i]) != strlen(w[k]));
    }
    /* a chain list */
    check_chains(buf, size);
    return 0;
}
