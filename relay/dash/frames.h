/* frames.h - frames from the hub to the ws thread: text and JSON to one session, changes of a
 * session's routing filters, the data of acks and notices about a subscription, error
 * frames, and the frame of one event record. Everything goes through the one FIFO queue
 * core->to_ws (relay/edge/xq.h), so frames reach a client in the order they were pushed.
 * runs on: core thread. */
#ifndef RELAY_DASH_FRAMES_H
#define RELAY_DASH_FRAMES_H

#include "relay/dash/internal.h"
#include "relay/edge/xq.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct status_event;

/* Send text (copied) to session sess; key = the conflation key (a request id, "~stats"),
 * NULL = never conflated. */
void dash_send_text(struct hub *h, uint64_t sess, const char *key, const char *text,
                    size_t len);
/* Send j as compact JSON. Takes j (NULL: nothing is sent). */
void dash_send_json(struct hub *h, uint64_t sess, const char *key, json_t *j);
/* The error frame {"type","status":"error","error":{"code","message"},"data"?} (type NULL:
 * "error"). Takes data (NULL: none). Not a verdict on the client: callers count bad
 * messages themselves. */
void dash_send_error(struct hub *h, uint64_t sess, const char *type, const char *code,
                     const char *message, json_t *data);
/* Tell the ws thread to change the routing filters of session sess (XMSG_DASH_ACCEPT_SUB);
 * key, gen and data (copied, optional) as enum dash_op says. */
void dash_filter_op(struct hub *h, uint64_t sess, enum dash_op op, const char *key,
                    uint64_t gen, const char *data);
/* Close session sess with code and reason (after the frames pushed before). */
void dash_close(struct hub *h, uint64_t sess, int code, const char *reason);
/* The "data" of acks and notices about u: {"event","filters"}. New reference. */
json_t *dash_sub_data(const struct hsub *u);
/* The frame of one event record, with "statusrelay.streamId" = sid and "statusrelay.request"
 * = facts (the facts text the event carries, store/facts.h; NULL: none); a snapshot of a
 * request.watch.ended record adds "statusrelay.watchEnded": its reason. NULL when the
 * record is unreadable (logged once per hub). ev (initialised by the caller, who cleans it
 * up) receives the decoded event (with a copy of facts). The frame is malloc'd, its length
 * in *len. */
char *dash_encode_frame(struct hub *h, const char *rec, size_t rlen, int snapshot,
                        const char *sid, const char *facts, struct status_event *ev,
                        size_t *len);
/* *dst = a copy of s (the old string is reused when long enough, else freed). */
void dash_str_set(char **dst, const char *s);

#endif
