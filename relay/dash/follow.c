/* follow.c - the event stream, new and resumed: the follower (XREAD from the hub's cursor,
 * each entry routed once to the ws thread as one shared frame, or skipped when nobody here
 * follows its request), going live (installing a subscription in the ws thread at the
 * cursor), and resume (XINFO STREAM gap check, XRANGE replay pages up to the cursor, waiters
 * for a client cursor ahead of ours). The hand-off is described in hub.h. State: internal.h.
 * With N > 1 partitions the follower and resume are follow_parts.c's (h->np > 1).
 * runs on: core thread. */
#include "relay/dash/internal.h"
#include "protocol/event.h"
#include "relay/common/idmap.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "store/events.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- going live ------------------------------------------------------------------------- */

void dash_waiter_del(struct hub *h, uint64_t sess, uint32_t no)
{
    for (size_t i = 0; i < h->nwaiters; i++)
        if (h->waiters[i].sess == sess && h->waiters[i].no == no) {
            h->waiters[i] = h->waiters[--h->nwaiters];
            return;
        }
}

void dash_go_live(struct hub *h, struct hsess *x, struct hsub *u)
{
    u->state = SS_LIVE;
    dash_str_set(&u->live_at, h->cursor);
    if (u->kind == SUB_ID) {
        uint32_t n = 0;
        idmap_get(h->live_ids, u->id, &n);
        idmap_put(h->live_ids, u->id, n + 1);
        dash_filter_op(h, x->id, DASH_OP_ADD_ID, u->id, 0, NULL);
    } else if (u->kind == SUB_BROAD) {
        h->broad_live++;
        json_t *j = dash_broad_to_json(&u->f);
        char *t = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        dash_filter_op(h, x->id, DASH_OP_ADD_BROAD, NULL, u->no, t);
        free(t);
    }
}

void dash_resumed_notice(struct hub *h, struct hsess *x, struct hsub *u)
{
    json_t *d = dash_sub_data(u);
    json_object_set_new(d, "lastEventId", json_string(u->from));
    json_object_set_new(d, "replayed", json_integer((json_int_t)u->replayed));
    json_object_set_new(d, "streamId", json_string(u->live_at));
    dash_send_json(h, x->id, NULL, json_pack("{s:s,s:o}", "type", "resumed", "data", d));
}

/* ---- resume ------------------------------------------------------------------------------- */

static void send_gap(struct hub *h, struct hsess *x, struct hsub *u, const char *reason,
                     const char *oldest)
{
    json_t *d = dash_sub_data(u);
    json_object_set_new(d, "lastEventId", json_string(u->from));
    json_object_set_new(d, "oldestStreamId", oldest && oldest[0] ? json_string(oldest)
                                                                  : json_null());
    json_object_set_new(d, "reason", json_string(reason));
    json_object_set_new(d, "message",
                        json_string("events after lastEventId cannot be replayed: a fresh "
                                    "snapshot follows"));
    dash_send_json(h, x->id, NULL, json_pack("{s:s,s:o}", "type", "gap", "data", d));
}

void dash_gap(struct hub *h, struct hsess *x, struct hsub *u, const char *reason,
              const char *oldest)
{
    log_info("dashboard resume answered with a gap", "session=%llu from=%s reason=%s",
             (unsigned long long)x->id, u->from, reason);
    send_gap(h, x, u, reason, oldest);
    dash_go_live(h, x, u);
    dash_fresh_snapshot(h, x, u, HUB_SNAPSHOT_DEFAULT);
}

static void replay_page(struct hub *h, struct hsess *x, struct hsub *u);

static void finish_resume(struct hub *h, struct hsess *x, struct hsub *u)
{
    if (stream_id_cmp(u->from, h->cursor) > 0) {
        /* the client saw events this process has not read yet: go live once the follower
         * passes its cursor, so nothing it saw is sent twice */
        u->state = SS_WAIT;
        h->waiters = xrealloc(h->waiters, (h->nwaiters + 1) * sizeof(*h->waiters));
        struct waiter *w = &h->waiters[h->nwaiters++];
        w->sess = x->id;
        w->no = u->no;
        snprintf(w->cursor, sizeof(w->cursor), "%s", u->from);
        return;
    }
    dash_go_live(h, x, u);
    dash_resumed_notice(h, x, u);
}

int dash_sub_matches(const struct hsub *u, const char *rid, const struct status_event *ev)
{
    if (u->kind == SUB_ID)
        return strcmp(u->id, rid) == 0;
    return ev != NULL && dash_broad_match(&u->f, ev->status ? ev->status : "",
                                          ev->origin_chain_id, ev->destination_chain_id);
}

