/* normalize.h - every upstream source into the canonical struct status_event.
 *
 * Each normaliser takes raw bytes (not NUL-terminated; at most PROTO_MAX_INPUT), fills *out
 * (initialised by the callee; cleaned on failure, so the caller always calls
 * status_event_cleanup) and returns 0 or a PROTO_E* code with *err filled. Unknown status /
 * failReason / refundFailReason values are kept verbatim and flagged, never rejected.
 * null and absent reasons become "N/A". observed_at is the caller's clock (ms).
 * Input must be strict RFC 8259 JSON (read by protocol/'s own reader, see json.c):
 * duplicate object keys, raw NUL bytes, \u0000, invalid UTF-8, lone surrogates, trailing
 * bytes and nesting deeper than PROTO_MAX_DEPTH are PROTO_EJSON; unknown fields are ignored.
 * runs on: any thread (pure). */
#ifndef PROTO_NORMALIZE_H
#define PROTO_NORMALIZE_H

#include "protocol/event.h"

enum proto_ws_kind {
    PROTO_WS_EVENT = 0,   /* a request.status.updated event (envelope A or B): *out is set */
    PROTO_WS_READY,       /* {"type":"connection","status":"ready",...}: id in ctl_id */
    PROTO_WS_SUB_ACK,     /* subscribe ack; ctl_id = filters.id when echoed, else "" */
    PROTO_WS_UNSUB_ACK,   /* unsubscribe ack */
    PROTO_WS_CONTROL,     /* any other frame with a "type" (error/nack...): ctl_status set */
};

struct proto_ws_msg {
    enum proto_ws_kind kind;
    char ctl_id[PROTO_MAX_ID + 1];     /* socket id (ready) or request id (sub ack) */
    char ctl_status[PROTO_MAX_STATUS + 1]; /* "success", "ready", ... verbatim */
};

/* Upstream websocket frame. Envelope A {"event","data","publishedAt"} and envelope B
 * {"data":{"event","data"}} (publishedAt looked up at both levels). Control frames (type
 * connection/subscribe/unsubscribe) set msg->kind and leave *out empty. Events other than
 * request.status.updated -> PROTO_EEVENT. */
int proto_normalize_ws(const char *buf, size_t len, int64_t observed_at,
                       struct proto_ws_msg *msg, struct status_event *out,
                       struct proto_err *err);

/* GET /intents/status/v3 response body; the request id comes from the caller (the body has
 * none). */
int proto_normalize_status_v3(const char *buf, size_t len, const char *request_id,
                              int64_t observed_at, struct status_event *out,
                              struct proto_err *err);

/* One item of GET /requests/v3 "requests" (as bytes of that item's JSON object). ISO-8601
 * createdAt/updatedAt -> ms; data.failReason/refundFailReason, else (absent, null or "" under
 * data) the top-level fields of the same name (null -> "N/A");
 * inTxHashes <- data.inTxs[].txHash, txHashes <- data.outTxs[].txHash; chain ids from
 * data.route.quoted.{origin,destination}...currency.chainId, else inTxs/outTxs chainId;
 * depositAddress {address,type,depositor,depositTxHash}. */
int proto_normalize_requests_item(const char *buf, size_t len, int64_t observed_at,
                                  struct status_event *out, struct proto_err *err);

/* A whole GET /requests/v3 page: calls cb for each item (items that fail to normalise are
 * passed with rc < 0 and err set, and do not stop the walk); *continuation gets a malloc'd
 * copy of the cursor or NULL when absent/null/empty (caller frees). Returns 0 or PROTO_E*
 * when the page itself is malformed (PROTO_ENOMEM stops the walk; *continuation is then NULL).
 * ev belongs to the walker and is cleaned after cb returns: cb may move it out (copy the
 * struct, then status_event_init(ev)). continuation may be NULL when the cursor is not
 * wanted. */
typedef void proto_requests_item_cb(void *arg, int rc, struct status_event *ev,
                                    const struct proto_err *err);
int proto_normalize_requests_page(const char *buf, size_t len, int64_t observed_at,
                                  proto_requests_item_cb *cb, void *arg, char **continuation,
                                  struct proto_err *err);

/* The same walk with each item's request facts (protocol/facts.h, explorer links from ex, NULL:
 * none): facts[0..facts_len) is its canonical text, NULL when the item's status was rejected
 * or its facts were (facts are best effort: the status stands). facts is the walker's, valid
 * during cb only. */
struct proto_explorers;
typedef void proto_requests_facts_cb(void *arg, int rc, struct status_event *ev,
                                     const struct proto_err *err, const char *facts,
                                     size_t facts_len);
int proto_normalize_requests_page_facts(const char *buf, size_t len, int64_t observed_at,
                                        const struct proto_explorers *ex,
                                        proto_requests_facts_cb *cb, void *arg,
                                        char **continuation, struct proto_err *err);

/* Upstream webhook body {"event","timestamp","data":{...}}; published_at <- timestamp. */
int proto_normalize_webhook(const char *buf, size_t len, int64_t observed_at,
                            struct status_event *out, struct proto_err *err);

/* Parse an ISO-8601 UTC timestamp ("2026-08-21T10:11:12.345Z", offsets allowed) into ms.
 * Returns 0 or PROTO_EVALUE. */
int proto_iso8601_ms(const char *s, int64_t *out);

#endif
