/* follow.c - see follow.h: the follower of the event stream, resume and gaps. The position
 * h->pos (one stream id per partition) and its text h->cursor are this file's; the reads are
 * store/stream.h's, one gathered answer per round whatever the partition count.
 * runs on: core thread. */
#include "relay/dash/follow.h"
#include "protocol/event.h"
#include "relay/common/idmap.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/dash/frames.h"
#include "relay/dash/history.h"
#include "relay/dash/limits.h"
#include "relay/dash/ops.h"
#include "relay/dash/table.h"
#include "relay/edge/dash_filter.h"
#include "store/facts.h"
#include "store/store.h"
#include "store/stream.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dash_follow_init(struct hub *h)
{
    h->np = store_partitions(h->c->store);
    h->pos = xcalloc(h->np, sizeof(*h->pos));
}

static void set_cursor_text(struct hub *h)
{
    svec_format(h->cursor, sizeof(h->cursor), h->pos, h->np);
}

/* u->from as np positions; 0, or -1 when it is not a vector of this deployment. */
static int from_of(const struct hub *h, const struct hsub *u, struct svec_pos *from)
{
    return u->from != NULL && svec_parse(u->from, from, h->np) == (int)h->np ? 0 : -1;
}

/* ---- notices ------------------------------------------------------------------------------ */

static void resumed_notice(struct hub *h, struct hsess *x, struct hsub *u)
{
    json_t *d = dash_sub_data(u);
    json_object_set_new(d, "lastEventId", json_string(u->from));
    json_object_set_new(d, "replayed", json_integer((json_int_t)u->replayed));
    json_object_set_new(d, "streamId", json_string(u->live_at));
    dash_send_json(h, x->id, NULL, json_pack("{s:s,s:o}", "type", "resumed", "data", d));
}

static void go_live_resumed(struct hub *h, struct hsess *x, struct hsub *u)
{
    dash_sub_go_live(h, x, u);
    resumed_notice(h, x, u);
}

void dash_gap(struct hub *h, struct hsess *x, struct hsub *u, const char *reason,
              const char *oldest)
{
    log_info("dashboard resume answered with a gap", "session=%llu from=%s reason=%s",
             (unsigned long long)x->id, u->from, reason);
    json_t *d = dash_sub_data(u);
    json_object_set_new(d, "lastEventId", json_string(u->from));
    json_object_set_new(d, "oldestStreamId", oldest && oldest[0] ? json_string(oldest)
                                                                  : json_null());
    json_object_set_new(d, "reason", json_string(reason));
    json_object_set_new(d, "message",
                        json_string("events after lastEventId cannot be replayed: a fresh "
                                    "snapshot follows"));
    dash_send_json(h, x->id, NULL, json_pack("{s:s,s:o}", "type", "gap", "data", d));
    dash_sub_go_live(h, x, u);
    dash_fresh_snapshot(h, x, u, HUB_SNAPSHOT_DEFAULT);
}

/* ---- resume: replay rounds --------------------------------------------------------------- */

/* One replay round of a subscription: a page of every stream after its replay vector. */
struct pround {
    struct op op;
    struct svec_pos *issue; /* h->pos when the round was sent */
    struct svec_pos *start; /* the replay vector the pages start after */
};

static void replay_round(struct hub *h, struct hsess *x, struct hsub *u);

static int sub_matches(const struct hsub *u, const char *rid, const struct status_event *ev,
                       const char *frame, size_t len)
{
    if (u->kind == SUB_ID) /* one request's status events */
        return (ev == NULL || ev->type == PROTO_EV_STATUS) && strcmp(u->id, rid) == 0;
    if (ev == NULL)
        return 0;
    struct dash_frame fr;
    dash_frame_init(&fr, frame, len, ev->status ? ev->status : "", rid, ev->origin_chain_id,
                    ev->destination_chain_id);
    dash_frame_type(&fr, ev->type);
    int r = dash_broad_match(&u->f, &fr);
    dash_frame_cleanup(&fr);
    return r;
}

