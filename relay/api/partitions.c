/* partitions.c (api) - GET /v1/partitions: where a deployment's data lives, for operators
 * (`statusrelay partitions`, docs/partitions.md "Choosing N"). Each partition's hash tag,
 * and on a Redis Cluster its slot and the master this process routes the slot to now (after
 * a failover or a slot migration: the new one, once the map was re-read); the deployment
 * tag's the same. "tags" is the deployment's tag scheme as its record says: "spread"
 * ({P:p<k>.<x>}, one partition per master of an evenly split cluster) or "plain" ({P:p<k>},
 * deployments recorded before the spread tags; and N = 1). With a single Redis every slot is null and the node is the Redis address.
 * No Redis command: the answer comes from the routing table (a master that was never
 * reached yet shows as null).
 *
 *   {"partitions": 3, "cluster": true, "tags": "spread",
 *    "deployment": {"tag": "{P}", "slot": 1234, "node": "10.0.0.1:7000"},
 *    "items": [{"partition": 0, "tag": "{P:p0.0}", "slot": 2389, "node": "10.0.0.2:7000"}, ...]}
 *
 * runs on: core thread. */
#include "relay/api/internal.h"
#include "relay/core.h"
#include "store/store.h"

#include <jansson.h>

/* {"tag", "slot", "node"} of one tag (a partition's tag is "" until the store was first
 * ready: its scheme comes from the deployment record; then all null). */
static json_t *where(struct store *s, const char *tag)
{
    if (tag[0] == '\0') {
        json_t *o = json_object();
        json_object_set_new(o, "tag", json_null());
        json_object_set_new(o, "slot", json_null());
        json_object_set_new(o, "node", json_null());
        return o;
    }
    char node[300];
    int slot = store_tag_where(s, tag, node, sizeof(node));
    json_t *o = json_object();
    json_object_set_new(o, "tag", json_string(tag));
    json_object_set_new(o, "slot", slot < 0 ? json_null() : json_integer(slot));
    json_object_set_new(o, "node", node[0] ? json_string(node) : json_null());
    return o;
}

void api_h_partitions(struct ctx *x)
{
    struct store *s = x->api->c->store;
    unsigned n = store_partitions(s);
    json_t *items = json_array();
    for (unsigned k = 0; k < n; k++) {
        json_t *o = where(s, store_part_tag(s, k));
        json_object_set_new(o, "partition", json_integer(k));
        json_array_append_new(items, o);
    }
    json_t *dep = where(s, store_tag(s));
    json_t *body = json_object();
    json_object_set_new(body, "partitions", json_integer(n));
    json_object_set_new(body, "cluster", json_boolean(!json_is_null(json_object_get(dep, "slot"))));
    const char *scheme = store_tag_scheme(s);
    json_object_set_new(body, "tags", scheme ? json_string(scheme) : json_null());
    json_object_set_new(body, "deployment", dep);
    json_object_set_new(body, "items", items);
    api_reply_json(x, 200, body);
}
