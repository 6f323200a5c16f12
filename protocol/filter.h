/* filter.h - which events a subscriber wants: lists of statuses, request ids, origin /
 * destination chain ids, wallets, referrers, fail and refund-fail reasons, flags, and a
 * metadata object; the one matcher, the one reader of the JSON shape and its canonical writer.
 * Dashboard "broad" subscriptions (relay/edge/dash_filter.c) and webhook endpoints
 * (relay/delivery/endpoint.c) both use it, so they agree on what matches.
 *
 * Matching: AND across keys, OR within a list, exact (case-sensitive) strings, except wallets
 * ("users"): two 0x addresses compare case-insensitively. A key without a list (NULL pointer)
 * matches every event; a present but empty list matches none (webhook REST input may say
 * "status": [], and that is kept as such). The empty filter matches all. "metadata" is an
 * object of 1..PROTO_FILTER_MAX_META_KEYS members, each a string, number or boolean: every
 * member must equal the event's tracking metadata member of that name (JSON equality; numbers
 * by value); an event without metadata matches no metadata filter.
 *
 * JSON shape: {"status": [..], "requestIds": [..], "originChainIds": [..],
 * "destinationChainIds": [..], "events": [..], "users": [..], "referrers": [..],
 * "failReasons": [..], "refundFailReasons": [..], "flags": [..], "metadata": {..}}.
 *
 * "events" (event types, protocol/event.h proto_event_type_parse) is the one key whose absence
 * does not match everything: without it only "request.status.updated" passes, so subscribers
 * that never named a type receive what they received before other types existed. Events
 * without a request (endpoint.disabled) are judged by "events" alone: the request keys
 * (status, requestIds, chain ids, users .. metadata) describe requests and do not apply to them.
 *
 * The two callers read it with different rules (which keys, one value or a list, null,
 * limits, which rejection comes first): struct proto_filter_opts says which. A rejection is
 * reported as a fault plus the key and element it concerns, and each caller words it for its
 * own API.
 * runs on: any thread (pure). */
#ifndef PROTO_FILTER_H
#define PROTO_FILTER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Owned by whoever filled it (proto_filter_from_json); release with proto_filter_cleanup.
 * A list pointer is NULL when the key is absent, else it has room for n + 1 entries. */
struct proto_filter {
    char **status;      /* owned strings */
    size_t nstatus;
    char **request_ids; /* owned strings */
    size_t nrequest_ids;
    int64_t *origin;
    size_t norigin;
    int64_t *dest;
    size_t ndest;
    char **events;      /* owned strings: known event type names */
    size_t nevents;
    /* users, referrers, failReasons, refundFailReasons, flags: owned strings */
    char **users;
    size_t nusers;
    char **referrers;
    size_t nreferrers;
    char **fail_reasons;
    size_t nfail_reasons;
    char **refund_fail_reasons;
    size_t nrefund_fail_reasons;
    char **flags;
    size_t nflags;
    json_t *metadata; /* owned reference (an object of its own); NULL when absent */
};

/* Limits of the keys users .. metadata (both callers). */
#define PROTO_FILTER_MAX_WALLET 256    /* bytes of one wallet: printable ASCII, no space */
#define PROTO_FILTER_MAX_REFERRER 256  /* bytes of one referrer: no control characters */
#define PROTO_FILTER_MAX_REASON 64     /* bytes of one reason code: printable ASCII */
#define PROTO_FILTER_MAX_META_KEYS 16  /* members of "metadata" */
#define PROTO_FILTER_MAX_META 4096     /* bytes of "metadata" as compact JSON */

/* 1 when name is a value "flags" accepts: a statusrelay.flags name (proto_flag_name),
 * "facts" or "reorg" (an event carrying statusrelay.reorg). */
int proto_filter_flag_known(const char *name);
/* The accepted flag names, comma-separated, for messages (static). */
const char *proto_filter_flag_names(void);

/* proto_filter_opts.flags */
/* A single value stands for a one-element list, a list must not be empty and a null value is
 * refused (dashboards). Without it: lists only, [] allowed, null = key absent (webhooks). */
#define PROTO_FILTER_ONE_VALUE 0x1u
/* "requestIds" is a known key (webhooks). */
#define PROTO_FILTER_REQUEST_IDS 0x2u
/* An "id" key is allowed and skipped: the caller reads it (dashboards). */
#define PROTO_FILTER_ID_KEY 0x4u
/* Every key is checked before any value, then the values in the canonical key order
 * (dashboards). Without it: key by key in the
 * object's order (webhooks). Only which rejection an input with several faults gets differs. */