/* Send u the entry e with streamId sid when it matches. */
static void replay_one(struct hub *h, struct hsess *x, struct hsub *u,
                       const struct store_stream_entry *e, const char *sid)
{
    if (e->rid == NULL || e->rec == NULL || (u->kind == SUB_ID && strcmp(e->rid, u->id) != 0))
        return;
    struct status_event ev;
    status_event_init(&ev);
    size_t len = 0;
    char *f = dash_encode_frame(h, e->rec, e->rec_len, 0, sid, NULL, &ev, &len);
    if (f != NULL && sub_matches(u, e->rid, &ev, f, len)) {
        dash_send_text(h, x->id, e->rid, f, len);
        u->replayed++;
    }
    free(f);
    status_event_cleanup(&ev);
}

/* Every partition replayed up to h->pos: live now, or wait for the follower when the client
 * saw more than this process has read. */
static void replay_finish(struct hub *h, struct hsess *x, struct hsub *u)
{
    struct svec_pos from[SVEC_MAX];
    if (from_of(h, u, from) == 0 && !svec_ge(h->pos, from, h->np)) {
        dash_waiter_add(h, x, u);
        return;
    }
    go_live_resumed(h, x, u);
}

/* Is the round over for every partition? A partition is when its page reached past h->pos
 * (over), or was short and covered h->pos: a short page holds everything the follower had
 * read when the round was sent (one connection per master answers in order); when the
 * follower read further since, another round catches up. */
static int round_complete(const struct hub *h, const struct pround *r,
                          const struct store_stream_result *res, const struct svec_pos *cur,
                          const int *over)
{
    for (unsigned p = 0; p < h->np; p++) {
        if (over[p])
            continue;
        if (res->count[p] >= HUB_REPLAY_PAGE)
            return 0;
        const struct svec_pos *cov =
            svec_pos_cmp(&r->issue[p], &cur[p]) > 0 ? &r->issue[p] : &cur[p];
        if (svec_pos_cmp(&h->pos[p], cov) > 0)
            return 0;
    }
    return 1;
}

static void on_round(void *arg, const struct store_stream_result *res)
{
    struct pround *r = arg;
    struct hub *h = r->op.h;
    struct hsess *x;
    struct hsub *u = dash_enter(h) ? NULL : dash_op_sub(&r->op, &x);
    if (u != NULL && res->failed) {
        dash_gap(h, x, u, "unavailable", NULL);
    } else if (u != NULL) {
        struct svec_pos cur[SVEC_MAX];
        int over[SVEC_MAX];
        char sid[SVEC_TEXT_MAX];
        memcpy(cur, r->start, h->np * sizeof(*cur));
        memset(over, 0, sizeof(over));
        for (size_t i = 0; i < res->n; i++) {
            const struct store_stream_entry *e = &res->e[i];
            if (over[e->part] || svec_pos_cmp(&e->at, &h->pos[e->part]) > 0) {
                over[e->part] = 1; /* the follower delivers it after live */
                continue;
            }
            cur[e->part] = e->at;
            svec_format(sid, sizeof(sid), cur, h->np);
            replay_one(h, x, u, e, sid);
        }
        svec_format(sid, sizeof(sid), cur, h->np);
        dash_str_set(&u->cursor, sid);
        if (round_complete(h, r, res, cur, over))
            replay_finish(h, x, u);
        else
            replay_round(h, x, u);
    }
    free(r->issue);
    free(r->start);
    free(r);
}

static void replay_round(struct hub *h, struct hsess *x, struct hsub *u)
{
    struct pround *r = xcalloc(1, sizeof(*r));
    r->op.h = h;
    r->op.sess = x->id;
    r->op.no = u->no;
    r->issue = xmalloc(h->np * sizeof(*r->issue));
    memcpy(r->issue, h->pos, h->np * sizeof(*r->issue));
    r->start = xcalloc(h->np, sizeof(*r->start));
    h->pending++;
    if (u->cursor == NULL || svec_parse(u->cursor, r->start, h->np) != (int)h->np ||
        store_stream_range(h->c->store, r->start, HUB_REPLAY_PAGE, on_round, r) != 0) {
        h->pending--;
        free(r->issue);
        free(r->start);
        free(r);
        dash_gap(h, x, u, "unavailable", NULL);
    }
}

