/* internal.h - the state the files of relay/dash/ share, types only (no functions: each file
 * declares its own in its header). Private to relay/dash/: nothing outside this folder
 * includes it (make check-layout); the public API is hub.h, the map of the folder too.
 *
 * State: sessions (id -> struct hsess, each with its subscriptions), two indexes - live id
 * subscriptions per request id (to skip events nobody follows) and "<session>|<id>" (one
 * subscription per id and session) - the follower's position in the event stream, and the
 * subscriptions waiting for the follower to reach their resume cursor, and those held
 * until the follower has read what was written before their subscribe (all kept by
 * table.c, the position by follow.c).
 * Ownership: every Redis command carries a heap op naming its session and subscription by
 * number, never by pointer; the callback looks them up and drops the answer when they are
 * gone (ops.c). The hub outlives its commands in flight (pending count, closing flag).
 * runs on: core thread. */
#ifndef RELAY_DASH_INTERNAL_H
#define RELAY_DASH_INTERNAL_H

#include "protocol/filter.h"
#include "protocol/proto.h"
#include "protocol/stream_vec.h"

#include <event2/util.h>
#include <stddef.h>
#include <stdint.h>

#define EVENT_NAME "request.status.updated"
#define STATS_EVENT "statusrelay.stats"

enum sub_kind { SUB_ID, SUB_BROAD, SUB_STATS };
enum sub_state { SS_REPLAY, SS_WAIT, SS_LIVE, SS_HOLD };

struct hsub {
    struct hsub *next;
    uint32_t no;
    enum sub_kind kind;
    enum sub_state state;
    char *id;                 /* SUB_ID */
    struct proto_filter f;    /* SUB_BROAD */
    /* stream positions (heap strings, NULL = none; vectors of np stream ids, with one
     * partition the plain stream id: protocol/stream_vec.h), set with dash_str_set, freed
     * with the subscription */
    char *from;               /* the client's lastEventId */
    char *cursor;             /* resume: where the replay stopped */
    char *live_at;            /* the hub cursor when it went live */
    uint64_t replayed;
    unsigned anon : 1;        /* SUB_ID without the stream token: holds an anonymous watch */
    unsigned counted : 1;     /* ... and took one of its address's new ids */
};

struct hsess {
    struct hsess *hnext;
    uint64_t id;
    int authed, cross_origin, closing;
    struct hsub *subs;
    size_t nsubs;             /* id + broad (stats not counted) */
    int stats;                /* stats subscriptions */
    uint32_t next_no;
    double msg_tokens, bad_tokens;
    int64_t bucket_ms;
    int hist_inflight;        /* history, find and facts answers being read
                                 (HUB_HISTORY_INFLIGHT) */
    char addr[64];            /* peer address key (relay/ingest/anon.h anon_addr_key) */
};

/* A subscription held until the follower has read every event written before its
 * subscribe (SS_HOLD, follow.c dash_hold): its snapshot or replay then shows exactly what
 * the live part will not repeat. */
struct holder {
    uint64_t sess;
    uint32_t no;
    int limit;                /* a fresh subscription's snapshot limit */
    uint64_t need;            /* the first follower read (h->read_gen) sent after the hold */
    int64_t deadline_ms;      /* mono_ms: proceed anyway then (HUB_HOLD_MS) */
};

/* A subscription whose client cursor is ahead of the follower (SS_WAIT). */
struct waiter {
    uint64_t sess;
    uint32_t no;
    int missed;               /* the follower routed an event after the cursor meanwhile:
                                 replay again before going live */
};

struct hub {
    struct core *c;
    int closing, pending;
    struct hsess **tab;
    size_t tab_size, count;
    struct idmap *live_ids;   /* request id -> live id subscriptions */
    struct idmap *sess_ids;   /* "<session>|<request id>" -> subscription number */
    size_t broad_live, nstats;
    struct waiter *waiters;
    size_t nwaiters;
    struct holder *holds;     /* at most HUB_HOLD_MAX */
    size_t nholds;
    int hold_kick;            /* a hold was added while reading: read again at once */
    /* stream follower (follow.c) */
    char cursor[SVEC_TEXT_MAX]; /* "" until known; the text of pos */
    unsigned np;              /* partitions (store_partitions) */
    struct svec_pos *pos;     /* the follower's position in each partition's stream */
    int reading, cursor_checking, recheck_after;
    uint64_t read_gen;        /* follower reads sent (the one in flight: this number) */
    uint64_t events_seen, events_routed, frame_errors;
    struct event *poll_ev, *kick_ev, *stats_ev;
    uint64_t rate_seen[6];
    int64_t rate_ms[6];
    int rate_i;
    int loopback_listen;
};

struct op {
    struct hub *h;
    uint64_t sess;
    uint32_t no;
    int track;                /* snapshot of an id subscription: start tracking if needed */
    char id[PROTO_MAX_ID + 1];
};

#endif
