/* history.c - see history.h: snapshots and history answers for one session. Every read
 * carries an op (ops.h) and is answered into nothing when its session or subscription is
 * gone.
 * runs on: core thread. */
#include "relay/dash/history.h"
#include "protocol/event.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/dash/frames.h"
#include "relay/dash/limits.h"
#include "relay/dash/ops.h"
#include "relay/dash/table.h"
#include "relay/edge/dash_filter.h"
#include "relay/ingest/track.h"
#include "store/facts.h"
#include "store/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- snapshots ---------------------------------------------------------------------------- */

static void on_tracked(void *arg, const char *err, size_t created)
{
    struct hub *h = arg;
    if (dash_enter(h))
        return;
    if (err != NULL)
        log_warn("dashboard subscription could not start tracking", "err=%s", err);
    else if (created > 0)
        log_info("tracking started by a dashboard subscription", "created=%zu", created);
}

void dash_track_one(struct hub *h, const char *id)
{
    const char *ids[1] = {id};
    h->pending++;
    if (track_requests(h->c, ids, 1, NULL, on_tracked, h) != 0)
        h->pending--;
}

static void send_unavailable(struct hub *h, struct hsess *x, json_t *data)
{
    dash_send_error(h, x->id, NULL, "unavailable",
                    "the last-known state could not be read (Redis unavailable)", data);
}

static void on_snapshot(void *arg, const char *err, const struct store_history_record *r)
{
    struct op *op = arg;
    struct hub *h = op->h;
    struct hsess *x;
    struct hsub *u = dash_enter(h) ? NULL : dash_op_sub(op, &x);
    if (u == NULL)
        goto out;
    if (err != NULL) {
        json_t *d = dash_sub_data(u);
        if (u->kind == SUB_BROAD)
            json_object_set_new(d, "requestId", json_string(op->id));
        send_unavailable(h, x, d);
        goto out;
    }
    if (op->track && !r->tracked)
        dash_track_one(h, op->id);
    if (r->rec != NULL) {
        struct status_event ev;
        status_event_init(&ev);
        size_t len = 0;
        /* the snapshot is the request's state now: its newest facts */
        char *facts = NULL;
        size_t flen = 0;
        if (r->fx != NULL && store_facts_decode(r->fx, r->fx_len, &facts, &flen) != 0)
            facts = NULL;
        char *f = dash_encode_frame(h, r->rec, r->rec_len, 1, u->live_at, facts, &ev, &len);
        free(facts);
        struct dash_frame fr;
        dash_frame_init(&fr, f, len, ev.status ? ev.status : "", op->id, ev.origin_chain_id,
                        ev.destination_chain_id);
        if (f != NULL && (u->kind == SUB_ID || dash_broad_match(&u->f, &fr)))
            dash_send_text(h, x->id, op->id, f, len);
        dash_frame_cleanup(&fr);
        free(f);
        status_event_cleanup(&ev);
    }
out:
    free(op);
}

void dash_snapshot_one(struct hub *h, struct hsess *x, struct hsub *u, const char *id,
                       int track)
{
    struct op *op = dash_op_new(h, x->id, u->no, id);
    op->track = track;
    h->pending++;
    if (store_history_record(h->c->store, id, on_snapshot, op) != 0) {
        h->pending--;
        free(op);
        send_unavailable(h, x, dash_sub_data(u));
        if (track)
            dash_track_one(h, id); /* fails too while Redis is down; logged */
    }
}

static void on_newest(void *arg, const char *const *ids, size_t n)
{
    struct op *op = arg;
    struct hub *h = op->h;
    struct hsess *x;
    struct hsub *u = dash_op_finish(op, &x);
    for (size_t i = 0; u != NULL && i < n; i++)
        dash_snapshot_one(h, x, u, ids[i], 0);
}

