/* event.h - the canonical record `request.status.updated` and its JSON encodings.
 *
 * One struct status_event carries an upstream observation (after normalisation) and, once
 * the lifecycle accepted it, the relay's additions (event id, seq, previous status,
 * creation time). Strings are heap-owned by the struct (status_event_cleanup frees them).
 * runs on: any thread (pure). */
#ifndef PROTO_EVENT_H
#define PROTO_EVENT_H

#include "protocol/proto.h"

#include <stddef.h>
#include <stdint.h>

enum proto_status {
    PROTO_ST_OTHER = 0, /* an unknown value, kept verbatim in ->status and flagged */
    PROTO_ST_WAITING,
    PROTO_ST_DEPOSITING,
    PROTO_ST_PENDING,
    PROTO_ST_SUBMITTED,
    PROTO_ST_SUCCESS,
    PROTO_ST_FAILURE,
    PROTO_ST_REFUND,
    PROTO_ST_DELAYED,
    PROTO_ST_FALLBACK,
    PROTO_ST_RECEIVED,
};

/* Where an observation came from. Names ("ws", "poll", "requests", "webhook", "api") appear
 * in "statusrelay.source", logs and metrics. */
enum proto_source {
    PROTO_SRC_WS = 0,   /* upstream websocket frame */
    PROTO_SRC_POLL,     /* GET /intents/status/v3 */
    PROTO_SRC_REQUESTS, /* GET /requests/v3 item */
    PROTO_SRC_WEBHOOK,  /* upstream webhook received at /v1/ingest/upstream */
    PROTO_SRC_COUNT
};

/* flags */
#define PROTO_F_UNKNOWN_STATUS 0x01        /* status not in enum proto_status */
#define PROTO_F_UNKNOWN_FAIL_REASON 0x02   /* failReason not in the known list */
#define PROTO_F_UNKNOWN_REFUND_REASON 0x04 /* refundFailReason not in the known list */
/* added: "details" was longer than PROTO_MAX_STR and was cut (at a UTF-8 boundary) */
#define PROTO_F_DETAILS_TRUNCATED 0x08
/* per event, set by the lifecycle: a status change out of a settled status (success, refund);
 * prev_status holds the settled status. Never inherited by the next event. */
#define PROTO_F_REVERSAL 0x10
/* a pending Bitcoin-origin request whose deposit is only in the mempool (GET /requests/v3:
 * the origin-chain inTx has no block). Kept by the lifecycle only while the status is pending. */
#define PROTO_F_UNCONFIRMED_DEPOSIT 0x20
/* per event: a follow-up event of the same status that brings request facts learned after
 * the status change (docs/facts.md "Facts in event bodies"); made by the lifecycle for an
 * observation carrying it (proto_lifecycle_decide). Never inherited by the next event. */
#define PROTO_F_FACTS 0x40
/* every PROTO_F_* bit lies in PROTO_F_MASK; the rest of flags are PROTO_HAS_* bits */
#define PROTO_F_MASK 0xffu
/* presence bits: the source carried this optional field (absent fields are merged from the
 * last-known state by the lifecycle; present-but-null clears it) */
#define PROTO_HAS_DETAILS 0x100
#define PROTO_HAS_REFERRER 0x200
#define PROTO_HAS_DEPOSIT 0x400
#define PROTO_HAS_QUOTE_CREATED 0x800
#define PROTO_HAS_REASONS 0x1000 /* failReason/refundFailReason were present */
#define PROTO_HAS_IN_TXS 0x2000  /* inTxHashes present */
#define PROTO_HAS_OUT_TXS 0x4000 /* txHashes present */
/* type bit, not presence: ev->details holds the JSON text (compact, valid) of a non-string
 * "details" value (object, array, number, bool), emitted verbatim by every encoder. Set only
 * by the normalisers and the record decoder (the lifecycle keeps it with the details it
 * keeps); clear when details is a plain string. */
#define PROTO_HAS_DETAILS_JSON 0x8000
/* an observation carried reorg details; on a merged state: ev->reorg is set */
#define PROTO_HAS_REORG 0x10000

/* Bounds of JSON text kept from the input: ev->reorg bytes (larger reorg details are
 * dropped), and the nesting depth of a JSON-typed details or of ev->reorg, so that every
 * encoding stays well inside PROTO_MAX_DEPTH (a deeper details is kept as a plain string of
 * its text, deeper reorg details are dropped). */
