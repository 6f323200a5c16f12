/* follow_parts.c - the event stream of a deployment of N > 1 partitions (docs/partitions.md),
 * for follow.c (which hands over when h->np > 1). Each partition k has its own stream
 * {P:p<k>}:events, possibly on its own cluster master, so every read is one command per
 * partition and the answers are merged by (ms, seq, partition).
 *
 * Follower. h->pos holds the position in each stream; h->cursor is its vector text
 * "<sid0>,<sid1>,..." (protocol/stream_vec.h). A round sends one XREAD per partition after
 * its position, copies the entries out of the replies, and once every answer is in, routes
 * them in merged order, each with the vector AFTER it as its streamId: resuming from any
 * frame's streamId replays exactly what came after it in every partition. The first round
 * reads each stream's newest id (the cursor starts at the end); a re-check after Redis came
 * back moves a position back to a stream that is behind it.
 *
 * Resume. XINFO STREAM per partition: a client component newer than that stream's last id
 * ("unknown"), or events after it trimmed ("trimmed", follow.c's rule, skipped for a stream
 * nothing was ever removed from) in any partition -> dash_gap. Then
 * replay rounds: one XRANGE page per partition after the subscription's replay vector,
 * merged, each entry up to h->pos sent with the replay vector after it. A partition is done
 * when its page reached past h->pos, or was short and covered h->pos: a short page covers
 * everything the follower had read when the round was sent (one connection per master
 * answers in order); when the follower read further since, another round catches up. When
 * every partition is done in one round the subscription goes live at h->cursor, in the
 * same callback. A client vector ahead of h->pos in some partition waits (a waiter) until
 * the follower passes it, then replays again from where it stopped (events of the other
 * partitions read meanwhile were not routed to it), then goes live.
 * runs on: core thread. */
#include "relay/dash/internal.h"
#include "protocol/event.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "store/events.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- entries copied out of replies ---------------------------------------------------- */

struct pent {
    struct svec_pos at;
    unsigned part;
    char *rid, *rec; /* copies, NULL when the entry has none */
    size_t rid_len, rec_len;
};

struct pbatch {
    struct pent *e;
    size_t n, cap;
};

static char *copy_n(const char *s, size_t n)
{
    if (s == NULL)
        return NULL;
    char *c = xmalloc(n + 1);
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

/* The entry's id as a position; -1 when it is not a stream id. */
static int entry_at(const struct store_event_entry *e, struct svec_pos *at)
{
    if (e->sid_len >= SVEC_ID_TEXT)
        return -1;
    return proto_stream_id_parse(e->sid, &at->ms, &at->seq);
}

static void batch_add(struct pbatch *b, unsigned part, const struct svec_pos *at,
                      const struct store_event_entry *e)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->e = xrealloc(b->e, b->cap * sizeof(*b->e));
    }
    struct pent *p = &b->e[b->n++];
    p->at = *at;
    p->part = part;
    p->rid = copy_n(e->rid, e->rid_len);
    p->rid_len = e->rid_len;
    p->rec = copy_n(e->rec, e->rec_len);
    p->rec_len = e->rec_len;
}

static void batch_cleanup(struct pbatch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->e[i].rid);
        free(b->e[i].rec);
    }
    free(b->e);
    memset(b, 0, sizeof(*b));
}

static int pent_cmp(const void *a, const void *b)
{
    const struct pent *x = a, *y = b;
    int c = svec_pos_cmp(&x->at, &y->at);
    if (c != 0)
        return c;
    return x->part < y->part ? -1 : x->part > y->part;
}

static void batch_sort(struct pbatch *b)
{
    if (b->n > 1)
        qsort(b->e, b->n, sizeof(*b->e), pent_cmp);
}

static void part_key(const struct hub *h, unsigned p, char *k, size_t n)
{
    key_build(k, n, store_part_tag(h->c->store, p), "events", NULL, NULL);
}

/* One command's argument: who waits for it and which partition it read. */
struct parg {
    void *owner;
    unsigned part;
};

static struct parg *parg_new(void *owner, unsigned part)
{
    struct parg *a = xcalloc(1, sizeof(*a));
    a->owner = owner;
    a->part = part;
    return a;
}

/* ---- the follower ------------------------------------------------------------------------- */

enum pread_mode { PREAD_NEW, PREAD_CURSOR };

