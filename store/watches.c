/* watches.c - see watches.h: the keys, arguments and replies of the track, watch and anonymous
 * hold scripts, and the gathering of one command per partition into one answer.
 * Ownership: each call allocates one op (the callback argument of all its commands), freed
 * after its callback ran; what a result holds beyond one reply (ids, status counts) is copied
 * into the op. The feed owns its per-partition state until watches_feed_free.
 * runs on: core thread only. */
#include "store/watches.h"
#include "relay/common/util.h"
#include "store/keys.h"
#include "store/script_table.h"
#include "store/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char watches_err_reply[] = "unexpected reply";

enum sc_id {
    SC_TRACK = 0,
    SC_UNTRACK,
    SC_SYNC,
    SC_EXPIRE,
    SC_STATS,
    SC_MIGRATE,
    SC_FALLBACK,
    SC_HOLD,
    SC_RELEASE,
    SC_HOLD_EXPIRE,
    SC_MISS,
    SC_STUCK,
    SC_N
};
static const char *const sc_names[SC_N] = {
    "track",          "untrack",   "watch_sync",   "watch_expire", "watch_stats", "watch_migrate",
    "watch_fallback", "anon_hold", "anon_release", "anon_expire",  "anon_miss",
    "watch_stuck"};
static struct store_script scripts[SC_N]; /* script_table.h */

static const struct store_script *script(enum sc_id id)
{
    return script_table_get(scripts, sc_names, id);
}

/* The three window arguments, in watch_lib.lua's order. */
struct win_args {
    char wttl[SCRIPT_NUM_MAX], settled[SCRIPT_NUM_MAX], ftail[SCRIPT_NUM_MAX];
    char maxlen[SCRIPT_NUM_MAX]; /* the event stream's MAXLEN (typed events) */
};

static void win_args(const struct watches_windows *w, struct win_args *a)
{
    script_num(a->wttl, w->waiting_ttl_ms);
    script_num(a->settled, w->settled_ms);
    script_num(a->ftail, w->failure_tail_ms);
    script_num(a->maxlen, w->stream_maxlen > 0 ? w->stream_maxlen : 100000);
}

static int is_int(const redisReply *r)
{
    return r->type == REDIS_REPLY_INTEGER;
}

/* ---- gathering: one command per partition, one answer ------------------------------------ */

/* The head of every op whose commands go to several partitions. */
struct gather {
    size_t pending;  /* commands not answered yet, plus one held by the sender */
    const char *err; /* the first error */
    void (*finish)(struct gather *g, int answer); /* answer 0: free without calling back */
};

/* One partition answered (err: its error) or the sender let go of its share (NULL). */
static void gather_one(struct gather *g, const char *err)
{
    if (err != NULL && g->err == NULL)
        g->err = err;
    if (--g->pending == 0)
        g->finish(g, 1);
}

/* Send one command per partition: to each partition holding some of ids[0..n), with its ids
 * (in the order given), or to every partition when ids is NULL. send returns store_eval's.
 * Returns 0 (g's finish runs once every answer came) or -1 when nothing went out (g freed,
 * no callback). */
typedef int send_fn(struct gather *g, struct store *s, const char *tag, const char *const *ids,
                    size_t n);
static int per_partition(struct store *s, struct gather *g, const char *const *ids, size_t n,
                         send_fn *send)
{
    unsigned np = store_partitions(s);
    const char **part = ids != NULL ? xcalloc(n ? n : 1, sizeof(*part)) : NULL;
    size_t sent = 0;
    g->pending = 1;
    for (unsigned k = 0; k < np; k++) {
        size_t m = ids != NULL ? key_ids_in(k, np, ids, n, part) : 0;
        if (ids != NULL && m == 0)
            continue;
        g->pending++;
        if (send(g, s, store_part_tag(s, k), part, m) != 0) {
            g->pending--;
            if (g->err == NULL)
                g->err = store_err_disconnected;
            break;
        }
        sent++;
    }
    free(part);
    if (sent == 0) {
        g->finish(g, 0);
        return -1;
    }
    gather_one(g, NULL); /* the sender's own share */
    return 0;
}

/* A growing list of copied strings. */
struct strs {
    char **v;
    size_t n, cap;
};