/* ---- resume: the gap check ---------------------------------------------------------------- */

static void on_info(void *arg, const struct store_stream_result *res)
{
    struct op *op = arg;
    struct hub *h = op->h;
    struct hsess *x;
    struct hsub *u = dash_op_finish(op, &x);
    struct svec_pos from[SVEC_MAX], oldest[SVEC_MAX];
    if (u == NULL)
        return;
    if (res->failed || from_of(h, u, from) != 0) {
        dash_gap(h, x, u, "unavailable", NULL);
        return;
    }
    int any_first = 0;
    enum store_stream_gap g = store_stream_gap_check(res->info, h->np, from, oldest, &any_first);
    if (g != STORE_STREAM_GAP_NONE) {
        char old[SVEC_TEXT_MAX] = "";
        if (any_first)
            svec_format(old, sizeof(old), oldest, h->np);
        dash_gap(h, x, u, g == STORE_STREAM_GAP_UNKNOWN ? "unknown" : "trimmed", old);
        return;
    }
    dash_str_set(&u->cursor, u->from);
    replay_round(h, x, u);
}

int dash_start_resume(struct hub *h, struct hsess *x, struct hsub *u)
{
    struct op *op = dash_op_new(h, x->id, u->no, NULL);
    h->pending++;
    if (store_stream_info(h->c->store, on_info, op) != 0) {
        h->pending--;
        free(op);
        return -1;
    }
    return 0;
}

/* ---- the hold: the follower catches up before a snapshot or a replay ---------------- */

/* A held subscribe proceeds: a resume starts (gap check, replay up to the follower, live), a
 * fresh subscription goes live at the follower's cursor and takes its snapshot. */
static void hold_proceed(struct hub *h, struct hsess *x, struct hsub *u, int limit)
{
    if (u->from != NULL) {
        u->state = SS_REPLAY;
        if (dash_start_resume(h, x, u) != 0)
            dash_gap(h, x, u, "unavailable", NULL);
        return;
    }
    dash_sub_go_live(h, x, u);
    dash_fresh_snapshot(h, x, u, limit);
}

/* Proceed with every holder the follower caught up for - caught: the generation of a read
 * that came back short on every partition, so it held everything written before it was
 * sent; 0 none - or whose deadline passed (now_ms > 0: the poll). */
static void holds_check(struct hub *h, int64_t now_ms, uint64_t caught)
{
    size_t expired = 0;
    for (size_t i = 0; i < h->nholds;) {
        struct holder *w = &h->holds[i];
        struct hsess *x = dash_sess_find(h, w->sess);
        struct hsub *u = x != NULL && !x->closing ? dash_sub_find(x, w->no) : NULL;
        int late = now_ms > 0 && now_ms >= w->deadline_ms;
        if (u != NULL && u->state == SS_HOLD && !late && (caught == 0 || caught < w->need)) {
            i++;
            continue;
        }
        int limit = w->limit;
        dash_hold_del_at(h, i);
        if (u == NULL || u->state != SS_HOLD)
            continue;
        expired += late;
        hold_proceed(h, x, u, limit);
    }
    if (expired > 0) {
        h->c->metrics.dash_holds_expired += expired;
        log_warn("dashboard subscribes proceeded before the follower caught up (Redis slow?)",
                 "count=%zu cursor=%s", expired, h->cursor);
    }
}

void dash_hold(struct hub *h, struct hsess *x, struct hsub *u, int limit)
{
    if (h->cursor[0] == '\0' || !store_ready(h->c->store) ||
        (u->from == NULL && u->kind != SUB_ID && limit <= 0)) {
        hold_proceed(h, x, u, limit); /* nothing to wait for, or cannot: as before the hold */
        return;
    }
    if (dash_hold_add(h, x, u, limit, h->read_gen + 1, mono_ms() + HUB_HOLD_MS) == NULL) {
        /* HUB_HOLD_MAX held: goes ahead unheld, counted like an expired hold */
        h->c->metrics.dash_holds_expired++;
        hold_proceed(h, x, u, limit);
        return;
    }
    if (h->reading)
        h->hold_kick = 1; /* the read in flight may be older than this subscribe: one more */
    else
        event_active(h->kick_ev, EV_TIMEOUT, 0); /* read now, not at the next poll */
}