struct dash_pread {
    struct hub *h;
    enum pread_mode mode;
    unsigned pending;        /* answers still to come, + 1 while sending */
    int full;                /* a page was full: read again at once */
    int recheck_after;       /* Redis came back during the round: re-check the cursor next */
    int *ok;                 /* per partition: answered */
    struct svec_pos *newest; /* PREAD_CURSOR: each stream's newest id (0-0: empty) */
    struct pbatch b;         /* PREAD_NEW: the entries read */
};

static void pread_free(struct dash_pread *r)
{
    if (r == NULL)
        return;
    batch_cleanup(&r->b);
    free(r->ok);
    free(r->newest);
    free(r);
}

void dash_parts_free(struct hub *h)
{
    pread_free(h->pread);
    h->pread = NULL;
}

static void start_round(struct hub *h, enum pread_mode mode);
static void replay_round(struct hub *h, struct hsess *x, struct hsub *u);

static void set_cursor_text(struct hub *h)
{
    svec_format(h->cursor, sizeof(h->cursor), h->pos, h->np);
}

/* Waiters whose client cursor the follower passed (in every partition) replay again from
 * where their replay stopped, then go live. */
static void wake_waiters(struct hub *h)
{
    for (size_t i = 0; i < h->nwaiters;) {
        struct waiter *w = &h->waiters[i];
        struct hsess *x = dash_sess_find(h, w->sess);
        struct hsub *u = x != NULL ? dash_sub_find(x, w->no) : NULL;
        struct svec_pos from[SVEC_MAX];
        if (u != NULL && u->state == SS_WAIT && u->from != NULL &&
            svec_parse(u->from, from, h->np) == (int)h->np && !svec_ge(h->pos, from, h->np)) {
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

static void finish_new(struct hub *h, struct dash_pread *r)
{
    batch_sort(&r->b);
    for (size_t i = 0; i < r->b.n; i++) {
        const struct pent *e = &r->b.e[i];
        h->pos[e->part] = e->at;
        set_cursor_text(h);
        dash_route(h, e->rid, e->rid_len, e->rec, e->rec_len, h->cursor);
    }
    if (h->nwaiters > 0)
        wake_waiters(h);
    if (r->full)
        event_active(h->kick_ev, EV_TIMEOUT, 0); /* more waiting */
}

static void finish_cursor(struct hub *h, struct dash_pread *r)
{
    if (h->cursor[0] == '\0') {
        for (unsigned p = 0; p < h->np; p++)
            if (!r->ok[p])
                return; /* the next poll tries again */
        memcpy(h->pos, r->newest, h->np * sizeof(*h->pos));
        set_cursor_text(h);
        log_info("dashboard stream follower started", "partitions=%u stream_id=%s", h->np,
                 h->cursor);
        return;
    }
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
        log_warn("event stream is behind the dashboard cursor (Redis reset?): following from "
                 "its end", "cursor=%s stream_id=%s", was, h->cursor);
    }
}

static void round_done(struct hub *h)
{
    struct dash_pread *r = h->pread;
    if (--r->pending > 0)
        return;
    h->pread = NULL;
    if (r->mode == PREAD_NEW) {
        h->reading = 0;
        finish_new(h, r);
    } else {
        h->cursor_checking = 0;
        finish_cursor(h, r);
    }
    int recheck = r->recheck_after, after_cursor = r->mode == PREAD_CURSOR;
    pread_free(r);
    if (recheck)
        dash_parts_recheck(h);
    else if (after_cursor && h->cursor[0] != '\0')
        dash_parts_follow(h); /* as follow.c: read at once once the cursor is known */
}

static void on_pread(void *arg, const char *err, redisReply *reply)
{
    struct parg *a = arg;
    struct hub *h = a->owner;
    unsigned p = a->part;
    free(a);
    if (dash_enter(h))
        return; /* the hub frees the round with itself */
    struct dash_pread *r = h->pread;
    if (err == NULL && (reply->type == REDIS_REPLY_ARRAY || reply->type == REDIS_REPLY_NIL)) {
        struct store_events_iter it;
        struct store_event_entry e;
        size_t n = r->mode == PREAD_NEW ? store_events_iter_read(&it, reply)
                                        : store_events_iter_range(&it, reply);
        r->ok[p] = 1;
        while (store_events_next(&it, &e)) {
            struct svec_pos at;
            if (entry_at(&e, &at) != 0)
                continue;
            if (r->mode == PREAD_NEW) {
                batch_add(&r->b, p, &at, &e);
            } else {
                r->newest[p] = at;
                break;
            }
        }
        if (r->mode == PREAD_NEW && n >= HUB_READ_COUNT)
            r->full = 1;
    }
    round_done(h);
}

static void start_round(struct hub *h, enum pread_mode mode)
{
    struct dash_pread *r = xcalloc(1, sizeof(*r));
    r->h = h;
    r->mode = mode;
    r->ok = xcalloc(h->np, sizeof(*r->ok));
    r->newest = xcalloc(h->np, sizeof(*r->newest));
    r->pending = 1; /* ours until every command is sent */
    h->pread = r;
    if (mode == PREAD_NEW)
        h->reading = 1;
    else
        h->cursor_checking = 1;
    char cnt[16];
    snprintf(cnt, sizeof(cnt), "%d", HUB_READ_COUNT);
    for (unsigned p = 0; p < h->np; p++) {
        struct parg *a = parg_new(h, p);
        int rc;
        h->pending++;
        r->pending++;
        if (mode == PREAD_NEW) {
            char k[KEY_MAX], at[SVEC_ID_TEXT];
            part_key(h, p, k, sizeof(k));
            svec_format(at, sizeof(at), &h->pos[p], 1);
            rc = store_cmd(h->c->store, on_pread, a, "XREAD COUNT %s STREAMS %s %s", cnt, k, at);
        } else {
            rc = store_events_last_in(h->c->store, store_part_tag(h->c->store, p), on_pread, a);
        }
        if (rc != 0) {
            h->pending--;
            r->pending--;
            free(a);
        }
    }
    round_done(h);
}

void dash_parts_follow(struct hub *h)
{
    if (h->closing || h->pread != NULL || !store_ready(h->c->store))
        return;
    start_round(h, h->cursor[0] == '\0' ? PREAD_CURSOR : PREAD_NEW);
}

void dash_parts_recheck(struct hub *h)
{
    if (h->closing)
        return;
    if (h->pread != NULL) {
        h->pread->recheck_after = 1;
        return;
    }
    if (store_ready(h->c->store))
        start_round(h, PREAD_CURSOR);
}

/* ---- resume: the gap check ------------------------------------------------------------------ */

struct pinfo {
    struct op op;
    unsigned pending;
    int failed;
    struct pinfo_part {
        struct svec_pos last, maxdel, first;
        int has_maxdel, has_first;
        int whole; /* nothing was ever removed (Redis 7: entries-added = length) */
    } *pp;
};

static void pinfo_free(struct pinfo *pi)
{
    free(pi->pp);
    free(pi);
}

static void read_pos(const char *s, struct svec_pos *out, int *has)
{
    if (s != NULL && proto_stream_id_parse(s, &out->ms, &out->seq) == 0 && has != NULL)
        *has = 1;
}

static void info_done(struct pinfo *pi)
{
    if (--pi->pending > 0)
        return;
    struct hub *h = pi->op.h;
    struct hsess *x;
    struct hsub *u = dash_op_sub(&pi->op, &x);
    struct svec_pos from[SVEC_MAX];
    if (u == NULL) {
        pinfo_free(pi);
        return;
    }
    if (pi->failed || svec_parse(u->from, from, h->np) != (int)h->np) {
        pinfo_free(pi);
        dash_gap(h, x, u, "unavailable", NULL);
        return;
    }
    int unknown = 0, trimmed = 0, any_first = 0;
    struct svec_pos oldest[SVEC_MAX];
    for (unsigned p = 0; p < h->np; p++) {
        const struct pinfo_part *q = &pi->pp[p];
        oldest[p] = q->has_first ? q->first : (struct svec_pos){0, 0};
        any_first |= q->has_first;
        if (svec_pos_cmp(&from[p], &q->last) > 0)
            unknown = 1; /* not a cursor of this stream (Redis was reset?) */
        /* as follow.c: older than the oldest entry left, older than an XDEL'd one, or an
         * emptied stream that had entries after it */
        else if (!q->whole && ((q->has_first && svec_pos_cmp(&from[p], &q->first) < 0) ||
                               (q->has_maxdel && svec_pos_cmp(&from[p], &q->maxdel) < 0) ||
                               (!q->has_first && svec_pos_cmp(&from[p], &q->last) < 0)))
            trimmed = 1;
    }
    pinfo_free(pi);
    if (unknown || trimmed) {
        char old[SVEC_TEXT_MAX] = "";
        if (any_first)
            svec_format(old, sizeof(old), oldest, h->np);
        dash_gap(h, x, u, unknown ? "unknown" : "trimmed", old);
        return;
    }
    dash_str_set(&u->cursor, u->from);
    replay_round(h, x, u);
}

static void on_info(void *arg, const char *err, redisReply *r)
{
    struct parg *a = arg;
    struct pinfo *pi = a->owner;
    unsigned p = a->part;
    free(a);
    if (dash_enter(pi->op.h)) {
        if (--pi->pending == 0)
            pinfo_free(pi);
        return;
    }
    struct pinfo_part *q = &pi->pp[p];
    if (err == store_err_server && r->str && strstr(r->str, "no such key") != NULL) {
        /* no stream yet: nothing was ever written or it is all gone (last: 0-0) */
    } else if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        pi->failed = 1;
    } else {
        read_pos(dash_reply_field(r, "last-generated-id", NULL), &q->last, NULL);
        read_pos(dash_reply_field(r, "max-deleted-entry-id", NULL), &q->maxdel, &q->has_maxdel);
        /* a stream nothing was removed from has every entry after any cursor: a component
         * "0-0" (nothing read from a partition that was empty when the follower started) is
         * not a gap then */
        const redisReply *added = NULL, *length = NULL;
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            if (r->element[i]->str && strcmp(r->element[i]->str, "entries-added") == 0)
                added = r->element[i + 1];
            else if (r->element[i]->str && strcmp(r->element[i]->str, "length") == 0)
                length = r->element[i + 1];
        q->whole = added != NULL && length != NULL && added->type == REDIS_REPLY_INTEGER &&
                   length->type == REDIS_REPLY_INTEGER && added->integer == length->integer;
        for (size_t i = 0; i + 1 < r->elements; i += 2)
            if (r->element[i]->str && strcmp(r->element[i]->str, "first-entry") == 0) {
                const redisReply *fe = r->element[i + 1];
                if (fe->type == REDIS_REPLY_ARRAY && fe->elements > 0 && fe->element[0]->str)
                    read_pos(fe->element[0]->str, &q->first, &q->has_first);
            }
    }
    info_done(pi);
}

int dash_parts_resume(struct hub *h, struct hsess *x, struct hsub *u)
{
    struct pinfo *pi = xcalloc(1, sizeof(*pi));
    pi->op.h = h;
    pi->op.sess = x->id;
    pi->op.no = u->no;
    pi->pp = xcalloc(h->np, sizeof(*pi->pp));
    pi->pending = 1;
    unsigned sent = 0;
    for (unsigned p = 0; p < h->np; p++) {
        char k[KEY_MAX];
        part_key(h, p, k, sizeof(k));
        struct parg *a = parg_new(pi, p);
        h->pending++;
        pi->pending++;
        if (store_cmd(h->c->store, on_info, a, "XINFO STREAM %s", k) != 0) {
            h->pending--;
            pi->pending--;
            pi->failed = 1;
            free(a);
            continue;
        }
        sent++;
    }
    if (sent == 0) {
        pinfo_free(pi);
        return -1;
    }
    info_done(pi);
    return 0;
}

/* ---- resume: replay rounds --------------------------------------------------------------- */

struct pround {
    struct op op;
    unsigned pending;
    int failed;
    struct svec_pos *issue; /* h->pos when the round was sent */
    struct svec_pos *start; /* the replay vector the pages start after */
    size_t *count;          /* entries of each partition's page */
    struct pbatch b;
};

static void pround_free(struct pround *r)
{
    batch_cleanup(&r->b);
    free(r->issue);
    free(r->start);
    free(r->count);
    free(r);
}

/* Every partition replayed up to h->pos: live now, or wait for the follower when the client
 * saw more than this process has read. */
static void replay_finish(struct hub *h, struct hsess *x, struct hsub *u)
{
    struct svec_pos from[SVEC_MAX];
    if (svec_parse(u->from, from, h->np) == (int)h->np && !svec_ge(h->pos, from, h->np)) {
        u->state = SS_WAIT;
        h->waiters = xrealloc(h->waiters, (h->nwaiters + 1) * sizeof(*h->waiters));
        struct waiter *w = &h->waiters[h->nwaiters++];
        w->sess = x->id;
        w->no = u->no;
        w->cursor[0] = '\0'; /* u->from is the cursor to pass */
        return;
    }
    dash_go_live(h, x, u);
    dash_resumed_notice(h, x, u);
}

static void pround_done(struct pround *r)
{
    if (--r->pending > 0)
        return;
    struct hub *h = r->op.h;
    struct hsess *x;
    struct hsub *u = dash_op_sub(&r->op, &x);
    if (u == NULL) {
        pround_free(r);
        return;
    }
    if (r->failed) {
        pround_free(r);
        dash_gap(h, x, u, "unavailable", NULL);
        return;
    }
    batch_sort(&r->b);
    struct svec_pos cur[SVEC_MAX];
    int over[SVEC_MAX];
    char sid[SVEC_TEXT_MAX];
    memcpy(cur, r->start, h->np * sizeof(*cur));
    memset(over, 0, sizeof(over));
    for (size_t i = 0; i < r->b.n; i++) {
        const struct pent *e = &r->b.e[i];
        if (over[e->part] || svec_pos_cmp(&e->at, &h->pos[e->part]) > 0) {
            over[e->part] = 1; /* the follower delivers it after live */
            continue;
        }
        cur[e->part] = e->at;
        if (e->rid == NULL || e->rec == NULL || (u->kind == SUB_ID && strcmp(e->rid, u->id) != 0))
            continue;
        svec_format(sid, sizeof(sid), cur, h->np);
        struct status_event ev;
        status_event_init(&ev);
        size_t len = 0;
        char *f = dash_encode_frame(h, e->rec, e->rec_len, 0, sid, &ev, &len);
        if (f != NULL && dash_sub_matches(u, e->rid, &ev)) {
            dash_send_text(h, x->id, e->rid, f, len);
            u->replayed++;
        }
        free(f);
        status_event_cleanup(&ev);
    }
    svec_format(sid, sizeof(sid), cur, h->np);
    dash_str_set(&u->cursor, sid);
    int done = 1;
    for (unsigned p = 0; p < h->np && done; p++) {
        if (over[p])
            continue;
        if (r->count[p] >= HUB_REPLAY_PAGE) {
            done = 0;
            continue;
        }
        /* a short page holds everything up to what the follower had read when it was sent */
        const struct svec_pos *cov =
            svec_pos_cmp(&r->issue[p], &cur[p]) > 0 ? &r->issue[p] : &cur[p];
        if (svec_pos_cmp(&h->pos[p], cov) > 0)
            done = 0; /* the follower read further since: another round */
    }
    pround_free(r);
    if (done)
        replay_finish(h, x, u);
    else
        replay_round(h, x, u);
}

static void on_round(void *arg, const char *err, redisReply *reply)
{
    struct parg *a = arg;
    struct pround *r = a->owner;
    unsigned p = a->part;
    free(a);
    if (dash_enter(r->op.h)) {
        if (--r->pending == 0)
            pround_free(r);
        return;
    }
    if (err != NULL || reply->type != REDIS_REPLY_ARRAY) {
        r->failed = 1;
    } else {
        struct store_events_iter it;
        struct store_event_entry e;
        r->count[p] = store_events_iter_range(&it, reply);
        while (store_events_next(&it, &e)) {
            struct svec_pos at;
            if (entry_at(&e, &at) == 0)
                batch_add(&r->b, p, &at, &e);
        }
    }
    pround_done(r);
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
    r->count = xcalloc(h->np, sizeof(*r->count));
    if (u->cursor == NULL || svec_parse(u->cursor, r->start, h->np) != (int)h->np)
        r->failed = 1;
    r->pending = 1;
    for (unsigned p = 0; p < h->np && !r->failed; p++) {
        char from[SVEC_ID_TEXT + 1] = "(";
        svec_format(from + 1, sizeof(from) - 1, &r->start[p], 1);
        struct parg *a = parg_new(r, p);
        h->pending++;
        r->pending++;
        if (store_events_range_in(h->c->store, store_part_tag(h->c->store, p), from, "+",
                                  HUB_REPLAY_PAGE, on_round, a) != 0) {
            h->pending--;
            r->pending--;
            r->failed = 1;
            free(a);
        }
    }
    pround_done(r);
}