static void strs_add(struct strs *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = xstrdup(s);
}

static void strs_free(struct strs *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

/* ---- tracking ----------------------------------------------------------------------------- */

struct track_op {
    struct gather g;
    const struct watches_windows *w; /* the caller's: used while sending only */
    const char *metadata, *now;      /* the same */
    size_t created;
    watches_track_cb *cb;
    void *arg;
};

static void track_finish(struct gather *g, int answer)
{
    struct track_op *op = (struct track_op *)g;
    if (answer)
        op->cb(op->arg, g->err, op->created);
    free(op);
}

static void on_tracked(void *arg, const char *err, redisReply *r)
{
    struct track_op *op = arg;
    if (err == NULL && is_int(r))
        op->created += (size_t)r->integer;
    gather_one(&op->g, err);
}

/* track.lua on one partition: KEYS poll, ct, one req hash per id; ARGV now, metadata, tag,
 * the windows, the ids. */
static int track_send(struct gather *g, struct store *s, const char *tag, const char *const *ids,
                      size_t n)
{
    struct track_op *op = (struct track_op *)g;
    struct win_args wa;
    win_args(op->w, &wa);
    const char **argv = xcalloc(2 * n + 8, sizeof(*argv));
    char *keys = xmalloc((n + 2) * KEY_MAX);
    key_build(keys, KEY_MAX, tag, "poll", NULL, NULL);
    key_build(keys + KEY_MAX, KEY_MAX, tag, "ct", NULL, NULL);
    for (size_t i = 0; i < n; i++)
        key_build(keys + (i + 2) * KEY_MAX, KEY_MAX, tag, "req", ids[i], NULL);
    size_t k = 0;
    for (size_t i = 0; i < n + 2; i++)
        argv[k++] = keys + i * KEY_MAX;
    argv[k++] = op->now;
    argv[k++] = op->metadata ? op->metadata : "";
    argv[k++] = tag;
    argv[k++] = wa.wttl;
    argv[k++] = wa.settled;
    argv[k++] = wa.ftail;
    for (size_t i = 0; i < n; i++)
        argv[k++] = ids[i];
    int rc = store_eval(s, script(SC_TRACK), on_tracked, op, (int)(n + 2), (int)k, argv, NULL);
    free(keys);
    free(argv);
    return rc;
}

int watches_track(struct store *s, const struct watches_windows *w, const char *const *ids,
                  size_t n, const char *metadata, watches_track_cb *cb, void *arg)
{
    char now[SCRIPT_NUM_MAX];
    struct track_op *op = xcalloc(1, sizeof(*op));
    op->g.finish = track_finish;
    op->w = w;
    op->metadata = metadata;
    op->now = script_num(now, wall_ms());
    op->cb = cb;
    op->arg = arg;
    return per_partition(s, &op->g, ids, n, track_send);
}

struct untrack_op {
    watches_untrack_cb *cb;
    void *arg;
};

static void on_untracked(void *arg, const char *err, redisReply *r)
{
    struct untrack_op *op = arg;
    op->cb(op->arg, err, err == NULL && is_int(r) && r->integer == 1);
    free(op);
}

/* untrack.lua: KEYS req; ARGV id, tag, now, stream MAXLEN. */
int watches_untrack(struct store *s, const struct watches_windows *w, const char *id,
                    watches_untrack_cb *cb, void *arg)
{
    char k[KEY_MAX], now[SCRIPT_NUM_MAX];
    struct win_args wa;
    win_args(w, &wa);
    const char *tag = store_tag_of(s, id);
    key_build(k, sizeof(k), tag, "req", id, NULL);
    const char *argv[] = {k, id, tag, script_num(now, wall_ms()), wa.maxlen};
    struct untrack_op *op = xcalloc(1, sizeof(*op));
    op->cb = cb;
    op->arg = arg;
    if (store_eval(s, script(SC_UNTRACK), on_untracked, op, 1, 5, argv, NULL) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

/* ---- the change feed ---------------------------------------------------------------------- */

struct feed_part {
    struct watches_feed *f;
    unsigned k;
    long long version; /* last change version handed out; -1 = none (a full read next) */
    int reading;
};

struct watches_feed {
    struct store *s;
    unsigned np;
    struct feed_part *parts; /* np of them */
    char max[SCRIPT_NUM_MAX];
    const char *rec; /* "1": this process runs the record pass (watch_sync.lua's trim) */
    watches_feed_cb *cb;
    void *arg;
};

/* watch_sync.lua's reply: {version, full, id, watched, id, watched, ...}. */
static void on_sync(void *arg, const char *err, redisReply *r)
{
    struct feed_part *fp = arg;
    struct watches_feed *f = fp->f;
    fp->reading = 0;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || !is_int(r->element[0]) ||
                        !is_int(r->element[1])))
        err = watches_err_reply;
    if (err != NULL) {
        f->cb(f->arg, err, NULL);
        return;
    }
    struct watches_batch b = {.part = fp->k,
                              .nparts = f->np,
                              .full = r->element[1]->integer == 1,
                              .version = r->element[0]->integer};
    struct watches_change *v = xcalloc(r->elements / 2 + 1, sizeof(*v));
    for (size_t i = 2; i + 1 < r->elements; i += 2) {
        const redisReply *id = r->element[i], *on = r->element[i + 1];
        if (id->type == REDIS_REPLY_STRING && is_int(on))
            v[b.n++] = (struct watches_change){id->str, on->integer == 1};
    }
    b.v = v;
    b.more = !b.full && b.version > fp->version && r->elements > 2;
    fp->version = b.version;
    f->cb(f->arg, NULL, &b);
    free(v);
}

int watches_batch_covers(const struct watches_batch *b, const char *id)
{
    return key_partition(id, strlen(id), b->nparts) == b->part;
}

static void feed_read_part(struct feed_part *fp)
{
    struct watches_feed *f = fp->f;
    const char *tag = store_part_tag(f->s, fp->k);
    char k1[KEY_MAX], k2[KEY_MAX], k3[KEY_MAX], k4[KEY_MAX], ver[SCRIPT_NUM_MAX];
    key_build(k1, sizeof(k1), tag, "watch", NULL, NULL);
    key_build(k2, sizeof(k2), tag, "unwatch", NULL, NULL);
    key_build(k3, sizeof(k3), tag, "wver", NULL, NULL);
    key_build(k4, sizeof(k4), tag, "wlow", NULL, NULL);
    const char *argv[] = {k1, k2, k3, k4, script_num(ver, fp->version), f->max, tag, f->rec};
    if (store_eval(f->s, script(SC_SYNC), on_sync, fp, 4, 8, argv, NULL) == 0)
        fp->reading = 1;
}

struct watches_feed *watches_feed_new(struct store *s, int max, watches_feed_cb *cb, void *arg)
{
    struct watches_feed *f = xcalloc(1, sizeof(*f));
    f->s = s;
    f->np = store_partitions(s);
    f->parts = xcalloc(f->np, sizeof(*f->parts));
    for (unsigned k = 0; k < f->np; k++)
        f->parts[k] = (struct feed_part){.f = f, .k = k, .version = -1};
    script_num(f->max, max);
    f->rec = "0";
    f->cb = cb;
    f->arg = arg;
    return f;
}

void watches_feed_rec_pass(struct watches_feed *f, int on)
{
    f->rec = on ? "1" : "0";
}

void watches_feed_free(struct watches_feed *f)
{
    if (f == NULL)
        return;
    free(f->parts);
    free(f);
}

void watches_feed_reset(struct watches_feed *f)
{
    for (unsigned k = 0; k < f->np; k++)
        f->parts[k].version = -1;
}

void watches_feed_read(struct watches_feed *f)
{
    if (!store_ready(f->s))
        return;
    for (unsigned k = 0; k < f->np; k++)
        if (!f->parts[k].reading)
            feed_read_part(&f->parts[k]);
}

/* ---- expiry ------------------------------------------------------------------------------- */

struct expire_op {
    struct gather g;
    struct win_args wa;
    char now[SCRIPT_NUM_MAX], max[SCRIPT_NUM_MAX];
    struct strs ended;
    watches_expire_cb *cb;
    void *arg;
};

static void expire_finish(struct gather *g, int answer)
{
    struct expire_op *op = (struct expire_op *)g;
    if (answer)
        op->cb(op->arg, g->err, (const char *const *)op->ended.v, op->ended.n);
    strs_free(&op->ended);
    free(op);
}

static void on_expired(void *arg, const char *err, redisReply *r)
{
    struct expire_op *op = arg;
    if (err == NULL && r->type != REDIS_REPLY_ARRAY)
        err = watches_err_reply;
    for (size_t i = 0; err == NULL && i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING)
            strs_add(&op->ended, r->element[i]->str);
    gather_one(&op->g, err);
}

/* watch_expire.lua: KEYS wend; ARGV now, max, tag, the windows, stream MAXLEN. Reply {ended
 * ids...}. */
static int expire_send(struct gather *g, struct store *s, const char *tag, const char *const *ids,
                       size_t n)
{
    struct expire_op *op = (struct expire_op *)g;
    char k[KEY_MAX];
    key_build(k, sizeof(k), tag, "wend", NULL, NULL);
    const char *argv[] = {k,           op->now,        op->max,      tag,
                          op->wa.wttl, op->wa.settled, op->wa.ftail, op->wa.maxlen};
    return store_eval(s, script(SC_EXPIRE), on_expired, op, 1, 8, argv, NULL);
}

int watches_expire(struct store *s, const struct watches_windows *w, int max, watches_expire_cb *cb,
                   void *arg)
{
    struct expire_op *op = xcalloc(1, sizeof(*op));
    op->g.finish = expire_finish;
    win_args(w, &op->wa);
    script_num(op->now, wall_ms());
    script_num(op->max, max);
    op->cb = cb;
    op->arg = arg;
    return per_partition(s, &op->g, NULL, 0, expire_send);
}

/* ---- stuck events ------------------------------------------------------------------------- */

struct stuck_op {
    struct gather g;
    struct win_args wa;
    char now[SCRIPT_NUM_MAX], cutoff[SCRIPT_NUM_MAX], max[SCRIPT_NUM_MAX];
    long long n;
    watches_stuck_cb *cb;
    void *arg;
};

static void stuck_finish(struct gather *g, int answer)
{
    struct stuck_op *op = (struct stuck_op *)g;
    if (answer)
        op->cb(op->arg, g->err, op->n);
    free(op);
}

static void on_stuck(void *arg, const char *err, redisReply *r)
{
    struct stuck_op *op = arg;
    if (err == NULL && !is_int(r))
        err = watches_err_reply;
    if (err == NULL)
        op->n += r->integer;
    gather_one(&op->g, err);
}

/* watch_stuck.lua: KEYS act; ARGV now, cutoff, max, tag, stream MAXLEN. Reply: count. */
static int stuck_send(struct gather *g, struct store *s, const char *tag, const char *const *ids,
                      size_t n)
{
    struct stuck_op *op = (struct stuck_op *)g;
    char k[KEY_MAX];
    (void)ids;
    (void)n;
    key_build(k, sizeof(k), tag, "act", NULL, NULL);
    const char *argv[] = {k, op->now, op->cutoff, op->max, tag, op->wa.maxlen};
    return store_eval(s, script(SC_STUCK), on_stuck, op, 1, 6, argv, NULL);
}

int watches_stuck(struct store *s, const struct watches_windows *w, int64_t cutoff_ms, int max,
                  watches_stuck_cb *cb, void *arg)
{
    struct stuck_op *op = xcalloc(1, sizeof(*op));
    op->g.finish = stuck_finish;
    win_args(w, &op->wa);
    script_num(op->now, wall_ms());
    script_num(op->cutoff, cutoff_ms);
    script_num(op->max, max);
    op->cb = cb;
    op->arg = arg;
    return per_partition(s, &op->g, NULL, 0, stuck_send);
}

/* ---- gauges ------------------------------------------------------------------------------- */

struct stats_op {
    struct gather g;
    char cutoff[SCRIPT_NUM_MAX], cap[SCRIPT_NUM_MAX];
    int64_t oldest, stuck;
    struct watches_status_count *by; /* names owned (copied) */
    size_t n, cap_by;
    watches_stats_cb *cb;
    void *arg;
};

static void stats_add(struct stats_op *op, const char *status, int64_t n)
{
    for (size_t i = 0; i < op->n; i++)
        if (strcmp(op->by[i].status, status) == 0) {
            op->by[i].n += n;
            return;
        }
    if (op->n == op->cap_by) {
        op->cap_by = op->cap_by ? 2 * op->cap_by : 16;
        op->by = xrealloc(op->by, op->cap_by * sizeof(*op->by));
    }
    op->by[op->n++] = (struct watches_status_count){xstrdup(status), n};
}

static void stats_finish(struct gather *g, int answer)
{
    struct stats_op *op = (struct stats_op *)g;
    struct watches_stats res = {op->oldest, op->stuck, op->by, op->n};
    if (answer)
        op->cb(op->arg, g->err, g->err == NULL ? &res : NULL);
    for (size_t i = 0; i < op->n; i++)
        free((char *)op->by[i].status);
    free(op->by);
    free(op);
}

/* watch_stats.lua's reply: {oldest first-seen ms or -1, stuck, status, count, ...}. */
static void on_stats(void *arg, const char *err, redisReply *r)
{
    struct stats_op *op = arg;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 2))
        err = watches_err_reply;
    if (err == NULL) {
        long long oldest = r->element[0]->integer;
        if (oldest >= 0 && (op->oldest < 0 || oldest < op->oldest))
            op->oldest = oldest;
        op->stuck += r->element[1]->integer;
        for (size_t i = 2; i + 1 < r->elements; i += 2)
            if (r->element[i]->type == REDIS_REPLY_STRING && is_int(r->element[i + 1]))
                stats_add(op, r->element[i]->str, r->element[i + 1]->integer);
    }
    gather_one(&op->g, err);
}

