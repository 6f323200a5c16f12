/* internal.h - what the files of relay/dash/ share: the hub's state (sessions with their
 * subscriptions, the indexes, the stream cursor, the waiters), the op every Redis command
 * carries, and the functions one file calls in another. Private to relay/dash/: nothing
 * outside this folder includes it (make check-layout); the public API is hub.h.
 *   hub.c      the owner: create/free, Redis ops, frames to the ws thread, stats frames
 *   sess.c     sessions and their subscriptions; client messages (subscribe, unsubscribe,
 *              history): validation, auth, limits
 *   history.c  the past of one request: snapshots of the last-known state, history answers
 *   follow.c   the stream follower (new events to the ws thread), resume, going live
 *   follow_parts.c  the same across N > 1 partitions (docs/partitions.md): one XREAD per
 *              partition merged, the vector cursor, resume per partition
 *
 * State: sessions (id -> struct hsess, each with its subscriptions), two indexes - live id
 * subscriptions per request id (to skip events nobody follows) and "<session>|<id>" (one
 * subscription per id and session) - the stream cursor, and the list of subscriptions
 * waiting for the follower to reach their resume cursor.
 * Ownership: every Redis command carries a heap op naming its session and subscription by
 * number, never by pointer; the callback looks them up and drops the answer when they are
 * gone. The hub outlives its commands in flight (pending count, closing flag).
 * runs on: core thread. */
#ifndef RELAY_DASH_INTERNAL_H
#define RELAY_DASH_INTERNAL_H

#include "relay/dash/hub.h"
#include "protocol/lifecycle.h"
#include "relay/edge/dash_filter.h"
#include "relay/edge/xq.h"
#include "protocol/stream_vec.h"
#include "store/keys.h"
#include "store/store.h"

#include <event2/util.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define EVENT_NAME "request.status.updated"
#define STATS_EVENT "statusrelay.stats"
#define SID_MAX 48

enum sub_kind { SUB_ID, SUB_BROAD, SUB_STATS };
enum sub_state { SS_REPLAY, SS_WAIT, SS_LIVE };

struct hsub {
    struct hsub *next;
    uint32_t no;
    enum sub_kind kind;
    enum sub_state state;
    char *id;                 /* SUB_ID */
    struct proto_filter f;      /* SUB_BROAD */
    /* stream positions (heap strings, NULL = none; N > 1: vectors, protocol/stream_vec.h),
     * set with dash_str_set, freed with the subscription */
    char *from;               /* the client's lastEventId */
    char *cursor;             /* resume: last stream id replayed */
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
    int hist_inflight;        /* history answers being read (HUB_HISTORY_INFLIGHT) */
    char addr[64];            /* peer address key (relay/ingest/anon.h anon_addr_key) */
};

struct waiter {
    uint64_t sess;
    uint32_t no;
    char cursor[SID_MAX];
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
    /* stream follower */
    char cursor[SVEC_TEXT_MAX]; /* "" until known; N > 1: the vector of pos */
    unsigned np;              /* partitions (store_partitions) */
    struct svec_pos *pos;     /* N > 1: the follower's position in each partition's stream */
    struct dash_pread *pread; /* N > 1: the follower's read in flight (follow_parts.c) */
    int reading, cursor_checking;
    uint64_t events_seen, events_routed, frame_errors;
    struct event *poll_ev, *kick_ev, *stats_ev;
    uint64_t rate_seen[6];
    int64_t rate_ms[6];
    int rate_i;
    int loopback_listen;
    char k_events[KEY_MAX];
};

struct op {
    struct hub *h;
    uint64_t sess;
    uint32_t no;
    int track;                /* snapshot of an id subscription: start tracking if needed */
    char id[PROTO_MAX_ID + 1];
};

/* ---- hub.c: the owner, Redis ops, frames ------------------------------------------------- */

/* The start of every store callback of the hub: counts the command as done; 1 when the hub
 * is closing (the callback must return at once; the last one frees the hub), else 0. */
int dash_enter(struct hub *h);
/* The value of field `name` in a flat [name, value, ...] reply (XINFO; the fields of event
 * log entries: store/events.h); NULL when absent. *len (optional) gets its length. Borrowed
 * from the reply. */
const char *dash_reply_field(const redisReply *fields, const char *name, size_t *len);
/* A heap op for one Redis command of session sess, subscription no (0 = none), request id
 * (copied; NULL = none). The callback owns it. */
struct op *dash_op_new(struct hub *h, uint64_t sess, uint32_t no, const char *id);
/* Look up the op's session and live-or-replaying subscription; NULL when gone. */
struct hsub *dash_op_sub(struct op *op, struct hsess **xp);
/* The start of a store callback that owns op: frees op and returns its subscription, or
 * NULL when the hub is closing or the session or subscription is gone. */
struct hsub *dash_op_finish(struct op *op, struct hsess **xp);
/* Send text (copied) to session sess; key = the conflation key (a request id, "~stats"),
 * NULL = never conflated. */
void dash_send_text(struct hub *h, uint64_t sess, const char *key, const char *text,
                    size_t len);
/* Send j as compact JSON. Takes j (NULL: nothing is sent). */
void dash_send_json(struct hub *h, uint64_t sess, const char *key, json_t *j);
/* Tell the ws thread to change the routing filters of session sess (XMSG_DASH_ACCEPT_SUB);
 * key, gen and data (copied, optional) as enum dash_op says. */
