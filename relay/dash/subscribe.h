/* subscribe.h - the subscribe decision of a dashboard session, as a pure function: from the
 * parsed message (protocol/dash_msg.h) and the facts about the session and the hub, what the
 * answer is - a fault frame, a refusal (the connection then closes, hub.h), the stats
 * subscription, the same subscription again, or a new one (anonymous or not, resumed or
 * fresh). client.c gathers the facts, decides here, then applies the decision. The rules:
 *   - a "token" (when a stream token is configured) must be valid, and authenticates the
 *     session from then on, even when the subscribe is refused later;
 *   - stats and broad subscriptions need the token, or no token configured, a loopback
 *     listener and a page of the same origin; one request id needs the token, that, or
 *     STATUSRELAY_WS_ANONYMOUS;
 *   - a resume needs the event stream (Redis up, the follower's position known);
 *   - at most STATUSRELAY_WS_MAX_SUBSCRIPTIONS per connection; the same id or filter again
 *     is acked again (an id that is live gets its state again);
 *   - a subscription to one id without the token is anonymous, and takes one of its
 *     address's new ids when nothing watches the id yet.
 * Faults of the message are answered at their stage (DASH_STAGE_*), between these checks.
 * runs on: any thread (pure). */
#ifndef RELAY_DASH_SUBSCRIBE_H
#define RELAY_DASH_SUBSCRIBE_H

#include "protocol/dash_msg.h"

#include <stddef.h>
#include <stdint.h>

/* What the decision reads besides the message. */
struct dash_sub_facts {
    const char *stream_token;   /* configured (NULL or "": none) */
    int authed;                 /* the session has shown the token already */
    int cross_origin;           /* the session's page is of another origin */
    int loopback_listen;        /* the dashboard listener is on loopback only */
    int ws_anonymous;           /* STATUSRELAY_WS_ANONYMOUS */
    int resume_ready;           /* the event stream can be read (Redis up, position known) */
    int has_stats;              /* the session has the stats subscription */
    size_t nsubs;               /* its id and broad subscriptions */
    int64_t max_subs;           /* STATUSRELAY_WS_MAX_SUBSCRIPTIONS */
    uint32_t same_no;           /* its subscription to the same id / filter, 0: none */
    int same_live;              /* ... which is live */
    int id_watched;             /* the id is watched already (relay/ingest/anon.h) */
};

enum dash_sub_verdict {
    DASH_SUB_FAULT = 1,         /* answer the message's fault (m->fault) */
    DASH_SUB_REFUSE,            /* refuse: code, message */
    DASH_SUB_STATS,             /* ack the stats subscription (new_stats: create it) */
    DASH_SUB_AGAIN,             /* ack subscription same_no again (snapshot_again) */
    DASH_SUB_NEW,               /* a new subscription */
};

struct dash_sub_decision {
    enum dash_sub_verdict verdict;
    int authed;                 /* the token was valid: the session is authed from now on */
    const char *code;           /* REFUSE: the error code (static) */
    char message[192];          /* REFUSE: for the client */
    int new_stats;              /* STATS */
    int snapshot_again;         /* AGAIN */
    int broad;                  /* NEW: a broad subscription (else one id) */
    int anon;                   /* NEW id: without the token (holds an anonymous watch) */
    int take_addr_id;           /* NEW id: takes one of its address's new ids */
    int resume;                 /* NEW: resume from m->from (else live and a snapshot) */
};

/* Decide the answer to subscribe message m (err: dash_msg_parse did not return OK). Fills
 * every field of *d. Pure. */
void dash_subscribe_decide(const struct dash_msg *m, int err, const struct dash_sub_facts *f,
                           struct dash_sub_decision *d);
/* The refusal of a NEW anonymous subscription whose address has no new id left (max: the
 * STATUSRELAY_WS_ANON_IDS_PER_ADDRESS): code "too_many_ids", the message into d. */
void dash_subscribe_too_many_ids(int64_t max, struct dash_sub_decision *d);

#endif
