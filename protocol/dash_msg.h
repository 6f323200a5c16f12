/* dash_msg.h - one dashboard client message (README "Dashboard stream"): bytes in, a struct
 * out, or the first fault found as a named error with the code and message the client gets.
 * The core (relay/dash/sess.c) decides what a valid message may do (tokens, limits, the store);
 * this file only reads and validates, so the fuzzer can run it (tests/fuzz/fuzz_dash_msg.c).
 *
 * Messages: {"type": "subscribe" | "unsubscribe" | "history" | "find" | "facts", ...}
 *   subscribe   "event" (required: "request.status.updated" or "statusrelay.stats"), "token"?,
 *               "filters"? ({"id"} alone, or the broad keys of dash_msg_filter), "lastEventId"?
 *               (a streamId "<ms>[-<seq>]"; with N > 1 partitions the vector of N of them,
 *               protocol/stream_vec.h), "snapshotLimit"? (0..1000, default 100)
 *   unsubscribe "event" (required), "filters"? (as above; absent, null, {} or not an object:
 *               every subscription of the event)
 *   history     "filters": {"id"} (required)
 *   find        "q" (required: a search term as GET /v1/requests?q= takes it, 1 to
 *               DASH_MSG_Q_MAX bytes of printable ASCII without spaces)
 *   facts       "filters": {"id"} (required)
 * Other keys are ignored. A subscribe to "statusrelay.stats" reads only "event" and "token".
 *
 * Fault stages. The core interleaves its own checks with these, and which answer a message with
 * several faults gets is part of the observable behaviour, so every fault has a stage:
 *   DASH_STAGE_EARLY   reported at once (not a message, no type, no event, unsubscribe and
 *                      history faults)
 *   DASH_STAGE_FIELDS  subscribe: after the token check and the stats subscription
 *                      (unsupported event, filters not an object, lastEventId, snapshotLimit)
 *   DASH_STAGE_TARGET  subscribe: after the resume availability check (the id or the broad
 *                      filter)
 * runs on: any thread (pure). */
#ifndef PROTO_DASH_MSG_H
#define PROTO_DASH_MSG_H

#include "protocol/filter.h"
#include "protocol/proto.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define DASH_MSG_EVENT "request.status.updated"
#define DASH_MSG_STATS_EVENT "statusrelay.stats"
#define DASH_MSG_SID_MAX 48              /* a lastEventId is shorter than this */
#define DASH_MSG_SNAPSHOT_DEFAULT 100    /* snapshotLimit when absent */
#define DASH_MSG_SNAPSHOT_MAX 1000
#define DASH_MSG_FILTER_MAX_VALUES 64    /* per broad filter list */
#define DASH_MSG_FILTER_MAX_STATUS 31    /* status length in a broad filter */
#define DASH_MSG_Q_MAX 256               /* bytes of a find term (STORE_SEARCH_MAX_VALUE) */

enum dash_msg_type {
    DASH_MSG_SUBSCRIBE = 1,
    DASH_MSG_UNSUBSCRIBE,
    DASH_MSG_HISTORY,
    DASH_MSG_FIND,
    DASH_MSG_FACTS,
};
enum dash_msg_event { DASH_EVENT_STATUS = 1, DASH_EVENT_STATS };
/* What a subscribe / unsubscribe names: every subscription of the event (unsubscribe only),
 * one request id, or a broad filter (for subscribe also the empty one: everything). */
enum dash_msg_target { DASH_TARGET_ALL = 1, DASH_TARGET_ID, DASH_TARGET_BROAD };
enum dash_msg_stage { DASH_STAGE_EARLY = 1, DASH_STAGE_FIELDS, DASH_STAGE_TARGET };