#define PROTO_MAX_REORG 8192
#define PROTO_MAX_JSON_DEPTH 32
/* Tracking metadata (POST /v1/requests "metadata"): compact JSON object text of at most this
 * many bytes, nested at most PROTO_MAX_JSON_DEPTH deep (proto_metadata_parse). */
#define PROTO_MAX_METADATA 4096

struct proto_strv {
    char **v; /* owned strings */
    size_t n;
};

struct proto_deposit {
    char *address;         /* NULL = null */
    char *type;            /* "open" | "strict" | other verbatim; NULL = null */
    char *depositor;       /* NULL = null */
    char *deposit_tx_hash; /* NULL = null (not seen yet) */
};

#define PROTO_EVENT_ID_MAX 40

/* Event types (the body's "event"). Besides status changes the relay says what only it
 * knows, each event decided once in the Redis script where the state changes (DESIGN "Event
 * types and routing"; docs/webhooks.md):
 *   request.watch.ended  the watch ended; data = the request's state + "reason" (final,
 *                        abandoned, failure_tail, untracked): store/watch_expire.lua,
 *                        store/untrack.lua
 *   request.stuck        the request became stuck; data = state + "stuckSince" (ms):
 *                        store/watch_stuck.lua
 *   endpoint.disabled    an endpoint was disabled; no request, data = {"webhookId", "url",
 *                        "reason": "gone" | "failing", "at"}: store/wh_lib.lua
 * The two request types take the request's next seq (after its last status event); an
 * endpoint.disabled event is ordered by its webhook id (request_id holds it); its seq counts
 * the disables of that endpoint. */
#define PROTO_EVENT_STATUS_UPDATED "request.status.updated"
enum proto_event_type {
    PROTO_EV_STATUS = 0, /* request.status.updated */
    PROTO_EV_WATCH_ENDED,
    PROTO_EV_STUCK,
    PROTO_EV_ENDPOINT_DISABLED,
    PROTO_EV_COUNT
};
const char *proto_event_type_name(enum proto_event_type t);
/* The type named s, or -1 when s names none. */
int proto_event_type_parse(const char *s);

struct status_event {
    /* --- upstream fields --- */
    char *request_id;
    char *status;             /* verbatim upstream value */
    enum proto_status st;     /* parsed; PROTO_ST_OTHER when unknown */
    int64_t updated_at;       /* ms */
    int64_t origin_chain_id;  /* 0 = unknown */
    int64_t destination_chain_id;
    struct proto_strv in_tx_hashes; /* "inTxHashes" */
    struct proto_strv tx_hashes;    /* "txHashes" */
    char *fail_reason;        /* never NULL once normalised: "N/A" when none */
    char *refund_fail_reason; /* never NULL once normalised: "N/A" when none */
    char *details;            /* NULL = null; JSON text when flags has PROTO_HAS_DETAILS_JSON */
    char *referrer;           /* NULL = null */
    struct proto_deposit *deposit; /* NULL = null (not a deposit-address request) */
    int64_t quote_created_at; /* ms, 0 = unknown */
    unsigned flags;           /* PROTO_F_* and PROTO_HAS_* */
    /* reorg details from GET /requests/v3, compact JSON object text (at most PROTO_MAX_REORG
     * bytes) {"inTxs":[{"txHash","chainId","status"},...],"metadata":<metadata.reorg>|null};
     * NULL = none. Never survives a status change (lifecycle.h). */
    char *reorg;

    /* --- observation --- */
    enum proto_source source;
    int64_t observed_at;  /* ms, when the relay received it (caller's clock) */
    int64_t published_at; /* ms, upstream publishedAt / webhook timestamp; 0 = none */

    /* --- relay additions, set by proto_lifecycle_decide on accept --- */
    char event_id[PROTO_EVENT_ID_MAX]; /* "evt_" + 32 hex, deterministic from (id, seq, gen) */
    uint64_t seq;                      /* 1 for the first event of a request */
    char *prev_status;                 /* NULL for the first event */
    int64_t created_at;                /* ms, event creation: the webhook body "timestamp" */
    /* the request's generation: created_at of the first event of its record (ms), kept by
     * every later event; 0 in records of versions before generations. It goes into the event
     * id, so a request whose record the retention sweep deleted starts again at seq 1 with
     * ids it never had (STATUSRELAY_REQUEST_RETENTION). Storage only: no body or frame. */
    int64_t gen;
    /* the request's tracking metadata when the event was written: compact JSON object text
     * (proto_metadata_parse), NULL = none. Set by the apply step (store/apply.lua), never
     * by the normalisers or the lifecycle; "statusrelay.metadata" in bodies and frames. */
    char *metadata;

