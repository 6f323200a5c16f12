/* table.h - the sessions of the dashboard hub and their subscriptions: the session table
 * (id -> struct hsess), a session's subscriptions, the two indexes (live id subscriptions per
 * request id; "<session>|<id>" -> subscription number), going live (installing a
 * subscription in the ws thread at the follower's cursor), the waiters (subscriptions
 * whose resume cursor is ahead of the follower) and the holders (subscribes waiting for the
 * follower to read what was written before them). The structs are internal.h's.
 * runs on: core thread. */
#ifndef RELAY_DASH_TABLE_H
#define RELAY_DASH_TABLE_H

#include "relay/dash/internal.h"

#include <stdint.h>

/* Set up and release the table of h (hub_new; the hub's deferred free). */
void dash_table_init(struct hub *h);
void dash_table_cleanup(struct hub *h);

/* The session with this id, or NULL. Closing sessions are found too. */
struct hsess *dash_sess_find(const struct hub *h, uint64_t id);
/* A new session (id, peer address key addr), in the table; owned by the table. */
struct hsess *dash_sess_add(struct hub *h, uint64_t id, const char *addr);
/* Remove x with every subscription (the ws thread already forgot it) and free it. */
void dash_sess_remove(struct hub *h, struct hsess *x);
/* Remove and free every session (the hub is being freed). */
void dash_sess_remove_all(struct hub *h);

/* The subscription number no of x, or NULL. */
struct hsub *dash_sub_find(const struct hsess *x, uint32_t no);
/* x's subscription to request id, or NULL. */
struct hsub *dash_sub_of_id(const struct hub *h, const struct hsess *x, const char *id);
/* A new subscription of x (state SS_REPLAY); for SUB_ID, id (copied) is indexed, and anon /
 * counted say it holds an anonymous watch / took one of its address's new ids (released by
 * dash_sub_remove). */
struct hsub *dash_sub_new(struct hub *h, struct hsess *x, enum sub_kind kind, const char *id,
                          int anon, int counted);
/* Remove one subscription and free it; notify = tell the ws thread (not when the session is
 * gone). */
void dash_sub_remove(struct hub *h, struct hsess *x, struct hsub *u, int notify);

/* Install u in the ws thread at the hub's cursor (u->live_at): from now on the follower's
 * events reach it. */
void dash_sub_go_live(struct hub *h, struct hsess *x, struct hsub *u);

/* u waits for the follower to pass its cursor (SS_WAIT). */
void dash_waiter_add(struct hub *h, struct hsess *x, struct hsub *u);
/* Forget the waiter of subscription no of session sess, if any. */
void dash_waiter_del(struct hub *h, uint64_t sess, uint32_t no);

/* u is held (SS_HOLD) until the follower catches up (follow.c dash_hold): a holder with
 * limit, the follower read it needs and deadline; NULL when HUB_HOLD_MAX are held already
 * (u unchanged). */
struct holder *dash_hold_add(struct hub *h, struct hsess *x, struct hsub *u, int limit,
                             uint64_t need, int64_t deadline_ms);
/* Forget the holder at index i (the last one moves to i). */
void dash_hold_del_at(struct hub *h, size_t i);
/* Forget the holder of subscription no of session sess, if any. */
void dash_hold_del(struct hub *h, uint64_t sess, uint32_t no);

#endif
