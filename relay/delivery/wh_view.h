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

#include <hiredis/hiredis.h>
#include <stddef.h>

struct core;
struct webhooks;

/* The tag argument of store/wh_{claim,done,fanout,requeue}.lua for partition part: the tag
 * with one partition, else "<partition tag> <deployment tag> <id>[:<flags>],..." with flags
 * l (latest mode) and d (disabled). Malloc'd; the caller frees it. */
char *wh_view_tag(struct core *c, struct webhooks *w, unsigned part);
/* The (endpoint id, outcome) pairs of r's elements [from..] (several partitions): applied
 * through store/wh_health.lua; endpoints disabled by it are logged and counted and the set
 * is reloaded, as when a 1-partition script disables one. */
void wh_view_health(struct core *c, const redisReply *r, size_t from);

#endif
