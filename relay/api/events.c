/* events.c (api) - GET /v1/events: the event stream, all of it or one request's timeline; and
 * the stored event record as JSON, which requests.c and compat.c use too. runs on: core thread.
 *
 * Decisions (documented in README's API section):
 *   - GET /v1/events: "after" is a streamId (exclusive), a bare ms timestamp (events after that
 *     millisecond) or "$" (nothing now; cursor = the newest streamId, for tailing); "cursor" is
 *     where to continue (last streamId returned, else the "after" given), null only when
 *     nothing was asked for and nothing exists. An unknown requestId filter is an empty list,
 *     not a 404 (it filters a collection; it names no resource). */
#include "relay/api/internal.h"
#include "protocol/event.h"
#include "protocol/proto.h"
#include "protocol/stream_vec.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "store/eventlog.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EVENTS_LIMIT_DEFAULT 100
#define EVENTS_LIMIT_MAX 1000

/* ---- record -> JSON -------------------------------------------------------------------------- */

/* The upstream-shaped "data" of ev (and, when sr is not NULL, its "statusrelay" object) as
 * the webhook body has them. New references or NULL. */
json_t *api_event_parts(const struct status_event *ev, json_t **sr)
{
    size_t len;
    char *text = proto_event_webhook_body(ev, &len);
    if (sr != NULL)
        *sr = NULL;
    if (text == NULL)
        return NULL;
    json_t *root = json_loadb(text, len, 0, NULL);
    free(text);
    json_t *data = json_incref(json_object_get(root, "data"));
    if (sr != NULL)
        *sr = json_incref(json_object_get(root, "statusrelay"));
    json_decref(root);
    return data;
}

static json_t *event_data(const struct status_event *ev)
{
    return api_event_parts(ev, NULL);
}

static int unreadable(int rc, const struct proto_err *perr, const char *what)
{
    if (rc != 0)
        log_warn("stored record unreadable", "what=%s err=%s field=%s", what, proto_strerror(rc),
                 perr->field);
    return rc;
}

int api_decode_record(const char *buf, size_t len, struct status_event *ev, const char *what)
{
    struct proto_err perr;
    memset(&perr, 0, sizeof(perr));
    return unreadable(proto_event_from_record(buf, len, ev, &perr), &perr, what);
}

/* One event of the event stream. NULL when the entry has no record, when it is unreadable
 * (logged) or on allocation failure. */
static json_t *event_json(const struct store_eventlog_entry *e)
{
    if (e->rec == NULL)
        return NULL;
    struct status_event ev;
    status_event_init(&ev);
    if (api_decode_record(e->rec, e->rec_len, &ev, e->sid) != 0) {
        status_event_cleanup(&ev);
        return NULL;
    }
    json_t *o = json_object();
    if (o != NULL) {
        json_object_set_new(o, "streamId", json_string(e->sid));
        json_object_set_new(o, "eventId", json_string(ev.event_id));
        json_object_set_new(o, "requestId", ev.request_id && ev.type != PROTO_EV_ENDPOINT_DISABLED
                                                ? json_string(ev.request_id)
                                                : json_null());
        json_object_set_new(o, "seq", json_integer((json_int_t)ev.seq));
        json_object_set_new(o, "status", ev.status ? json_string(ev.status) : json_null());
        json_object_set_new(o, "previousStatus",
                            ev.prev_status ? json_string(ev.prev_status) : json_null());
        json_object_set_new(o, "source", json_string(proto_source_name(ev.source)));
        json_object_set_new(o, "createdAt", json_integer(ev.created_at));
        json_t *data = event_data(&ev);
        json_object_set_new(o, "data", data != NULL ? data : json_null());
        json_object_set_new(o, "event", json_string(proto_event_type_name(ev.type)));
    }
    status_event_cleanup(&ev);
    return o;
}

/* ---- GET /v1/events?after=&requestId=&limit= -------------------------------------------------
 * The position is a vector cursor (protocol/stream_vec.h) with one stream id per stream read:
 * every partition's stream (docs/partitions.md), or the one stream of a request's timeline.
 * The streams are read after their own positions and merged by (ms, seq, partition)
 * (store/eventlog.h): the order is exact within a partition (so per request) and by stream-id
 * time across partitions. Each event carries as "streamId" the vector after it (so "after" =
 * any event's streamId resumes right after that event) and, when the page spans several
 * streams, its "partition". The cursor is the vector after the page; null only when nothing
 * was asked for and nothing exists. With one stream the vector is the plain stream id. */
