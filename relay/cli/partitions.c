/* partitions.c (cli) - `statusrelay partitions`: where a deployment's data lives (GET
 * /v1/partitions): each partition's hash tag, its Redis Cluster slot and the master serving
 * it, and the deployment tag's, so an operator sees when two busy partitions share a master
 * (docs/partitions.md "Choosing N"); then the tag scheme ("tags: spread" or "tags: plain"). See internal.h.
 * runs on: main thread. */
#include "relay/cli/internal.h"
#include "relay/commands.h"

#include <stdio.h>

static void print_row(const char *what, json_t *o)
{
    json_t *slot = json_object_get(o, "slot");
    char sl[16] = "-";
    if (json_is_integer(slot))
        snprintf(sl, sizeof(sl), "%lld", (long long)json_integer_value(slot));
    printf("%-10s %-30s %-6s %s\n", what, cli_str(o, "tag"), sl, cli_str(o, "node"));
}

int cli_partitions(struct cli *c, const struct cli_args *a)
{
    json_t *out;
    long st = cli_call(c, "GET", "/v1/partitions", NULL, &out, 0);
    if (st == 200 && c->json) {
        cli_print_json(out);
    } else if (st == 200) {
        printf("%-10s %-30s %-6s %s\n", "PARTITION", "TAG", "SLOT", "NODE");
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(out, "items"), i, p)
        {
            char k[16];
            snprintf(k, sizeof(k), "%lld", cli_num(p, "partition"));
            print_row(k, p);
        }
        print_row("deployment", json_object_get(out, "deployment"));
        printf("tags: %s\n", cli_str(out, "tags"));
    }
    json_decref(out);
    return cli_exit_for(st);
}