void dash_filter_op(struct hub *h, uint64_t sess, enum dash_op op, const char *key,
                    uint64_t gen, const char *data);
/* The "data" of acks and notices about u: {"event","filters"}. New reference. */
json_t *dash_sub_data(const struct hsub *u);
/* The frame of one event record, with "statusrelay.streamId" = sid. NULL when the record is
 * unreadable. ev (initialised by the caller, who cleans it up) receives the decoded event.
 * The frame is malloc'd, its length in *len. */
char *dash_encode_frame(struct hub *h, const char *rec, size_t rlen, int snapshot,
                        const char *sid, struct status_event *ev, size_t *len);
/* Send one stats frame to session sess now. */
void dash_stats_frame_to(struct hub *h, uint64_t sess);
/* *dst = a copy of s (the old string is reused when long enough, else freed). */
void dash_str_set(char **dst, const char *s);

/* ---- sess.c: sessions and subscriptions ------------------------------------------------ */

/* The session with this id, or NULL. Closing sessions are found too. */
struct hsess *dash_sess_find(const struct hub *h, uint64_t id);
/* The subscription number no of x, or NULL. */
struct hsub *dash_sub_find(const struct hsess *x, uint32_t no);
/* Remove one subscription and free it; notify = tell the ws thread (not when the session is
 * gone). */
void dash_sub_remove(struct hub *h, struct hsess *x, struct hsub *u, int notify);

/* ---- history.c: snapshots and history answers -------------------------------------------- */

/* Start tracking request id (idempotent); failures are logged. */
void dash_track_one(struct hub *h, const char *id);
/* Send x the last-known state of request id for subscription u (an error frame when Redis
 * is unavailable); track = start tracking the id if nobody does. */
void dash_snapshot_one(struct hub *h, struct hsess *x, struct hsub *u, const char *id,
                       int track);
/* The snapshot a new subscription gets: its id, or the newest `limit` requests a broad one
 * matches. */
void dash_fresh_snapshot(struct hub *h, struct hsess *x, struct hsub *u, int limit);
/* Answer a history request of x for request id (validated and allowed by the caller): the
 * newest HUB_HISTORY_MAX events within HUB_HISTORY_BYTES, or for !trusted (anonymous) the
 * HUB_HISTORY_ANON_* caps; "truncated": true when older ones were left out for size. */
void dash_history(struct hub *h, struct hsess *x, const char *id, int trusted);

/* ---- follow.c: the stream follower, resume, going live ------------------------------------ */

/* Forget the waiter of subscription no of session sess, if any. */
void dash_waiter_del(struct hub *h, uint64_t sess, uint32_t no);
/* Install u in the ws thread at the hub's cursor: from now on the follower's events reach it. */
void dash_go_live(struct hub *h, struct hsess *x, struct hsub *u);
/* The resume cannot be served: say so, go live, snapshot. Never silence. */
void dash_gap(struct hub *h, struct hsess *x, struct hsub *u, const char *reason,
              const char *oldest);
/* Resume u from u->from (XINFO STREAM, then replay pages, then live); -1 when the command
 * could not be sent (nothing started). */
int dash_start_resume(struct hub *h, struct hsess *x, struct hsub *u);
/* Route one event of the stream to the ws thread as a shared frame whose streamId is sid
 * (skipped undecoded when nobody here follows request rid); counts it as seen. */
void dash_route(struct hub *h, const char *rid, size_t rid_len, const char *rec, size_t rec_len,
                const char *sid);
/* Does event ev of request rid belong to subscription u? */
int dash_sub_matches(const struct hsub *u, const char *rid, const struct status_event *ev);
/* Tell x that u resumed and is live ("resumed", with u->live_at as streamId). */
void dash_resumed_notice(struct hub *h, struct hsess *x, struct hsub *u);

/* ---- follow_parts.c: the same with N > 1 partitions (h->np > 1) ---------------------------- */

/* One follower round: an XREAD per partition after h->pos, merged by (ms, seq, partition),
 * each routed with the vector after it as streamId; the first round reads each stream's
 * newest id. Waiters whose cursor the follower passed resume again. */
void dash_parts_follow(struct hub *h);
/* Re-check h->pos against each stream's newest id (a restarted Redis may be behind it). */
void dash_parts_recheck(struct hub *h);
/* Resume u from the vector u->from: XINFO STREAM per partition (gap in any -> dash_gap),
 * then replay rounds (an XRANGE per partition, merged) up to h->pos, then live; -1 when no
 * command could be sent. */
int dash_parts_resume(struct hub *h, struct hsess *x, struct hsub *u);
/* Free what the follower holds (the hub is being freed). */
void dash_parts_free(struct hub *h);
/* The follower's triggers, wired by hub_new: the poll and kick events (arg = hub), the
 * ingest listener (an event was accepted here: read now), the store state listener. */
void dash_on_poll(evutil_socket_t fd, short what, void *arg);
void dash_on_ingest_event(void *arg, enum proto_verdict v, const struct status_event *ev,
                          const char *stream_id);
void dash_on_store_state(void *arg, int up);

#endif