/* KEYS act, unset; ARGV cutoff, tag, cap. */
static int stats_send(struct gather *g, struct store *s, const char *tag, const char *const *ids,
                      size_t n)
{
    struct stats_op *op = (struct stats_op *)g;
    char k1[KEY_MAX], k2[KEY_MAX];
    key_build(k1, sizeof(k1), tag, "act", NULL, NULL);
    key_build(k2, sizeof(k2), tag, "unset", NULL, NULL);
    const char *argv[] = {k1, k2, op->cutoff, tag, op->cap};
    return store_eval(s, script(SC_STATS), on_stats, op, 2, 5, argv, NULL);
}

int watches_stats(struct store *s, int64_t cutoff_ms, int cap, watches_stats_cb *cb, void *arg)
{
    struct stats_op *op = xcalloc(1, sizeof(*op));
    op->g.finish = stats_finish;
    script_num(op->cutoff, cutoff_ms);
    script_num(op->cap, cap);
    op->oldest = -1;
    op->cb = cb;
    op->arg = arg;
    return per_partition(s, &op->g, NULL, 0, stats_send);
}

/* ---- start-up conversions ----------------------------------------------------------------- */

struct step_op {
    struct store *s;
    struct watches_cursor at;
    int walks_parts; /* the fallback walk goes on to the next partition; migrate is one set */
    watches_step_cb *cb;
    void *arg;
};

