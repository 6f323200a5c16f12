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
/* presence bits: the source carried this optional field (absent fields are merged from the
 * last-known state by the lifecycle; present-but-null clears it) */
#define PROTO_HAS_DETAILS 0x100
#define PROTO_HAS_REFERRER 0x200
#define PROTO_HAS_DEPOSIT 0x400
#define PROTO_HAS_QUOTE_CREATED 0x800
#define PROTO_HAS_REASONS 0x1000 /* failReason/refundFailReason were present */
#define PROTO_HAS_IN_TXS 0x2000  /* inTxHashes present */
#define PROTO_HAS_OUT_TXS 0x4000 /* txHashes present */

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
    char *details;            /* NULL = null */
    char *referrer;           /* NULL = null */
    struct proto_deposit *deposit; /* NULL = null (not a deposit-address request) */
    int64_t quote_created_at; /* ms, 0 = unknown */
    unsigned flags;           /* PROTO_F_* and PROTO_HAS_* */

    /* --- observation --- */
    enum proto_source source;
    int64_t observed_at;  /* ms, when the relay received it (caller's clock) */
    int64_t published_at; /* ms, upstream publishedAt / webhook timestamp; 0 = none */

    /* --- relay additions, set by proto_lifecycle_decide on accept --- */
    char event_id[PROTO_EVENT_ID_MAX]; /* "evt_" + 32 hex, deterministic from (id, seq) */
    uint64_t seq;                      /* 1 for the first event of a request */
    char *prev_status;                 /* NULL for the first event */
    int64_t created_at;                /* ms, event creation: the webhook body "timestamp" */
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
/* success and refund are terminal; failure is not (a refund may follow). */
int proto_status_terminal(enum proto_status st);
const char *proto_source_name(enum proto_source src);
int proto_source_parse(const char *s); /* -1 if unknown */
/* Added: 1 if s is a failReason / refundFailReason value the upstream documents ("N/A",
 * "UNKNOWN", "SLIPPAGE", ...); unknown values are kept and flagged, never rejected. */
int proto_fail_reason_known(const char *s);
int proto_refund_reason_known(const char *s);
/* Added: PROTO_F_* flag names for the "statusrelay.flags" list ("unknownStatus", ...); NULL
 * for bits that are not PROTO_F_* flags. */
const char *proto_flag_name(unsigned flag);

/* Deterministic event id for (request id, seq): "evt_" + 32 lowercase hex of
 * SHA-256("<request_id>:<seq>"). out must hold PROTO_EVENT_ID_MAX bytes. If libcrypto fails
 * (allocation), out is "" (proto_lifecycle_decide turns that into PROTO_ENOMEM). */
void proto_event_id(const char *request_id, uint64_t seq, char *out);

/* --- encodings. Each returns a new malloc'd NUL-terminated compact JSON text (caller
 * free()s) and its length in *len, or NULL on allocation failure. Output is deterministic:
 * the same event always encodes to the same bytes. Upstream-shaped outputs carry "N/A"
 * where the upstream does, never null, for failReason/refundFailReason. --- */

/* (a) webhook body: {"event":"request.status.updated","timestamp":<created_at>,
 *     "data":{status,inTxHashes,txHashes,updatedAt,originChainId,destinationChainId,
 *     depositAddress,requestId,referrer,details,failReason,refundFailReason},
 *     "statusrelay":{"eventId","seq","previousStatus","source","observedAt",
 *     "publishedAt"?,"flags"?}} - key order exactly as written here. */
char *proto_event_webhook_body(const struct status_event *ev, size_t *len);

/* (b) dashboard websocket frame: {"event":"request.status.updated","data":{...same data...},
 *     "publishedAt":<ms>,"statusrelay":{... + "snapshot":true when snapshot}}.
 *     published_ms is the time the relay publishes the frame. */
char *proto_event_ws_frame(const struct status_event *ev, int snapshot, int64_t published_ms,
                           size_t *len);

/* (c) GET /intents/status/v3 body: {status,details?,inTxHashes,txHashes,updatedAt,
 *     originChainId,destinationChainId,quoteCreatedAt?,failReason,refundFailReason}. */
char *proto_event_status_v3(const struct status_event *ev, size_t *len);

/* Storage form: every field of the struct (upstream, observation and relay additions) as
 * one JSON object, used for Redis state, the event log and REST reads. Round-trips:
 * proto_event_from_record(proto_event_record(ev)) == ev. */
char *proto_event_record(const struct status_event *ev, size_t *len);
int proto_event_from_record(const char *buf, size_t len, struct status_event *out,
                            struct proto_err *err);

#endif