void dash_fresh_snapshot(struct hub *h, struct hsess *x, struct hsub *u, int limit)
{
    if (u->kind == SUB_ID) {
        dash_snapshot_one(h, x, u, u->id, !u->anon); /* anonymous: relay/ingest/anon.c */
        return;
    }
    if (limit <= 0)
        return;
    /* the newest `limit` ids of each status set (or of every request), filtered by chains
     * on the way out */
    struct op *op = dash_op_new(h, x->id, u->no, NULL);
    h->pending++;
    if (store_history_newest(h->c->store, (const char *const *)u->f.status, u->f.nstatus, limit,
                             on_newest, op) != 0) {
        h->pending--;
        free(op);
    }
}

/* ---- history ------------------------------------------------------------------------------ */

struct hist {
    struct op op;
    size_t max_bytes; /* frames beyond this (oldest first) are left out: "truncated" */
};

/* The answer: {"type":"history","status":"success","data":{"event","filters":{"id"},
 * "events":[frame, ...],"truncated"?}} with the newest frames[0..n) that fit in max_bytes
 * (the frames are JSON already; ids are [A-Za-z0-9_:.-]: no escaping). Malloc'd, *len. */
static char *hist_answer(const char *id, char **frames, const size_t *lens, size_t n,
                         size_t max_bytes, size_t *len)
{
    char head[PROTO_MAX_ID + 128];
    int hl = snprintf(head, sizeof(head),
                      "{\"type\":\"history\",\"status\":\"success\",\"data\":{\"event\":"
                      "\"" EVENT_NAME "\",\"filters\":{\"id\":\"%s\"},\"events\":[",
                      id);
    size_t total = (size_t)hl + 32, from = n;
    while (from > 0 && (frames[from - 1] == NULL || total + lens[from - 1] + 1 <= max_bytes)) {
        from--;
        total += frames[from] ? lens[from] + 1 : 0;
    }
    int truncated = from > 0;
    char *out = xmalloc(total);
    memcpy(out, head, (size_t)hl);
    size_t k = (size_t)hl;
    int first = 1;
    for (size_t i = from; i < n; i++) {
        if (frames[i] == NULL)
            continue;
        if (!first)
            out[k++] = ',';
        first = 0;
        memcpy(out + k, frames[i], lens[i]);
        k += lens[i];
    }
    static const char tail[] = "]}}", ttail[] = "],\"truncated\":true}}";
    const char *t = truncated ? ttail : tail;
    size_t tl = truncated ? sizeof(ttail) - 1 : sizeof(tail) - 1;
    memcpy(out + k, t, tl);
    *len = k + tl;
    return out;
}

static void hist_send(struct hub *h, struct hsess *x, const struct hist *hs,
                      const struct store_history_item *items, char *const *facts, size_t n)
{
    char **frames = xcalloc(n + 1, sizeof(*frames));
    size_t *lens = xcalloc(n + 1, sizeof(*lens));
    for (size_t i = 0; i < n; i++)
        if (items[i].rec != NULL) {
            struct status_event ev;
            status_event_init(&ev);
            frames[i] = dash_encode_frame(h, items[i].rec, items[i].rec_len, 0, items[i].sid,
                                          facts[i], &ev, &lens[i]);
            status_event_cleanup(&ev);
        }
    size_t len = 0;
    char *out = hist_answer(hs->op.id, frames, lens, n, hs->max_bytes, &len);
    dash_send_text(h, x->id, NULL, out, len);
    free(out);
    for (size_t i = 0; i < n; i++)
        free(frames[i]);
    free(frames);
    free(lens);
}

static void send_hist_unavailable(struct hub *h, uint64_t sess)
{
    dash_send_error(h, sess, "history", "unavailable",
                    "the history could not be read (Redis unavailable)", NULL);
}

/* A history read, owned while the facts of its events are read (store/facts.h): the
 * entries copied, and per entry the facts text its seq carries (NULL: none). */
struct hist_facts {
    struct hist *hs;
    struct store_history_item *items; /* sid and rec owned */
    size_t n;
};

