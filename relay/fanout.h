/* fanout.h - webhook fan-out: the event stream {P}:events read through the consumer group
 * "webhooks", one delivery per matching endpoint, created idempotently by store/wh_fanout.lua
 * with the deterministic id "<event id>.<endpoint id>" and XACKed in the same script.
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

struct fanout *fanout_new(struct core *c, struct webhooks *w, struct dispatch *dp);
/* Stop; a read or script in flight completes into nothing (the object lives until then). */
void fanout_free(struct fanout *fo);
/* Read the stream now (coalesced). */
void fanout_kick(struct fanout *fo);

#endif
