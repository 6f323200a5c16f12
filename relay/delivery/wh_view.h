/* wh_view.h - what the delivery scripts of a deployment with several partitions need from
 * the deployment's endpoint set, and what they hand back to it (docs/partitions.md). A
 * script may touch the keys of one Redis Cluster slot only, and endpoint hashes are
 * deployment keys: so a partition script gets this process's copy of the endpoint set in its
 * tag argument, and returns the health outcomes of its attempts, which store/wh_health.lua
 * applies to the endpoint hashes in a second call. With one partition nothing changes: the
 * tag argument is the tag and the scripts read and write the hashes themselves.
 * runs on: core thread. */
#ifndef RELAY_DELIVERY_WH_VIEW_H
#define RELAY_DELIVERY_WH_VIEW_H

#include <stddef.h>

struct core;
struct webhooks;
struct dl_pairs;

/* The endpoint view the delivery scripts of partition calls get (store/deliveries.h: the
 * store puts it into their tag argument): "<id>[:<flags>],..." with flags l (latest mode)
 * and d (disabled), built once per loaded set and borrowed until the set's next load; NULL
 * with one partition (the scripts read the endpoint hashes themselves). */
const char *wh_view_of(struct core *c, struct webhooks *w);
/* The (endpoint id, outcome) pairs a partition script handed back (several partitions):
 * applied through store/wh_health.lua (dl_health); endpoints disabled by it are logged and
 * counted and the set is reloaded, as when a 1-partition script disables one. */
void wh_view_health(struct core *c, const struct dl_pairs *p);

#endif
