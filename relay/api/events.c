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
#include "protocol/rest_req.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "store/events.h"
#include "store/keys.h"
#include "store/store.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
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
static json_t *event_json(const struct store_event_entry *e)
{
    if (e->rec == NULL)
        return NULL;
    struct status_event ev;
    struct proto_err perr;
    memset(&perr, 0, sizeof(perr));
    if (unreadable(store_event_decode(e, &ev, &perr), &perr, e->sid) != 0) {
        status_event_cleanup(&ev);
        return NULL;
    }
    json_t *o = json_object();
    if (o != NULL) {
        json_object_set_new(o, "streamId", json_stringn(e->sid, e->sid_len));
        json_object_set_new(o, "eventId", json_string(ev.event_id));
        json_object_set_new(o, "requestId",
                            ev.request_id ? json_string(ev.request_id) : json_null());
        json_object_set_new(o, "seq", json_integer((json_int_t)ev.seq));
        json_object_set_new(o, "status", ev.status ? json_string(ev.status) : json_null());
        json_object_set_new(o, "previousStatus",
                            ev.prev_status ? json_string(ev.prev_status) : json_null());
        json_object_set_new(o, "source", json_string(proto_source_name(ev.source)));
        json_object_set_new(o, "createdAt", json_integer(ev.created_at));
        json_t *data = event_data(&ev);
        json_object_set_new(o, "data", data != NULL ? data : json_null());
    }
    status_event_cleanup(&ev);
    return o;
}

/* ---- GET /v1/events?after=&requestId=&limit= ------------------------------------------------- */

/* Stream id "ms-seq" or "ms" into parts (each up to 20 digits, fitting uint64). */
static void on_events(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        api_reply_unavailable(x, "cannot read events");
        return;
    }
    json_t *list = json_array();
    const char *last = NULL;
    struct store_events_iter it;
    struct store_event_entry e;
    store_events_iter_range(&it, r);
    while (store_events_next(&it, &e)) {
        last = e.sid; /* an unreadable entry is skipped, not re-read */
        json_t *o = event_json(&e);
        if (o != NULL)
            json_array_append_new(list, o);
    }
    json_t *cur = last != NULL          ? json_string(last)
                  : x->after[0] != '\0' ? json_string(x->after)
                                        : json_null();
    api_reply_json(x, 200, json_pack("{s:o,s:o}", "events", list, "cursor", cur));
}

/* after=$: nothing now, the cursor is the newest stream id (tail from here). */
static void on_events_last(void *arg, const char *err, redisReply *r)
{
    struct ctx *x = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        api_reply_unavailable(x, "cannot read events");
        return;
    }
    const char *last = "0-0";
    struct store_events_iter it;
    struct store_event_entry e;
    store_events_iter_range(&it, r);
    if (store_events_next(&it, &e))
        last = e.sid;
    api_reply_json(x, 200, json_pack("{s:[],s:s}", "events", "cursor", last));
}

/* ---- the event stream with several partitions (docs/partitions.md) -------------------------
 * Each partition has its own stream. A page reads every stream after its own position and
 * merges by (ms, seq, partition); the order is exact within a partition (so per request) and
 * by stream-id time across partitions. The cursor is the vector of positions,
 * "<sid0>,<sid1>,..." (one per partition), given back as "after"; each event carries as
 * "streamId" the vector after it (so "after" = any event's streamId resumes right after that
 * event) and its "partition". */
struct ev_pos {
    uint64_t ms, seq;
};

struct ev_merge {
    struct ctx *x;
    unsigned np, pending;
    int failed, tail, asked; /* tail: after=$; asked: an "after" was given */
    struct ev_pos *pos;      /* np positions: the input cursor, then the output one */
    size_t n, cap;
    struct ev_item {
        struct ev_pos at;
        unsigned part;
        json_t *obj; /* NULL: an unreadable entry (skipped, but the cursor passes it) */
    } *e;
};

static void em_free(struct ev_merge *m)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].obj != NULL)
            json_decref(m->e[i].obj);
    free(m->e);
    free(m->pos);
    free(m);
}

static int em_cmp(const void *a, const void *b)
{
    const struct ev_item *x = a, *y = b;
    if (x->at.ms != y->at.ms)
        return x->at.ms < y->at.ms ? -1 : 1;
    if (x->at.seq != y->at.seq)
        return x->at.seq < y->at.seq ? -1 : 1;
    return x->part < y->part ? -1 : x->part > y->part;
}