/* ---- the follower ---------------------------------------------------------------------- */

static void follow(struct hub *h);
static void recheck(struct hub *h);

/* Before routing entry e: waiters whose client has not seen e go live now when the follower
 * is at or past their cursor in every other partition and routed nothing after it meanwhile
 * (with one partition: at the first event after the cursor); otherwise they missed e and
 * replay again once the follower passed their cursor (waiters_after). */
static void waiters_before(struct hub *h, const struct store_stream_entry *e)
{
    for (size_t i = 0; i < h->nwaiters;) {
        struct waiter *w = &h->waiters[i];
        struct hsess *x = dash_sess_find(h, w->sess);
        struct hsub *u = x != NULL ? dash_sub_find(x, w->no) : NULL;
        struct svec_pos from[SVEC_MAX];
        if (u == NULL || u->state != SS_WAIT || from_of(h, u, from) != 0) {
            w->missed = 1; /* waiters_after decides */
            i++;
            continue;
        }
        if (svec_pos_cmp(&e->at, &from[e->part]) <= 0) {
            i++; /* the client saw it */
            continue;
        }
        struct svec_pos at_e = from[e->part];
        from[e->part] = h->pos[e->part]; /* the other partitions only */
        int others = svec_ge(h->pos, from, h->np);
        from[e->part] = at_e;
        if (!others || w->missed) {
            w->missed = 1;
            i++;
            continue;
        }
        h->waiters[i] = h->waiters[--h->nwaiters];
        go_live_resumed(h, x, u);
    }
}

/* After a round: waiters that missed events and whose cursor the follower passed (in every
 * partition) replay again from where their replay stopped, then go live. */
static void waiters_after(struct hub *h)
{
    for (size_t i = 0; i < h->nwaiters;) {
        struct waiter *w = &h->waiters[i];
        struct hsess *x = dash_sess_find(h, w->sess);
        struct hsub *u = x != NULL ? dash_sub_find(x, w->no) : NULL;
        struct svec_pos from[SVEC_MAX];
        if (u != NULL && u->state == SS_WAIT &&
            (!w->missed || (from_of(h, u, from) == 0 && !svec_ge(h->pos, from, h->np)))) {
            i++;
            continue;
        }
        h->waiters[i] = h->waiters[--h->nwaiters];
        if (u != NULL && u->state == SS_WAIT) {
            u->state = SS_REPLAY;
            replay_round(h, x, u);
        }
    }
}

/* Route one entry to the ws thread as a shared frame whose streamId is h->cursor (skipped
 * undecoded when nobody here follows its request); counts it as seen. */
static void route(struct hub *h, const struct store_stream_entry *e, const char *facts)
{
    h->events_seen++;
    if (e->rid == NULL || e->rec == NULL || e->rid_len > PROTO_MAX_ID)
        return;
    if (h->broad_live == 0 && !idmap_get(h->live_ids, e->rid, NULL))
        return; /* nobody here follows it: not even decoded */
    struct status_event ev;
    status_event_init(&ev);
    size_t len = 0;
    char *f = dash_encode_frame(h, e->rec, e->rec_len, 0, h->cursor, facts, &ev, &len);
    if (f != NULL) {
        struct xmsg *m = xmsg_new(XMSG_DASH_EVENT, 0, NULL, 0);
        m->shared = xbuf_new(f, len); /* one buffer for every recipient */
        snprintf(m->key, sizeof(m->key), "%s", e->rid);
        snprintf(m->status, sizeof(m->status), "%s", ev.status ? ev.status : "");
        m->origin_chain_id = ev.origin_chain_id;
        m->destination_chain_id = ev.destination_chain_id;
        m->ev_type = (int)ev.type; /* id subscriptions: status events; broad: filters.events */
        xq_push(h->c->to_ws, m);
        h->events_routed++;
    }
    free(f);
    status_event_cleanup(&ev);
}