/* {next cursor in this set (0 = its end), converted count}. */
static void on_step(void *arg, const char *err, redisReply *r)
{
    struct step_op *op = arg;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements != 2))
        err = watches_err_reply;
    struct watches_cursor next = op->at;
    long long count = 0;
    int done = 0;
    if (err == NULL) {
        count = r->element[1]->integer;
        next.pos = r->element[0]->integer;
        if (next.pos == 0 && op->walks_parts)
            next.part++;
        done = op->walks_parts ? next.part >= store_partitions(op->s) : next.pos == 0;
    }
    op->cb(op->arg, err, &next, done, count);
    free(op);
}

/* KEYS the set (kind under tag); ARGV now, max, tag, the windows, cursor. */
static int step_send(struct store *s, enum sc_id sc, const char *tag, const char *kind,
                     const struct watches_windows *w, const struct watches_cursor *at, int max,
                     struct step_op *op)
{
    char k[KEY_MAX], now[SCRIPT_NUM_MAX], maxs[SCRIPT_NUM_MAX], cur[SCRIPT_NUM_MAX];
    struct win_args wa;
    win_args(w, &wa);
    key_build(k, sizeof(k), tag, kind, NULL, NULL);
    const char *argv[] = {
        k,        script_num(now, wall_ms()), script_num(maxs, max), tag, wa.wttl, wa.settled,
        wa.ftail, script_num(cur, at->pos)};
    op->s = s;
    op->at = *at;
    if (store_eval(s, script(sc), on_step, op, 1, 8, argv, NULL) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

static struct step_op *step_op_new(watches_step_cb *cb, void *arg, int walks_parts)
{
    struct step_op *op = xcalloc(1, sizeof(*op));
    op->cb = cb;
    op->arg = arg;
    op->walks_parts = walks_parts;
    return op;
}

int watches_migrate_wanted(const struct store *s)
{
    return store_partitions(s) <= 1; /* a version without watches had one partition */
}

int watches_migrate(struct store *s, const struct watches_windows *w,
                    const struct watches_cursor *at, int max, watches_step_cb *cb, void *arg)
{
    return step_send(s, SC_MIGRATE, store_tag(s), "poll", w, at, max, step_op_new(cb, arg, 0));
}

int watches_fallback(struct store *s, const struct watches_windows *w,
                     const struct watches_cursor *at, int max, watches_step_cb *cb, void *arg)
{
    return step_send(s, SC_FALLBACK, store_part_tag(s, at->part), "act", w, at, max,
                     step_op_new(cb, arg, 1));
}

/* ---- anonymous holds ---------------------------------------------------------------------- */

struct hold_op {
    struct gather g;
    const struct watches_windows *w; /* the caller's: used while sending only */
    const struct watches_hold *h;    /* the same */
    char now[SCRIPT_NUM_MAX];
    long long started;
    struct strs unknown;
    watches_hold_cb *cb;
    void *arg;
};

static void hold_finish(struct gather *g, int answer)
{
    struct hold_op *op = (struct hold_op *)g;
    if (answer)
        op->cb(op->arg, g->err, op->started, (const char *const *)op->unknown.v, op->unknown.n);
    strs_free(&op->unknown);
    free(op);
}

/* anon_hold.lua's reply: {started count, unknown id, ...}. */
static void on_held(void *arg, const char *err, redisReply *r)
{
    struct hold_op *op = arg;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 1))
        err = watches_err_reply;
    if (err == NULL && is_int(r->element[0]) && r->element[0]->integer > 0)
        op->started += r->element[0]->integer;
    for (size_t i = 1; err == NULL && i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING)
            strs_add(&op->unknown, r->element[i]->str);
    gather_one(&op->g, err);
}