#define PROTO_FILTER_KEYS_FIRST 0x8u
/* "events" is a known key (webhooks, dashboards). */
#define PROTO_FILTER_EVENTS 0x10u

struct proto_filter_opts {
    unsigned flags;       /* PROTO_FILTER_* above */
    size_t max_values;    /* entries per list */
    size_t max_status;    /* bytes of one status (1..max_status) */
    int64_t min_chain_id; /* chain ids: integers in [min_chain_id, max_chain_id] */
    int64_t max_chain_id;
};

enum proto_filter_fault {
    PROTO_FILTER_NOT_OBJECT = 1, /* filters is neither an object nor NULL / null */
    PROTO_FILTER_UNKNOWN_KEY,    /* key is not one of the known keys */
    PROTO_FILTER_NOT_LIST,       /* key's value has the wrong shape (or is [] / null where
                                    PROTO_FILTER_ONE_VALUE refuses it) */
    PROTO_FILTER_TOO_MANY,       /* key's list has more than max_values entries ("metadata":
                                    more than PROTO_FILTER_MAX_META_KEYS members or
                                    PROTO_FILTER_MAX_META bytes) */
    PROTO_FILTER_BAD_VALUE,      /* key[index] has the wrong type, length, characters or
                                    range (index 0 for a single value); "metadata": member
                                    is not a string, number or boolean */
};

struct proto_filter_err {
    enum proto_filter_fault fault;
    const char *key; /* the key concerned, borrowed from the input (or static); NULL for
                        PROTO_FILTER_NOT_OBJECT */
    size_t index;    /* PROTO_FILTER_BAD_VALUE only */
    const char *member; /* "metadata" BAD_VALUE: the member concerned, borrowed; else NULL */
};

/* Read filters (NULL or JSON null: the empty filter) into *out by the rules of o. Strings
 * are the values ("status" 1..max_status bytes; request ids by proto_request_id_valid; users,
 * referrers, reasons by the PROTO_FILTER_MAX_* limits above; flags by
 * proto_filter_flag_known), chain ids integers in o's range; "metadata" an object of
 * 1..PROTO_FILTER_MAX_META_KEYS string / number / boolean members (not an object, or {}:
 * NOT_LIST; null as for lists). Returns 0; PROTO_ETYPE (NOT_OBJECT, NOT_LIST),
 * PROTO_EVALUE (UNKNOWN_KEY, BAD_VALUE) or PROTO_ETOOLONG (TOO_MANY) with *err (may be NULL)
 * set; or PROTO_ENOMEM. *out is initialised in every case and empty unless 0 is returned.
 * filters is only read. */
int proto_filter_from_json(const json_t *filters, const struct proto_filter_opts *o,
                           struct proto_filter *out, struct proto_filter_err *err);

/* The canonical JSON object of f: every present list (also an empty one) as an array, keys in
 * the order status, requestIds, originChainIds, destinationChainIds, events, users, referrers,
 * failReasons, refundFailReasons, flags, metadata (a copy of the object). Reading it back with
 * the options that produced f gives an equal filter. New reference; NULL when out of memory. */
json_t *proto_filter_to_json(const struct proto_filter *f);

/* What an event offers the matcher. NULL strings / zero counts: the event has no such field. */
struct proto_filter_subject {
    const char *type;               /* event type; NULL means "request.status.updated" */
    const char *status;
    const char *request_id;
    int64_t origin;
    int64_t dest;
    const char *fail_reason;        /* NULL or "N/A": none */
    const char *refund_fail_reason; /* NULL or "N/A": none */
    const char *const *flags;       /* statusrelay.flags */
    size_t nflags;
    const char *const *wallets;     /* user, sender, recipient (any case; matched
                                       case-insensitively for 0x addresses) */
    size_t nwallets;
    const char *referrer;
    const json_t *metadata;         /* the tracking metadata object, or NULL */
};

/* 1 when an event passes f, else 0. */
int proto_filter_match(const struct proto_filter *f, const struct proto_filter_subject *s);

/* 1 when a and b have the same lists (presence, order and values) and equal metadata
 * objects, else 0. */
int proto_filter_equal(const struct proto_filter *a, const struct proto_filter *b);

/* 1 when f has no list at all (matches every request.status.updated event; other types need
 * "events"). */
int proto_filter_is_all(const struct proto_filter *f);

/* Free f's lists and leave it empty. NULL-safe. */
void proto_filter_cleanup(struct proto_filter *f);

#endif