static json_t *em_cursor(const struct ev_merge *m)
{
    size_t cap = (size_t)m->np * 44 + 1, len = 0;
    char *s = xmalloc(cap);
    s[0] = '\0';
    for (unsigned p = 0; p < m->np; p++)
        len += (size_t)snprintf(s + len, cap - len, "%s%llu-%llu", p ? "," : "",
                                (unsigned long long)m->pos[p].ms,
                                (unsigned long long)m->pos[p].seq);
    json_t *j = json_string(s);
    free(s);
    return j;
}

static void em_done(struct ev_merge *m)
{
    if (--m->pending > 0)
        return;
    struct ctx *x = m->x;
    if (m->failed) {
        api_reply_unavailable(x, "cannot read events");
        em_free(m);
        return;
    }
    if (m->n > 1)
        qsort(m->e, m->n, sizeof(*m->e), em_cmp);
    json_t *list = json_array();
    size_t take = m->tail || m->n < (size_t)x->limit ? m->n : (size_t)x->limit;
    for (size_t i = 0; i < take; i++) {
        m->pos[m->e[i].part] = m->e[i].at;
        if (!m->tail && m->e[i].obj != NULL) { /* its streamId: the vector after it */
            json_object_set_new(m->e[i].obj, "streamId", em_cursor(m));
            json_array_append(list, m->e[i].obj);
        }
    }
    json_t *cur = take == 0 && !m->asked && !m->tail ? json_null() : em_cursor(m);
    api_reply_json(x, 200, json_pack("{s:o,s:o}", "events", list, "cursor", cur));
    em_free(m);
}

struct em_read {
    struct ev_merge *m;
    unsigned part;
};

static void on_em_page(void *arg, const char *err, redisReply *r)
{
    struct em_read *rd = arg;
    struct ev_merge *m = rd->m;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        m->failed = 1;
    } else {
        struct store_events_iter it;
        struct store_event_entry e;
        store_events_iter_range(&it, r);
        while (store_events_next(&it, &e)) {
            struct ev_pos at;
            int has_seq = 0;
            if (proto_rest_stream_id(e.sid, &at.ms, &at.seq, &has_seq) != 0 || !has_seq)
                continue;
            if (m->n == m->cap) {
                m->cap = m->cap ? 2 * m->cap : 64;
                m->e = xrealloc(m->e, m->cap * sizeof(*m->e));
            }
            json_t *o = m->tail ? NULL : event_json(&e);
            if (o != NULL)
                json_object_set_new(o, "partition", json_integer(rd->part));
            m->e[m->n++] = (struct ev_item){at, rd->part, o};
        }
    }
    free(rd);
    em_done(m);
}

/* after: NULL/"" (from the start), "$" (the newest positions), a bare ms (after it, in every
 * partition) or the vector cursor. Returns 0, or -1 after a 400. */
static int events_parts(struct ctx *x, const char *after)
{
    struct core *c = x->api->c;
    struct ev_merge *m = xcalloc(1, sizeof(*m));
    m->x = x;
    m->np = store_partitions(c->store);
    m->pos = xcalloc(m->np, sizeof(*m->pos));
    m->tail = after != NULL && strcmp(after, "$") == 0;
    m->asked = after != NULL && after[0] != '\0';
    uint64_t ms, seq;
    int has_seq = 0;
    if (m->asked && !m->tail) {
        const char *p = after;
        unsigned k = 0;
        char one[48];
        int bad = 0;
        while (!bad && k < m->np) {
            size_t l = strcspn(p, ",");
            if (l == 0 || l >= sizeof(one)) {
                bad = 1;
                break;
            }
            memcpy(one, p, l);
            one[l] = '\0';
            if (proto_rest_stream_id(one, &ms, &seq, &has_seq) != 0) {
                bad = 1;
                break;
            }
            m->pos[k++] = (struct ev_pos){ms, has_seq ? seq : UINT64_MAX};
            p += l;
            if (*p == ',')
                p++;
            else
                break;
        }
        if (!bad && k == 1 && !has_seq && *p == '\0') { /* a bare ms: in every partition */
            for (unsigned i = 1; i < m->np; i++)
                m->pos[i] = m->pos[0];
            k = m->np;
        }
        if (bad || k != m->np || *p != '\0') {
            em_free(m);
            api_reply_error(x, 400, "invalid_parameter", "after",
                            "after must be the cursor of an earlier page (%u stream ids "
                            "\"<ms>-<seq>\" separated by commas: one per partition), a unix "
                            "ms timestamp or \"$\"", store_partitions(c->store));
            return -1;
        }
    }
    m->pending = 1; /* this loop's own share */
    for (unsigned p = 0; p < m->np; p++) {
        const char *tag = store_part_tag(c->store, p);
        struct em_read *rd = xcalloc(1, sizeof(*rd));
        rd->m = m;
        rd->part = p;
        char start[48] = "-";
        if (m->asked && !m->tail) {
            const struct ev_pos *a = &m->pos[p];
            if (a->seq < UINT64_MAX)
                snprintf(start, sizeof(start), "%llu-%llu", (unsigned long long)a->ms,
                         (unsigned long long)a->seq + 1);
            else if (a->ms < UINT64_MAX)
                snprintf(start, sizeof(start), "%llu-0", (unsigned long long)a->ms + 1);
            else
                snprintf(start, sizeof(start), "+"); /* nothing after the largest id */
        }
        m->pending++;
        int rc = m->tail ? store_events_last_in(c->store, tag, on_em_page, rd)
                         : store_events_range_in(c->store, tag, start, "+", x->limit, on_em_page,
                                                 rd);
        if (rc != 0) {
            m->pending--;
            m->failed = 1;
            free(rd);
        }
    }
    em_done(m);
    return 0;
}