/* KEYS anonh; ARGV now, lease, holder, tag, the windows, start, ids. */
static int hold_send(struct gather *g, struct store *s, const char *tag, const char *const *ids,
                     size_t n)
{
    struct hold_op *op = (struct hold_op *)g;
    char k[KEY_MAX], lease[SCRIPT_NUM_MAX], st[SCRIPT_NUM_MAX];
    struct win_args wa;
    win_args(op->w, &wa);
    key_build(k, sizeof(k), tag, "anonh", NULL, NULL);
    const char **argv = xcalloc(9 + n, sizeof(*argv));
    size_t j = 0;
    argv[j++] = k;
    argv[j++] = op->now;
    argv[j++] = script_num(lease, op->h->lease_ms);
    argv[j++] = op->h->holder;
    argv[j++] = tag;
    argv[j++] = wa.wttl;
    argv[j++] = wa.settled;
    argv[j++] = wa.ftail;
    argv[j++] = script_num(st, op->h->start);
    for (size_t i = 0; i < n; i++)
        argv[j++] = ids[i];
    int rc = store_eval(s, script(SC_HOLD), on_held, op, 1, (int)j, argv, NULL);
    free(argv);
    return rc;
}

int watches_hold(struct store *s, const struct watches_windows *w, const struct watches_hold *h,
                 const char *const *ids, size_t n, watches_hold_cb *cb, void *arg)
{
    struct hold_op *op = xcalloc(1, sizeof(*op));
    op->g.finish = hold_finish;
    op->w = w;
    op->h = h;
    script_num(op->now, wall_ms());
    op->cb = cb;
    op->arg = arg;
    return per_partition(s, &op->g, ids, n, hold_send);
}

