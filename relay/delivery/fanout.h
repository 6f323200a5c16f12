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

/* The KEYS and ARGV of store/wh_fanout.lua (see the script's header), built once for both
 * callers: the fan-out (replay = 0) and replays (replay.c, replay = 1). v[i] has lens[i]
 * bytes; everything it owns is freed by fanout_args_free. */
struct fanout_args {
    const char **v;
    size_t *lens;
    size_t n, events; /* arguments; events added */
    /* private */
    char **owned;
    size_t cap, nowned, capowned;
};
/* Which (endpoint, event) pairs to queue: 'p' (pending), 's' (skipped: endpoint disabled) or
 * 0 (none). */
struct webhook;
struct status_event;
typedef char fanout_match_cb(void *arg, const struct webhook *wh, const struct status_event *ev);
#define FANOUT_ARGS_NKEYS 5      /* KEYS of wh_fanout.lua at the front of v */
#define FANOUT_ARGS_KEEP_EMPTY 1 /* add an event that matches no endpoint (it is XACKed) */
#define FANOUT_ARGS_NO_BODY 2    /* leave bodies empty (a dry run counts pairs only) */
/* part: the partition whose stream, lease and delivery keys the script uses (store/keys.h). */
void fanout_args_begin(struct fanout_args *a, struct core *c, struct webhooks *w, int replay,
                       unsigned part);
/* Add stream entry sid with event ev (NULL: an unreadable entry, acknowledged with nothing to
 * deliver) and its pairs of w's endpoints. Returns the number of pairs added. */
long long fanout_args_event(struct fanout_args *a, struct webhooks *w, const char *sid,
                            const struct status_event *ev, fanout_match_cb *match, void *arg,
                            int flags);
void fanout_args_free(struct fanout_args *a);
/* The pieces fanout_args_event is made of, for callers that decide the pairs themselves
 * (the live fan-out's commit): the fixed part of an event (stream id .. event time) with
 * empty body and count slots whose indexes land in *body_at and *n_at; one (endpoint, kind,
 * attempt JSON, number) quad (kinds in store/wh_fanout.lua); the count of quads; an
 * unreadable entry (acknowledged, nothing to deliver); a string a->v now points at, to be
 * freed with a. */
void fanout_args_event_head(struct fanout_args *a, const char *sid, const struct status_event *ev,
                            size_t *body_at, size_t *n_at);
void fanout_args_pair(struct fanout_args *a, const char *whid, char kind, const char *json,
                      long long num);
void fanout_args_set_count(struct fanout_args *a, size_t n_at, long long n);
void fanout_args_empty_event(struct fanout_args *a, const char *sid);
void fanout_args_own(struct fanout_args *a, char *s);

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
/* Read the stream now (coalesced). */
void fanout_kick(struct fanout *fo);

#endif