static void on_replay(void *arg, const char *err, redisReply *r)
{
    struct op *op = arg;
    struct hub *h = op->h;
    struct hsess *x;
    struct hsub *u = dash_op_finish(op, &x);
    if (u == NULL)
        return;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        dash_gap(h, x, u, "unavailable", NULL);
        return;
    }
    int live = 0;
    struct store_events_iter it;
    struct store_event_entry e;
    size_t n = store_events_iter_range(&it, r);
    while (store_events_next(&it, &e)) {
        if (stream_id_cmp(e.sid, h->cursor) > 0) { /* the follower delivers it after live */
            live = 1;
            break;
        }
        if (e.rid != NULL && e.rec != NULL && (u->kind != SUB_ID || strcmp(e.rid, u->id) == 0)) {
            struct status_event ev;
            status_event_init(&ev);
            size_t len = 0;
            char *f = dash_encode_frame(h, e.rec, e.rec_len, 0, e.sid, &ev, &len);
            if (f != NULL && dash_sub_matches(u, e.rid, &ev)) {
                dash_send_text(h, x->id, e.rid, f, len);
                u->replayed++;
            }
            free(f);
            status_event_cleanup(&ev);
        }
        dash_str_set(&u->cursor, e.sid);
    }
    if (live || n < HUB_REPLAY_PAGE)
        finish_resume(h, x, u);
    else
        replay_page(h, x, u);
}

static void replay_page(struct hub *h, struct hsess *x, struct hsub *u)
{
    char from[SID_MAX + 1];
    snprintf(from, sizeof(from), "(%s", u->cursor);
    struct op *op = dash_op_new(h, x->id, u->no, NULL);
    h->pending++;
    if (store_events_range(h->c->store, from, "+", HUB_REPLAY_PAGE, on_replay, op) != 0) {
        h->pending--;
        free(op);
        dash_gap(h, x, u, "unavailable", NULL);
    }
}

static void on_resume_info(void *arg, const char *err, redisReply *r)
{
    struct op *op = arg;
    struct hub *h = op->h;
    struct hsess *x;
    struct hsub *u = dash_op_finish(op, &x);
    if (u == NULL)
        return;
    char last[SID_MAX] = "0-0", maxdel[SID_MAX] = "", first[SID_MAX] = "";
    if (err == store_err_server && r->str && strstr(r->str, "no such key") != NULL) {
        /* no stream yet: nothing was ever written or it is all gone */
    } else if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        dash_gap(h, x, u, "unavailable", NULL);
        return;
    } else {
        const char *v;
        if ((v = dash_reply_field(r, "last-generated-id", NULL)) != NULL)
            snprintf(last, sizeof(last), "%s", v);
        if ((v = dash_reply_field(r, "max-deleted-entry-id", NULL)) != NULL)
            snprintf(maxdel, sizeof(maxdel), "%s", v);
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            if (r->element[i]->str && strcmp(r->element[i]->str, "first-entry") == 0) {
                const redisReply *fe = r->element[i + 1];
                if (fe->type == REDIS_REPLY_ARRAY && fe->elements > 0 && fe->element[0]->str)
                    snprintf(first, sizeof(first), "%s", fe->element[0]->str);
            }
    }
    if (stream_id_cmp(u->from, last) > 0) {
        dash_gap(h, x, u, "unknown", first); /* not a cursor of this stream (Redis was reset?) */
        return;
    }
    /* events after the cursor were removed when the cursor is older than the oldest entry
     * left (trimming cuts the head; conservative: the cursor entry itself may have been
     * the last one cut), when XDEL removed a newer one (max-deleted-entry-id, Redis 7), or
     * when the stream is empty but had entries after it */
    int trimmed = (first[0] != '\0' && stream_id_cmp(u->from, first) < 0) ||
                  (maxdel[0] != '\0' && stream_id_cmp(u->from, maxdel) < 0) ||
                  (first[0] == '\0' && stream_id_cmp(u->from, last) < 0);
    if (trimmed) {
        dash_gap(h, x, u, "trimmed", first);
        return;
    }
    dash_str_set(&u->cursor, u->from);
    replay_page(h, x, u);
}

int dash_start_resume(struct hub *h, struct hsess *x, struct hsub *u)
{
    if (h->np > 1)
        return dash_parts_resume(h, x, u);
    struct op *op = dash_op_new(h, x->id, u->no, NULL);
    h->pending++;
    if (store_cmd(h->c->store, on_resume_info, op, "XINFO STREAM %s", h->k_events) != 0) {
        h->pending--;
        free(op);
        return -1;
    }
    return 0;
}

/* ---- the stream follower -------------------------------------------------------------------- */

static void follow(struct hub *h);

static void wake_waiters(struct hub *h, const char *sid)
{
    for (size_t i = 0; i < h->nwaiters;) {
        struct waiter *w = &h->waiters[i];
        if (stream_id_cmp(sid, w->cursor) <= 0) {
            i++;
            continue;
        }
        struct hsess *x = dash_sess_find(h, w->sess);
        struct hsub *u = x != NULL ? dash_sub_find(x, w->no) : NULL;
        h->waiters[i] = h->waiters[--h->nwaiters];
        if (u != NULL && u->state == SS_WAIT) {
            dash_go_live(h, x, u);
            dash_resumed_notice(h, x, u);
        }
    }
}

