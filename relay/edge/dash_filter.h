/* dash_filter.h - a dashboard subscription's "broad" filter (anything wider than one request
 * id): statuses, origin/destination chain ids, users (wallets), referrers, failReasons,
 * refundFailReasons, flags (each an OR list) and metadata (an object, every member equal),
 * combined with AND; an empty filter matches every event. The same code validates a client's filters (core,
 * relay/dash/), carries the approved filter to the ws thread as compact JSON
 * (XMSG_DASH_ACCEPT_SUB, DASH_OP_ADD_BROAD) and matches events there (relay/edge/ws_server.c),
 * so both threads agree on what matches. The filter, its reader, writer and matcher are
 * protocol/filter.h (shared with webhook endpoints); this file holds the dashboard's rules
 * (one value or a list, the limits below) and its error messages.
 *
 * Client shape (the "filters" object of a subscribe message, like webhook filters):
 *   {"status": "success" | ["success", "refund"], "originChainIds": 8453 | [1, 8453],
 *    "destinationChainIds": [...], "users": "0xab.." | [...], "referrers": ..,
 *    "failReasons": .., "refundFailReasons": .., "flags": "reversal" | [...],
 *    "metadata": {"order": "A-1"}}
 * Matching reads an event's fields from its frame (struct dash_frame): the routing fields the
 * ws thread has anyway, the rest from the frame's JSON, parsed once per event and only when
 * a filter asks for more than status and chains.
 * runs on: any thread (no shared state). */
#ifndef RELAY_DASH_FILTER_H
#define RELAY_DASH_FILTER_H

#include "protocol/dash_msg.h"
#include "protocol/filter.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define DASH_FILTER_MAX_VALUES DASH_MSG_FILTER_MAX_VALUES /* per list */
#define DASH_FILTER_MAX_STATUS DASH_MSG_FILTER_MAX_STATUS /* status length (xmsg.status
                                                            holds 32 bytes) */

/* A broad filter is a struct proto_filter (protocol/filter.h) whose lists are never empty
 * and which has no requestIds; these functions apply the dashboard's rules to it. */

/* Validate a client's filters object (NULL = match all) into out. Returns 0, or -1 with
 * *why set to a static message (out is then clean). Keys other than the three above and
 * "id" (which the caller handles) are refused. Aborts when out of memory. */
int dash_broad_from_json(const json_t *filters, struct proto_filter *out, const char **why);
/* Canonical JSON of f (lists only when non-empty): new reference. */
json_t *dash_broad_to_json(const struct proto_filter *f);
/* Parse the canonical text (ws thread). Returns 0 or -1. */
int dash_broad_parse(const char *text, size_t len, struct proto_filter *out);
/* One event frame as the matcher sees it: fill with dash_frame_init (and dash_frame_type for
 * an event of another type than request.status.updated), match it against any number of
 * filters, then dash_frame_cleanup. The frame text and the strings are borrowed and must
 * outlive it. */
struct dash_frame {
    const char *text; /* the frame JSON (proto_event_ws_frame) */
    size_t len;
    int parsed;       /* the JSON was read (once; j NULL when unreadable) */
    json_t *j;        /* owned */
    struct proto_filter_subject s;
    const char *flags[16];
    const char *wallets[4];
};
void dash_frame_init(struct dash_frame *fr, const char *text, size_t len, const char *status,
                     const char *request_id, int64_t origin, int64_t dest);
/* The event's type (protocol/event.h enum proto_event_type): other types than
 * request.status.updated match only filters whose "events" names them. */
void dash_frame_type(struct dash_frame *fr, int ev_type);
void dash_frame_cleanup(struct dash_frame *fr);
/* 1 when the frame's event matches f. */
int dash_broad_match(const struct proto_filter *f, struct dash_frame *fr);
/* 1 when both filters have the same lists (order-insensitive is not needed: canonical). */
int dash_broad_equal(const struct proto_filter *a, const struct proto_filter *b);
/* 1 when f has no list at all (every event). */
int dash_broad_is_all(const struct proto_filter *f);
/* Free f's lists and leave it empty. NULL-safe. */
void dash_broad_cleanup(struct proto_filter *f);

#endif
