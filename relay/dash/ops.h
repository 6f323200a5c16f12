/* ops.h - what every Redis command of the hub carries, and the hub's lifetime while commands
 * are in flight. A command's callback names its session and subscription by number (struct
 * op, internal.h), never by pointer, and drops the answer when they are gone. The hub counts
 * its commands in flight (h->pending, incremented by the sender); hub_free marks it closing,
 * and the last callback frees it (dash_enter).
 * runs on: core thread. */
#ifndef RELAY_DASH_OPS_H
#define RELAY_DASH_OPS_H

#include "relay/dash/internal.h"

#include <stdint.h>

/* The start of every store callback of the hub: counts the command as done; 1 when the hub
 * is closing (the callback must return at once; the last one frees the hub), else 0. */
int dash_enter(struct hub *h);
/* A heap op for one Redis command of session sess, subscription no (0 = none), request id
 * (copied; NULL = none). The callback owns it. */
struct op *dash_op_new(struct hub *h, uint64_t sess, uint32_t no, const char *id);
/* Look up the op's session and subscription; NULL when gone or the session is closing. */
struct hsub *dash_op_sub(struct op *op, struct hsess **xp);
/* The start of a store callback that owns op: frees op and returns its subscription, or
 * NULL when the hub is closing or the session or subscription is gone. */
struct hsub *dash_op_finish(struct op *op, struct hsess **xp);

#endif