static void hist_facts_free(struct hist_facts *hf)
{
    for (size_t i = 0; i < hf->n; i++) {
        free((char *)hf->items[i].sid);
        free((char *)hf->items[i].rec);
    }
    free(hf->items);
    free(hf->hs);
    free(hf);
}

/* The answer to a history op, once: its frames, or "unavailable". */
static void hist_done(struct hist *hs, const char *err, const struct store_history_item *items,
                      char *const *facts, size_t n)
{
    struct hub *h = hs->op.h;
    struct hsess *x = dash_sess_find(h, hs->op.sess);
    if (x != NULL && x->hist_inflight > 0)
        x->hist_inflight--;
    if (x != NULL && !x->closing) {
        if (err != NULL)
            send_hist_unavailable(h, x->id);
        else
            hist_send(h, x, hs, items, facts, n);
    }
}

static void on_hist_facts(void *arg, const char *err, char **texts, size_t n)
{
    struct hist_facts *hf = arg;
    struct hub *h = hf->hs->op.h;
    if (dash_enter(h)) {
        hist_facts_free(hf);
        return;
    }
    char **none = xcalloc(hf->n + 1, sizeof(*none));
    /* without facts (Redis error) the frames go without: they are not kept anywhere */
    hist_done(hf->hs, NULL, hf->items, err == NULL && n == hf->n ? texts : none, hf->n);
    free(none);
    hist_facts_free(hf);
}

static void on_timeline(void *arg, const char *err, const struct store_history_item *items,
                        size_t n)
{
    struct hist *hs = arg;
    struct hub *h = hs->op.h;
    if (dash_enter(h)) {
        free(hs);
        return;
    }
    struct hist_facts *hf = NULL;
    const char **ids = NULL;
    uint64_t *seqs = NULL;
    if (err == NULL && n > 0) { /* the facts of each event's seq first */
        hf = xcalloc(1, sizeof(*hf));
        hf->hs = hs;
        hf->items = xcalloc(n, sizeof(*hf->items));
        ids = xcalloc(n, sizeof(*ids));
        seqs = xcalloc(n, sizeof(*seqs));
        for (size_t i = 0; i < n; i++) {
            struct store_history_item *it = &hf->items[hf->n++];
            it->sid = items[i].sid ? xstrdup(items[i].sid) : NULL;
            it->rec = items[i].rec ? xstrndup(items[i].rec, items[i].rec_len) : NULL;
            it->rec_len = items[i].rec_len;
            struct status_event ev;
            struct proto_err pe = {0};
            status_event_init(&ev);
            ids[i] = hs->op.id;
            if (it->rec != NULL && proto_event_from_record(it->rec, it->rec_len, &ev, &pe) == 0)
                seqs[i] = ev.seq;
            status_event_cleanup(&ev);
        }
        h->pending++;
        int rc = store_facts_at(h->c->store, ids, seqs, n, on_hist_facts, hf);
        free(ids);
        free(seqs);
        if (rc == 0)
            return;
        h->pending--;
        hf->hs = NULL; /* answered below, without facts */
    }
    char **none = xcalloc(n + 1, sizeof(*none));
    hist_done(hs, err, items, none, n);
    free(none);
    if (hf != NULL)
        hist_facts_free(hf);
    free(hs);
}

void dash_history(struct hub *h, struct hsess *x, const char *id, int trusted)
{
    struct hist *hs = xcalloc(1, sizeof(*hs));
    hs->max_bytes = trusted ? HUB_HISTORY_BYTES : HUB_HISTORY_ANON_BYTES;
    hs->op.h = h;
    hs->op.sess = x->id;
    snprintf(hs->op.id, sizeof(hs->op.id), "%s", id);
    h->pending++;
    x->hist_inflight++; /* until on_timeline */
    if (store_history_timeline(h->c->store, id,
                               trusted ? HUB_HISTORY_MAX : HUB_HISTORY_ANON_MAX, on_timeline,
                               hs) != 0) {
        h->pending--;
        x->hist_inflight--;
        free(hs);
        send_hist_unavailable(h, x->id);
    }
}