/* The ops that sum one count over partitions (release, expiry). */
struct count_op {
    struct gather g;
    const char *holder; /* release: the caller's, used while sending only */
    char now[SCRIPT_NUM_MAX], max[SCRIPT_NUM_MAX];
    long long ended;
    watches_count_cb *cb;
    void *arg;
};

static void count_finish(struct gather *g, int answer)
{
    struct count_op *op = (struct count_op *)g;
    if (answer)
        op->cb(op->arg, g->err, op->ended);
    free(op);
}

static void on_counted(void *arg, const char *err, redisReply *r)
{
    struct count_op *op = arg;
    if (err == NULL && !is_int(r))
        err = watches_err_reply;
    if (err == NULL && r->integer > 0)
        op->ended += r->integer;
    gather_one(&op->g, err);
}

static struct count_op *count_op_new(watches_count_cb *cb, void *arg)
{
    struct count_op *op = xcalloc(1, sizeof(*op));
    op->g.finish = count_finish;
    script_num(op->now, wall_ms());
    op->cb = cb;
    op->arg = arg;
    return op;
}

/* anon_release.lua: KEYS anonh; ARGV now, holder, tag, ids. */
static int release_send(struct gather *g, struct store *s, const char *tag, const char *const *ids,
                        size_t n)
{
    struct count_op *op = (struct count_op *)g;
    char k[KEY_MAX];
    key_build(k, sizeof(k), tag, "anonh", NULL, NULL);
    const char **argv = xcalloc(4 + n, sizeof(*argv));
    size_t j = 0;
    argv[j++] = k;
    argv[j++] = op->now;
    argv[j++] = op->holder;
    argv[j++] = tag;
    for (size_t i = 0; i < n; i++)
        argv[j++] = ids[i];
    int rc = store_eval(s, script(SC_RELEASE), on_counted, op, 1, (int)j, argv, NULL);
    free(argv);
    return rc;
}

