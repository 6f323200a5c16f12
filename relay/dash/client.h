/* client.h - what dashboard clients say, as the ws thread hands it over: a session opens
 * (XMSG_DASH_OPEN), sends a message (XMSG_DASH_MSG: subscribe, unsubscribe, history, find,
 * facts; read and validated by protocol/dash_msg.c), or is gone (XMSG_DASH_GONE). Subscribe is "decide,
 * then apply": the decision is subscribe.h's (pure), applied here. Also the message rates
 * (a token bucket for all messages, one for bad ones: flooding closes the session) and the
 * end of anonymous subscriptions to an id the upstream does not know.
 * runs on: core thread. */
#ifndef RELAY_DASH_CLIENT_H
#define RELAY_DASH_CLIENT_H

#include "relay/dash/internal.h"
#include "relay/edge/xq.h"

#include <stdint.h>

/* A session opened: m->session, m->data the peer address, m->key the ?token= (may be
 * empty), m->code 1 for a page of another origin. Sends the "connection" frame. */
void dash_client_open(struct hub *h, const struct xmsg *m);
/* A client message of session x (m->data, m->len). */
void dash_client_msg(struct hub *h, struct hsess *x, const struct xmsg *m);
/* Session sess is gone: its subscriptions end. */
void dash_client_gone(struct hub *h, uint64_t sess);
/* Every anonymous subscription to id gets a "not_found" error frame and ends. */
void dash_client_anon_gone(struct hub *h, const char *id);

#endif