void dash_route(struct hub *h, const char *rid, size_t rid_len, const char *rec, size_t rec_len,
                const char *sid)
{
    h->events_seen++;
    if (rid == NULL || rec == NULL || rid_len > PROTO_MAX_ID)
        return;
    if (h->broad_live == 0 && !idmap_get(h->live_ids, rid, NULL))
        return; /* nobody here follows it: not even decoded */
    struct status_event ev;
    status_event_init(&ev);
    size_t len = 0;
    char *f = dash_encode_frame(h, rec, rec_len, 0, sid, &ev, &len);
    if (f != NULL) {
        struct xmsg *m = xmsg_new(XMSG_DASH_EVENT, 0, NULL, 0);
        m->shared = xbuf_new(f, len); /* one buffer for every recipient */
        snprintf(m->key, sizeof(m->key), "%s", rid);
        snprintf(m->status, sizeof(m->status), "%s", ev.status ? ev.status : "");
        m->origin_chain_id = ev.origin_chain_id;
        m->destination_chain_id = ev.destination_chain_id;
        xq_push(h->c->to_ws, m);
        h->events_routed++;
    }
    free(f);
    status_event_cleanup(&ev);
}

static void on_read(void *arg, const char *err, redisReply *r)
{
    struct hub *h = arg;
    if (dash_enter(h))
        return;
    h->reading = 0;
    if (err != NULL)
        return; /* errors: the next poll retries */
    struct store_events_iter it;
    struct store_event_entry e;
    size_t n = store_events_iter_read(&it, r); /* 0 on nil: nothing new */
    while (store_events_next(&it, &e)) {
        if (e.sid_len >= SID_MAX)
            continue;
        if (h->nwaiters > 0)
            wake_waiters(h, e.sid); /* before the entry: it is their first live event */
        dash_route(h, e.rid, e.rid_len, e.rec, e.rec_len, e.sid);
        snprintf(h->cursor, sizeof(h->cursor), "%s", e.sid);
    }
    if (n >= HUB_READ_COUNT)
        event_active(h->kick_ev, EV_TIMEOUT, 0); /* more waiting */
}

static void on_cursor(void *arg, const char *err, redisReply *r)
{
    struct hub *h = arg;
    if (dash_enter(h))
        return;
    h->cursor_checking = 0;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY)
        return;
    char last[SID_MAX] = "0-0";
    struct store_events_iter it;
    struct store_event_entry e;
    store_events_iter_range(&it, r);
    if (store_events_next(&it, &e) && e.sid_len < SID_MAX)
        snprintf(last, sizeof(last), "%s", e.sid);
    if (h->cursor[0] == '\0') {
        snprintf(h->cursor, sizeof(h->cursor), "%s", last);
        log_info("dashboard stream follower started", "stream_id=%s", h->cursor);
    } else if (stream_id_cmp(last, h->cursor) < 0) {
        log_warn("event stream is behind the dashboard cursor (Redis reset?): following from "
                 "its end", "cursor=%s stream_id=%s", h->cursor, last);
        snprintf(h->cursor, sizeof(h->cursor), "%s", last);
    }
    follow(h);
}

static void follow(struct hub *h)
{
    if (h->closing || h->reading || h->cursor_checking || !store_ready(h->c->store))
        return;
    if (h->np > 1) {
        dash_parts_follow(h);
        return;
    }
    if (h->cursor[0] == '\0') {
        h->cursor_checking = 1;
        h->pending++;
        if (store_events_last(h->c->store, on_cursor, h) != 0) {
            h->pending--;
            h->cursor_checking = 0;
        }
        return;
    }
    char cnt[16];
    snprintf(cnt, sizeof(cnt), "%d", HUB_READ_COUNT);
    h->reading = 1;
    h->pending++;
    if (store_cmd(h->c->store, on_read, h, "XREAD COUNT %s STREAMS %s %s", cnt, h->k_events,
                  h->cursor) != 0) {
        h->pending--;
        h->reading = 0;
    }
}

void dash_on_poll(evutil_socket_t fd, short what, void *arg)
{
    follow(arg);
}

void dash_on_ingest_event(void *arg, enum proto_verdict v, const struct status_event *ev,
                          const char *stream_id)
{
    struct hub *h = arg;
    if (v == PROTO_ACCEPT && !h->closing)
        event_active(h->kick_ev, EV_TIMEOUT, 0);
}

void dash_on_store_state(void *arg, int up)
{
    struct hub *h = arg;
    if (h->closing)
        return;
    if (up && h->cursor[0] != '\0' && !h->cursor_checking && h->np > 1) {
        dash_parts_recheck(h);
        return;
    }
    if (up && h->cursor[0] != '\0' && !h->cursor_checking) {
        /* re-check the cursor against the stream (a restarted Redis may be behind it) */
        h->cursor_checking = 1;
        h->pending++;
        if (store_events_last(h->c->store, on_cursor, h) != 0) {
            h->pending--;
            h->cursor_checking = 0;
        }
        return;
    }
    if (up)
        follow(h);
    else
        h->reading = 0; /* commands in flight complete with an error anyway */
}