    /* --- event type (PROTO_EV_STATUS for every observation; the others only ever come
     * from a record, written by a Redis script: see the types above). The record keeps
     * them in its "event" object; a type other than PROTO_EV_STATUS never reaches the
     * lifecycle as an observation, and the lifecycle's next state is always a status. --- */
    enum proto_event_type type;
    char *type_reason; /* watch.ended: final | abandoned | failure_tail | untracked;
                          endpoint.disabled: gone | failing; else NULL */
    int64_t type_at;   /* stuck: stuckSince (ms); endpoint.disabled: at (ms); else 0 */
    char *type_url;    /* endpoint.disabled: the endpoint's URL; else NULL */
    /* the request facts this event carries (DESIGN "Request facts", protocol/facts.h): the
     * canonical compact JSON text of the facts version of the event's seq, explorer links as
     * built when the version was written; NULL = none known yet. Not part of the record (the
     * stream entry does not grow): attached by whoever renders a stream entry
     * (store/facts.h store_facts_at); "statusrelay.request" in bodies and frames. */
    char *facts;
};

void status_event_init(struct status_event *ev);
/* Free every owned member and re-init. NULL-safe. */
void status_event_cleanup(struct status_event *ev);
/* Deep copy. Returns 0 or PROTO_ENOMEM (dst is then cleaned). */
int status_event_copy(struct status_event *dst, const struct status_event *src);
/* Added: 1 when every field (upstream, observation, relay additions, flags) is equal
 * (NULL == NULL for strings). For tests and round-trip checks. */
int status_event_equal(const struct status_event *a, const struct status_event *b);

enum proto_status proto_status_parse(const char *s);
const char *proto_status_name(enum proto_status st); /* "other" for PROTO_ST_OTHER */
/* 1 for the "settled" statuses success and refund. Nothing is absorbing: a newer observation
 * with another status still follows (a reversal, see lifecycle.h); failure is not settled. */
int proto_status_terminal(enum proto_status st);
/* 1 for the statuses whose watch is settled (polled slowly, never stuck; store/watch_lib.lua):
 * success, refund and fallback (DESIGN "More upstream rules": settled like refund, as the
 * upstream's SDK treats it; a change out of fallback is no reversal: a refund may follow). */
int proto_status_settled(enum proto_status st);
const char *proto_source_name(enum proto_source src);
int proto_source_parse(const char *s); /* -1 if unknown */
/* Added: 1 if s is a failReason / refundFailReason value the upstream documents ("N/A",
 * "UNKNOWN", "SLIPPAGE", ...); unknown values are kept and flagged, never rejected. */
int proto_fail_reason_known(const char *s);
int proto_refund_reason_known(const char *s);
/* The failReason an upstream-shaped output carries for this one state, without history (the
 * upstream's status-response rule): failure/fallback/refund -> ev->fail_reason if it says
 * something (not NULL/"N/A"), else "UNKNOWN"; the other known statuses -> "N/A"; an unknown
 * status -> ev->fail_reason if it says something, else "N/A". Borrowed (ev's or static). */
const char *proto_fail_reason_out(const struct status_event *ev);
/* Added: PROTO_F_* flag names for the "statusrelay.flags" list ("unknownStatus", ...); NULL
 * for bits that are not PROTO_F_* flags. */
const char *proto_flag_name(unsigned flag);

/* Deterministic event id for (request id, seq, generation): "evt_" + 32 lowercase hex of
 * SHA-256("<request_id>:<seq>@<gen>"), or of SHA-256("<request_id>:<seq>") when gen is 0 (a
 * record written before generations: its ids stay what they were). The two forms cannot
 * meet: the text after the last ':' is all digits in one, never in the other. out must hold
 * PROTO_EVENT_ID_MAX bytes. If libcrypto fails (allocation), out is "" (proto_lifecycle_decide
 * turns that into PROTO_ENOMEM). */