/* Would route(e) send it anywhere now? */
static int followed(const struct hub *h, const struct store_stream_entry *e)
{
    return e->rid != NULL && e->rec != NULL && e->rid_len <= PROTO_MAX_ID &&
           (h->broad_live > 0 || idmap_get(h->live_ids, e->rid, NULL));
}

/* One round read, owned while the facts of its followed entries are read: the entries
 * (copied), and per entry its facts text (NULL: none, or not followed when read). */
struct fround {
    struct hub *h;
    struct store_stream_entry *e; /* rid and rec owned */
    char **facts;
    size_t n;
    unsigned np;
    int full;
    int caught;   /* every partition answered, none a full page: the streams' end as of
                     the read (what a held subscribe waits for) */
    uint64_t gen; /* h->read_gen of the read */
};

static void fround_free(struct fround *fr)
{
    for (size_t i = 0; i < fr->n; i++) {
        free((char *)fr->e[i].rid);
        free((char *)fr->e[i].rec);
        free(fr->facts[i]);
    }
    free(fr->e);
    free(fr->facts);
    free(fr);
}

/* Route a round in merged order, each entry with the vector after it as its streamId:
 * resuming from any frame's streamId replays exactly what came after it in every
 * partition. */
static void round_route(struct hub *h, struct fround *fr)
{
    h->reading = 0;
    for (size_t i = 0; i < fr->n; i++) {
        const struct store_stream_entry *e = &fr->e[i];
        if (h->nwaiters > 0)
            waiters_before(h, e); /* before the entry: it is their first live event */
        h->pos[e->part] = e->at;
        set_cursor_text(h);
        route(h, e, fr->facts[i]);
    }
    if (h->nwaiters > 0)
        waiters_after(h);
    int kick = fr->full; /* more waiting */
    if (h->nholds > 0) {
        holds_check(h, 0, fr->caught ? fr->gen : 0);
        kick |= h->hold_kick; /* a subscribe held since this read was sent: read again */
    }
    h->hold_kick = 0;
    if (h->recheck_after)
        recheck(h);
    else if (kick)
        event_active(h->kick_ev, EV_TIMEOUT, 0);
}

/* The facts each followed entry carries (store/facts.h): attached, then the round routed.
 * Without them (Redis error) the round goes without facts: frames are not kept. */
static void on_round_facts(void *arg, const char *err, char **texts, size_t n)
{
    struct fround *fr = arg;
    struct hub *h = fr->h;
    if (dash_enter(h)) {
        fround_free(fr);
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < fr->n && texts != NULL && m < n; i++)
        if (fr->facts[i] != NULL) { /* marked followed in on_read */
            free(fr->facts[i]);
            fr->facts[i] = texts[m];
            texts[m++] = NULL;
        }
    if (err != NULL || texts == NULL)
        for (size_t i = 0; i < fr->n; i++) {
            free(fr->facts[i]);
            fr->facts[i] = NULL;
        }
    round_route(h, fr);
    fround_free(fr);
}

