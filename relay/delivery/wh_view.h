/* wh_view.h - what the delivery scripts need from the deployment's endpoint set, and what
 * they hand back to it (docs/partitions.md). A script may touch the keys of one Redis
 * Cluster slot only, and endpoint hashes are deployment keys: so a partition script gets
 * this process's copy of the endpoint set (the view) in its tag argument, and returns the
 * health outcomes of its attempts, which store/wh_health.lua applies to the endpoint hashes
 * in a second call. One path for any partition count: the store decides what the view and
 * the health pairs mean (store/deliveries.h); with one partition it ignores the view and the
 * scripts read and write the hashes themselves, returning the endpoints they disabled.
 * runs on: core thread. */
#ifndef RELAY_DELIVERY_WH_VIEW_H
#define RELAY_DELIVERY_WH_VIEW_H

#include <stddef.h>

struct core;
struct webhooks;
struct dl_pairs;

/* The endpoint view the delivery scripts of partition calls get (store/deliveries.h: the
 * store puts it into their tag argument with several partitions, and ignores it with one):
 * "<id>[:<flags>],..." with flags l (latest mode) and d (disabled), built once per loaded
 * set and borrowed until the set's next load. */
const char *wh_view_of(struct core *c, struct webhooks *w);
/* The health pairs a delivery script handed back (dl_done, dl_fanout_send), applied by
 * dl_health (with several partitions through store/wh_health.lua); the endpoints disabled
 * are logged and counted and the set is reloaded. */
void wh_view_health(struct core *c, const struct dl_pairs *p);

#endif