void api_h_events(struct ctx *x)
{
    if (api_parse_limit(x, EVENTS_LIMIT_DEFAULT, EVENTS_LIMIT_MAX) != 0)
        return;
    const char *after = api_query_get(x, "after"), *rid = api_query_get(x, "requestId");
    if (rid != NULL && api_take_id(x, rid, strlen(rid), "requestId") != 0)
        return;
    if (rid == NULL && store_partitions(x->api->c->store) > 1) { /* every partition's stream */
        events_parts(x, after);
        return;
    }
    uint64_t ms = 0, seq = 0;
    int has_seq = 0, tail = after != NULL && strcmp(after, "$") == 0;
    if (after != NULL && after[0] != '\0' && !tail) {
        if (proto_rest_stream_id(after, &ms, &seq, &has_seq) != 0) {
            api_reply_error(x, 400, "invalid_parameter", "after",
                            "after must be a streamId (\"<ms>-<seq>\"), a unix ms "
                            "timestamp or \"$\"");
            return;
        }
        if (!has_seq) /* a bare ms: everything of that millisecond is "before" */
            seq = UINT64_MAX;
        snprintf(x->after, sizeof(x->after), "%llu-%llu", (unsigned long long)ms,
                 (unsigned long long)seq);
        if (ms == UINT64_MAX && seq == UINT64_MAX) { /* the largest id: nothing comes after */
            api_reply_json(x, 200, json_pack("{s:[],s:s}", "events", "cursor", x->after));
            return;
        }
    }
    struct core *c = x->api->c;
    const char *tag = store_tag(c->store);
    int rc;
    if (tail) {
        rc = store_events_last(c->store, on_events_last, x);
    } else if (rid != NULL) {
        char k_tl[KEY_MAX], k_ev[KEY_MAX], cnt[16], a_ms[24] = "", a_seq[24] = "0";
        tag = store_tag_of(c->store, x->id); /* the request's partition */
        key_build(k_tl, sizeof(k_tl), tag, "tl", x->id, NULL);
        key_build(k_ev, sizeof(k_ev), tag, "events", NULL, NULL);
        snprintf(cnt, sizeof(cnt), "%d", x->limit);
        if (x->after[0] != '\0') {
            snprintf(a_ms, sizeof(a_ms), "%llu", (unsigned long long)ms);
            snprintf(a_seq, sizeof(a_seq), "%llu", (unsigned long long)seq);
        }
        const char *argv[] = {k_tl, k_ev, a_ms, a_seq, cnt};
        rc = store_eval(c->store, &x->api->events_sc, on_events, x, 2, 5, argv, NULL);
    } else {
        /* exclusive start without "(" (Redis < 6.2): the successor of the cursor's id */
        char start[48] = "-";
        if (x->after[0] != '\0') {
            if (seq < UINT64_MAX)
                snprintf(start, sizeof(start), "%llu-%llu", (unsigned long long)ms,
                         (unsigned long long)seq + 1);
            else
                snprintf(start, sizeof(start), "%llu-0", (unsigned long long)ms + 1);
        }
        rc = store_events_range(c->store, start, "+", x->limit, on_events, x);
    }
    if (rc != 0)
        api_reply_unavailable(x, "cannot read events");
}