/* The named faults (dash_msg_parse's result). */
enum dash_msg_error {
    DASH_MSG_OK = 0,
    DASH_MSG_BAD_JSON,          /* bad_json: not a JSON object (duplicate keys refused) */
    DASH_MSG_NO_TYPE,           /* bad_request: "type" missing or not a string */
    DASH_MSG_UNKNOWN_TYPE,      /* unknown_type */
    DASH_MSG_NO_EVENT,          /* bad_request: "event" missing or not a string */
    DASH_MSG_UNSUPPORTED_EVENT, /* unsupported_event */
    DASH_MSG_FILTERS_TYPE,      /* bad_request: "filters" not an object (subscribe, history) */
    DASH_MSG_BAD_CURSOR,        /* bad_cursor: lastEventId */
    DASH_MSG_BAD_LIMIT,         /* bad_request: snapshotLimit */
    DASH_MSG_BAD_ID,            /* invalid_request_id: filters.id */
    DASH_MSG_ID_COMBINED,       /* bad_request: filters.id with other keys */
    DASH_MSG_BAD_FILTER,        /* bad_request: a broad filter key or value */
    DASH_MSG_BAD_QUERY,         /* bad_request: find's "q" missing or not a search term */
    DASH_MSG_ENOMEM,            /* allocation failed (no fault for the client) */
};

struct dash_msg_fault {
    enum dash_msg_stage stage;
    const char *type;    /* the error frame's "type": "subscribe", "unsubscribe", "history",
                            "find", "facts", or NULL ("error": the message has no known type) */
    const char *code;    /* "bad_request", ... (static) */
    const char *message; /* for the client (static) */
};

/* Owned by the caller; release with dash_msg_cleanup (also after a fault). Strings are
 * borrowed from root. */
struct dash_msg {
    json_t *root;                 /* the parsed message (owned), NULL when not JSON */
    enum dash_msg_type type;      /* 0 when "type" is missing or unknown */
    enum dash_msg_event event;    /* subscribe, unsubscribe (0 when unread or unknown) */
    int token_present;            /* subscribe: a "token" key, of any JSON type */
    const char *token;            /* its value when a string, else NULL */
    enum dash_msg_target target;  /* subscribe (ID or BROAD), unsubscribe, history and facts
                                     (ID) */
    const char *id;               /* DASH_TARGET_ID */
    struct proto_filter filter;   /* DASH_TARGET_BROAD (owned) */
    const char *from;             /* subscribe: lastEventId (a stream id, or with parts > 1 a
                                     vector of exactly parts ids), or NULL */
    int limit;                    /* subscribe: snapshotLimit */
    const char *q;                /* find: the term (validated: 1..DASH_MSG_Q_MAX bytes of
                                     0x21..0x7e) */
    struct dash_msg_fault fault;  /* when dash_msg_parse did not return DASH_MSG_OK */
};

/* Read one client message of len bytes. Returns DASH_MSG_OK with *m filled, or the first fault
 * (m->fault says which answer and at which stage; fields read before it stay filled), or
 * DASH_MSG_ENOMEM. *m is initialised in every case: call dash_msg_cleanup. */
enum dash_msg_error dash_msg_parse(const void *data, size_t len, struct dash_msg *m);
/* The same for a deployment of `parts` partitions (docs/partitions.md): with parts > 1 a
 * lastEventId is the vector of exactly `parts` stream ids, and anything else (a single id, a
 * vector of another length) is DASH_MSG_BAD_CURSOR ("a cursor of another partition count").
 * parts 1 is dash_msg_parse. */
enum dash_msg_error dash_msg_parse_parts(const void *data, size_t len, unsigned parts,
                                         struct dash_msg *m);
/* Release what m owns and leave it empty. NULL-safe. */
void dash_msg_cleanup(struct dash_msg *m);

/* The dashboard's reading of a broad "filters" object (NULL or JSON null: the empty filter;
 * keys "status", "originChainIds", "destinationChainIds", "users", "referrers", "failReasons",
 * "refundFailReasons", "flags", each one value or a non-empty list of at most
 * DASH_MSG_FILTER_MAX_VALUES, and "metadata" (protocol/filter.h); "id" is skipped: the caller
 * reads it). Returns 0,
 * DASH_MSG_BAD_FILTER with *why (static) set, or DASH_MSG_ENOMEM; *out is empty unless 0. */
int dash_msg_filter(const json_t *filters, struct proto_filter *out, const char **why);


#endif