struct ev_read {
    struct ctx *x;
    unsigned n;     /* the streams read: the partitions, or 1 (a request's timeline) */
    int by_request; /* requestId=: the request's own stream only */
    int asked, tail; /* an "after" was given; after=$ */
    struct svec_pos pos[SVEC_MAX];
};

static json_t *pos_json(const struct ev_read *rd)
{
    char buf[SVEC_TEXT_MAX];
    svec_format(buf, sizeof(buf), rd->pos, rd->n);
    return json_string(buf);
}

static void on_events(void *arg, const char *err, const struct store_eventlog_entry *e,
                      size_t n)
{
    struct ev_read *rd = arg;
    struct ctx *x = rd->x;
    if (err != NULL) {
        api_reply_unavailable(x, "cannot read events");
        free(rd);
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        rd->pos[rd->by_request ? 0 : e[i].part] = e[i].pos; /* an unreadable entry too */
        json_t *o = rd->tail ? NULL : event_json(&e[i]);
        if (o == NULL)
            continue;
        json_object_set_new(o, "streamId", pos_json(rd));
        if (rd->n > 1)
            json_object_set_new(o, "partition", json_integer(e[i].part));
        json_array_append_new(list, o);
    }
    json_t *cur = n == 0 && !rd->asked && !rd->tail ? json_null() : pos_json(rd);
    api_reply_json(x, 200, json_pack("{s:o,s:o}", "events", list, "cursor", cur));
    free(rd);
}

/* after: NULL/"" (from the start), "$" (the newest positions), a bare ms (after it, in every
 * stream) or the vector cursor. Returns 0, or -1 after a 400. */
static int parse_after(struct ev_read *rd, const char *after)
{
    rd->tail = after != NULL && strcmp(after, "$") == 0;
    rd->asked = after != NULL && after[0] != '\0';
    if (!rd->asked || rd->tail)
        return 0;
    int k = svec_parse_after(after, rd->pos, rd->n);
    if (k == 1 && strchr(after, '-') == NULL) { /* a bare ms: in every stream */
        for (unsigned i = 1; i < rd->n; i++)
            rd->pos[i] = rd->pos[0];
        k = (int)rd->n;
    }
    if (k == (int)rd->n)
        return 0;
    if (rd->n == 1)
        api_reply_error(rd->x, 400, "invalid_parameter", "after",
                        "after must be a streamId (\"<ms>-<seq>\"), a unix ms "
                        "timestamp or \"$\"");
    else
        api_reply_error(rd->x, 400, "invalid_parameter", "after",
                        "after must be the cursor of an earlier page (%u stream ids "
                        "\"<ms>-<seq>\" separated by commas: one per partition), a unix "
                        "ms timestamp or \"$\"", rd->n);
    return -1;
}

void api_h_events(struct ctx *x)
{
    if (api_parse_limit(x, EVENTS_LIMIT_DEFAULT, EVENTS_LIMIT_MAX) != 0)
        return;
    const char *after = api_query_get(x, "after"), *rid = api_query_get(x, "requestId");
    if (rid != NULL && api_take_id(x, rid, strlen(rid), "requestId") != 0)
        return;
    struct store *s = x->api->c->store;
    struct ev_read *rd = xcalloc(1, sizeof(*rd));
    rd->x = x;
    rd->by_request = rid != NULL;
    rd->n = rd->by_request ? 1 : store_partitions(s);
    if (parse_after(rd, after) != 0) {
        free(rd);
        return;
    }
    const struct svec_pos *from = rd->asked ? rd->pos : NULL;
    if (rd->tail && rd->by_request)
        store_eventlog_newest_of(s, x->id, on_events, rd);
    else if (rd->tail)
        store_eventlog_newest(s, on_events, rd);
    else if (rd->by_request)
        store_eventlog_of_request(s, x->id, from, x->limit, on_events, rd);
    else
        store_eventlog_read(s, from, x->limit, on_events, rd);
}