void proto_event_id(const char *request_id, uint64_t seq, int64_t gen, char *out);

/* --- encodings. Each returns a new malloc'd NUL-terminated compact JSON text (caller
 * free()s) and its length in *len, or NULL on allocation failure. Output is deterministic:
 * the same event always encodes to the same bytes. Upstream-shaped outputs carry "N/A"
 * where the upstream does, never null, for failReason/refundFailReason; failReason follows
 * proto_fail_reason_out. A JSON-typed details (PROTO_HAS_DETAILS_JSON) is written verbatim. */

/* (a) webhook body: {"event":<type name>,"timestamp":<created_at>,
 *     "data":{status,inTxHashes,txHashes,updatedAt,originChainId,destinationChainId,
 *     depositAddress,requestId,referrer,details,failReason,refundFailReason},
 *     "statusrelay":{"eventId","seq","previousStatus","source","observedAt",
 *     "publishedAt"?,"flags"?,"reorg"?,"metadata"?,"request"?}} - key order exactly as
 *     written here. "flags" lists the names of the PROTO_F_* bits set; "reorg" is ev->reorg's
 *     object, "metadata" ev->metadata's and "request" ev->facts', each only when set
 *     (absent, never null, otherwise).
 *     request.watch.ended adds "reason" and request.stuck "stuckSince" as the last keys of
 *     "data"; endpoint.disabled is {"event","timestamp","data":{"webhookId","url","reason",
 *     "at"},"statusrelay":{"eventId","seq"}}. */
char *proto_event_webhook_body(const struct status_event *ev, size_t *len);

/* (b) dashboard websocket frame: {"event":<type name>,"data":{...same data...},
 *     "publishedAt":<ms>,"statusrelay":{...same as (a)... + "snapshot":true when snapshot}}.
 *     A snapshot is the request's present state: always "request.status.updated" (the
 *     request's state record may be a request.watch.ended / request.stuck record, whose seq
 *     and eventId it then carries).
 *     published_ms is the time the relay publishes the frame. */
char *proto_event_ws_frame(const struct status_event *ev, int snapshot, int64_t published_ms,
                           size_t *len);

/* (c) GET /intents/status/v3 body: {status,details?,inTxHashes,txHashes,updatedAt,
 *     originChainId,destinationChainId,quoteCreatedAt?,failReason,refundFailReason}. Never
 *     carries reorg details. */
char *proto_event_status_v3(const struct status_event *ev, size_t *len);

/* Storage form: every field of the struct (upstream, observation and relay additions) as
 * one JSON object, used for Redis state, the event log and REST reads. Round-trips:
 * proto_event_from_record(proto_event_record(ev)) == ev. A JSON-typed details is stored as
 * its JSON value (the decoder sets PROTO_HAS_DETAILS_JSON from the value's type); "reorg"
 * and then "metadata" (objects) are written last and only when set, and are optional when
 * decoding (records of older versions have none; null reads as none). store/apply.lua
 * relies on "metadata" being last: it appends the request's metadata to a record written
 * without it.
 * Other event types: a request type is the request's state record followed by
 * ,"event":{"type","seq","createdAt","reason"? | "stuckSince"?} (the scripts append it to the
 * state record as it is; its own seq, createdAt and eventId stay the status event's, and the
 * decoder takes seq and createdAt from "event" and derives the event id from (requestId,
 * seq, gen)). endpoint.disabled is {"event":{"type","seq","createdAt","webhookId","url",
 * "reason","at"}} alone; its event id is proto_event_id(webhookId, seq, at). */
char *proto_event_record(const struct status_event *ev, size_t *len);
int proto_event_from_record(const char *buf, size_t len, struct status_event *out,
                            struct proto_err *err);

/* Tracking metadata: buf[0..len) must be a JSON object (pjson_parse's strict rules) whose
 * compact text is at most PROTO_MAX_METADATA bytes, nested at most PROTO_MAX_JSON_DEPTH deep.
 * Returns 0 and, when out is not NULL, sets *out to its compact text (malloc'd, caller
 * frees); else PROTO_EJSON, PROTO_ETYPE (not an object), PROTO_ETOOLONG (size or depth) or
 * PROTO_ENOMEM with err (may be NULL) filled and *out untouched. */
int proto_metadata_parse(const char *buf, size_t len, char **out, struct proto_err *err);

#endif