int watches_release(struct store *s, const char *holder, const char *const *ids, size_t n,
                    watches_count_cb *cb, void *arg)
{
    struct count_op *op = count_op_new(cb, arg);
    op->holder = holder;
    return per_partition(s, &op->g, ids, n, release_send);
}

/* anon_expire.lua: KEYS anonx; ARGV now, max, tag. */
static int hold_expire_send(struct gather *g, struct store *s, const char *tag,
                            const char *const *ids, size_t n)
{
    struct count_op *op = (struct count_op *)g;
    char k[KEY_MAX];
    key_build(k, sizeof(k), tag, "anonx", NULL, NULL);
    const char *argv[] = {k, op->now, op->max, tag};
    return store_eval(s, script(SC_HOLD_EXPIRE), on_counted, op, 1, 4, argv, NULL);
}

int watches_hold_expire(struct store *s, int max, watches_count_cb *cb, void *arg)
{
    struct count_op *op = count_op_new(cb, arg);
    script_num(op->max, max);
    return per_partition(s, &op->g, NULL, 0, hold_expire_send);
}

struct miss_op {
    watches_count_cb *cb;
    void *arg;
};

static void on_miss(void *arg, const char *err, redisReply *r)
{
    struct miss_op *op = arg;
    if (err == NULL && !is_int(r))
        err = watches_err_reply;
    op->cb(op->arg, err, err == NULL && r->integer == 1);
    free(op);
}

/* anon_miss.lua: KEYS req; ARGV id, now, tag, tries, ttl, cap. */
int watches_miss(struct store *s, const char *id, int tries, int64_t ttl_ms, int64_t cap,
                 watches_count_cb *cb, void *arg)
{
    char k[KEY_MAX], now[SCRIPT_NUM_MAX], t[SCRIPT_NUM_MAX], ttl[SCRIPT_NUM_MAX], c[SCRIPT_NUM_MAX];
    const char *tag = store_tag_of(s, id);
    key_build(k, sizeof(k), tag, "req", id, NULL);
    const char *argv[] = {k,
                          id,
                          script_num(now, wall_ms()),
                          tag,
                          script_num(t, tries),
                          script_num(ttl, ttl_ms),
                          script_num(c, cap)};
    struct miss_op *op = xcalloc(1, sizeof(*op));
    op->cb = cb;
    op->arg = arg;
    if (store_eval(s, script(SC_MISS), on_miss, op, 1, 7, argv, NULL) != 0) {
        free(op);
        return -1;
    }
    return 0;
}
