/* fanout.h - webhook fan-out: the event stream {P}:events read through the consumer group
 * "webhooks", one delivery per matching endpoint, created idempotently by store/wh_fanout.lua
 * with the deterministic id "<event id>.<endpoint id>" and XACKed in the same script
 * (its keys, arguments and reply: store/deliveries.h dl_fanout_*, shared with replays).
 *
 * Exactly one process fans out at a time (lease {P}:fanout, renewed every second), so every
 * request's events are fanned out in stream (= seq) order. A new holder first claims the
 * pending entries of the previous one (XAUTOCLAIM) and re-reads its own pending entries: a
 * crash between reading and the script is replayed, never lost, never doubled. The group is
 * created at id 0 (endpoints only match events created after they were registered, so an
 * old stream costs a scan, never a stray delivery) and recreated on NOGROUP. New events of
 * this process wake the reader at once (ingest listener); events of other processes are
 * picked up by a 50 ms poll.
 * runs on: core thread. */
#ifndef RELAY_FANOUT_H
#define RELAY_FANOUT_H

#include <stddef.h>
#include <stdint.h>

struct core;
struct webhooks;
struct dispatch;
struct fanout;

#define FANOUT_GROUP "webhooks"
/* The fan-out lease: renewed every FANOUT_RENEW_MS, so a process that died (kill -9) stops
 * fanning out for at most FANOUT_LEASE_MS before another takes over; the fan-out script
 * checks the holder atomically, so a lapse never fans out twice. */
#define FANOUT_LEASE_MS 1000
#define FANOUT_RENEW_MS 300

/* Partitions (docs/partitions.md): one fan-out per partition, each with its own stream,
 * consumer group and lease {P:p<k>}:fanout. The fan-outs of a process share this record so
 * that the leases spread over the processes: a process takes a partition's lease only while
 * it holds fewer than ceil(partitions / live processes), and gives its highest one up while
 * it holds more (the live count comes from store/members.lua, relay/delivery/delivery.c). */
struct fanout_share {
    unsigned held;       /* leases held by this process */
    unsigned live;       /* live processes of the deployment (at least 1) */
    struct fanout **all; /* the process's fan-outs, one per partition */
    unsigned n;
};

/* part: the partition to fan out; share: NULL with one partition (the lease is always
 * tried). */
struct fanout *fanout_new(struct core *c, struct webhooks *w, struct dispatch *dp,
                          unsigned part, struct fanout_share *share);
/* 1 while this fan-out holds its partition's lease. */
int fanout_leader(const struct fanout *fo);
/* Stop; a read or script in flight completes into nothing (the object lives until then). */
void fanout_free(struct fanout *fo);
/* 1 while batches read from the stream are not committed yet. */
int fanout_busy(const struct fanout *fo);

#endif
