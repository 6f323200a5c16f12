/* test_relay_chains.c - unit tests for chains_slim (relay/ingest/chains.c): the dashboard's
 * copy of the upstream's GET /chains body keeps, per chain, the fields the page reads and
 * nothing else; anything that is not {"chains": [...]} is refused. Table-driven.
 * runs on: the test process, one thread. */
#include "relay/ingest/chains.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const struct {
    const char *in;
    const char *out; /* NULL: refused */
} rows[] = {
    {"{\"chains\":[]}", "{\"chains\":[]}"},
    /* the page's fields stay, values untouched; token lists, RPC URLs, contracts go */
    {"{\"chains\":[{\"id\":8453,\"name\":\"base\",\"displayName\":\"Base\",\"httpRpcUrl\":"
     "\"https://rpc\",\"explorerUrl\":\"https://basescan.org\",\"explorerName\":\"BaseScan\","
     "\"explorerPaths\":{\"transaction\":\"/tx/{TX_HASH}\",\"address\":\"/a\"},"
     "\"disabled\":false,\"blockProductionLagging\":true,\"currency\":{\"symbol\":\"ETH\"},"
     "\"erc20Currencies\":[{\"symbol\":\"USDC\"}],\"iconUrl\":\"https://i/1.png\","
     "\"logoUrl\":\"https://l/1.png\",\"brandColor\":\"#0052ff\",\"contracts\":{}}]}",
     "{\"chains\":[{\"id\":8453,\"name\":\"base\",\"displayName\":\"Base\",\"iconUrl\":"
     "\"https://i/1.png\",\"logoUrl\":\"https://l/1.png\",\"brandColor\":\"#0052ff\","
     "\"explorerUrl\":\"https://basescan.org\",\"explorerName\":\"BaseScan\","
     "\"explorerPaths\":{\"transaction\":\"/tx/{TX_HASH}\",\"address\":\"/a\"},"
     "\"disabled\":false,\"blockProductionLagging\":true}]}"},
    /* entries that are not objects are skipped; other top-level keys dropped */
    {"{\"chains\":[1,null,{\"id\":1}],\"x\":2}", "{\"chains\":[{\"id\":1}]}"},
    {"{\"chains\":{}}", NULL},
    {"{\"chain\":[]}", NULL},
    {"[]", NULL},
    {"<html>502</html>", NULL},
    {"", NULL},
};

static void test_slim(void **state)
{
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        size_t len = 12345;
        char *got = chains_slim(rows[i].in, strlen(rows[i].in), &len);
        if (rows[i].out == NULL) {
            if (got != NULL)
                fail_msg("row %zu: expected refusal, got %s", i, got);
            continue;
        }
        if (got == NULL)
            fail_msg("row %zu: refused", i);
        assert_string_equal(got, rows[i].out);
        assert_int_equal(len, strlen(rows[i].out));
        free(got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_slim)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