static void on_read(void *arg, const struct store_stream_result *r)
{
    struct hub *h = arg;
    if (dash_enter(h))
        return;
    struct fround *fr = xcalloc(1, sizeof(*fr));
    fr->h = h;
    fr->n = r->n;
    fr->e = xcalloc(r->n + 1, sizeof(*fr->e));
    fr->facts = xcalloc(r->n + 1, sizeof(*fr->facts));
    for (unsigned p = 0; p < r->np; p++)
        fr->full |= r->count[p] >= HUB_READ_COUNT;
    fr->caught = !fr->full && !r->failed;
    fr->gen = h->read_gen;
    const char **ids = xcalloc(r->n + 1, sizeof(*ids));
    uint64_t *seqs = xcalloc(r->n + 1, sizeof(*seqs));
    size_t m = 0;
    for (size_t i = 0; i < r->n; i++) {
        struct store_stream_entry *e = &fr->e[i];
        *e = r->e[i];
        e->rid = r->e[i].rid ? xstrndup(r->e[i].rid, r->e[i].rid_len) : NULL;
        e->rec = r->e[i].rec ? xstrndup(r->e[i].rec, r->e[i].rec_len) : NULL;
        if (!followed(h, e))
            continue;
        struct status_event ev;
        struct proto_err pe = {0};
        status_event_init(&ev);
        if (proto_event_from_record(e->rec, e->rec_len, &ev, &pe) == 0) {
            fr->facts[i] = xstrdup(""); /* a mark: replaced by its facts, or NULL */
            ids[m] = e->rid;
            seqs[m++] = ev.seq;
        }
        status_event_cleanup(&ev);
    }
    int rc = m == 0 ? 1 : store_facts_at(h->c->store, ids, seqs, m, on_round_facts, fr);
    free(ids);
    free(seqs);
    if (rc == 0) {
        h->pending++; /* h->reading stays set until the round is routed */
        return;
    }
    for (size_t i = 0; i < fr->n; i++) { /* nothing followed, or Redis away: no facts */
        free(fr->facts[i]);
        fr->facts[i] = NULL;
    }
    round_route(h, fr);
    fround_free(fr);
}

/* Each stream's newest id: the start (the cursor starts at the end), or a re-check after
 * Redis came back that moves a position back to a stream that is behind it. */
static void on_newest(void *arg, const struct store_stream_result *r)
{
    struct hub *h = arg;
    if (dash_enter(h))
        return;
    h->cursor_checking = 0;
    if (h->cursor[0] == '\0') {
        for (unsigned p = 0; p < h->np; p++)
            if (!r->ok[p])
                return; /* the next poll tries again */
        memcpy(h->pos, r->newest, h->np * sizeof(*h->pos));
        set_cursor_text(h);
        log_info("dashboard stream follower started", "partitions=%u stream_id=%s", h->np,
                 h->cursor);
    } else {
        int behind = 0;
        char was[SVEC_TEXT_MAX];
        snprintf(was, sizeof(was), "%s", h->cursor);
        for (unsigned p = 0; p < h->np; p++)
            if (r->ok[p] && svec_pos_cmp(&r->newest[p], &h->pos[p]) < 0) {
                h->pos[p] = r->newest[p];
                behind = 1;
            }
        if (behind) {
            set_cursor_text(h);
            log_warn("event stream is behind the dashboard cursor (Redis reset?): following "
                     "from its end", "cursor=%s stream_id=%s", was, h->cursor);
        }
    }
    if (h->recheck_after)
        recheck(h);
    else
        follow(h); /* read at once once the cursor is known */
}

static void recheck(struct hub *h)
{
    if (h->closing)
        return;
    if (h->reading || h->cursor_checking) {
        h->recheck_after = 1;
        return;
    }
    h->recheck_after = 0;
    if (!store_ready(h->c->store))
        return;
    h->cursor_checking = 1;
    h->pending++;
    if (store_stream_newest(h->c->store, on_newest, h) != 0) {
        h->pending--;
        h->cursor_checking = 0;
    }
}

static void follow(struct hub *h)
{
    if (h->closing || h->reading || h->cursor_checking || !store_ready(h->c->store))
        return;
    if (h->cursor[0] == '\0') {
        recheck(h);
        return;
    }
    h->reading = 1;
    h->pending++;
    h->read_gen++;
    if (store_stream_read(h->c->store, h->pos, HUB_READ_COUNT, on_read, h) != 0) {
        h->pending--;
        h->reading = 0;
    }
}

void dash_on_poll(evutil_socket_t fd, short what, void *arg)
{
    struct hub *h = arg;
    if (h->nholds > 0 && !h->closing)
        holds_check(h, mono_ms(), 0); /* deadlines */
    follow(h);
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
    if (h->closing || !up)
        return; /* commands in flight complete with an error anyway */
    if (h->cursor[0] != '\0')
        recheck(h); /* a restarted Redis may be behind the cursor */
    else
        follow(h);
}
