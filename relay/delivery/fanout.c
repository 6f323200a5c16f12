/* fanout.c - see fanout.h. runs on: core thread.
 *
 * Reading. State: leader (holds {P}:fanout) -> group_ready (XGROUP CREATE done) -> need_claim
 * (XAUTOCLAIM the previous holder's pending entries) -> need_pending (re-read our own
 * pending entries from id 0, only when no batch of ours is open) -> reading new entries
 * (">"). One read step at a time (busy).
 *
 * The delivery log (issue 17). A batch read from the stream is matched against the
 * endpoints in memory; wh_held.lua checks in one call that the endpoint set is current and
 * which (endpoint, request) pairs have an unfinished delivery (held: recorded as pending,
 * behind it). Every other pair gets its first attempt at once from this process
 * (dispatch_first), without any record. A batch is committed by ONE wh_fanout.lua call once
 * its attempts are done (or after FANOUT_COMMIT_WAIT_MS: attempts still in flight are then
 * recorded as in flight and finish through wh_done.lua like claimed deliveries): delivered
 * ones get a short listing entry, failed ones become ordinary deliveries waiting for their
 * retry, and the batch is XACKed. Batches are committed in stream order; several may be
 * open at once (pipelined). A later event of a request whose first attempt to an endpoint
 * is still open waits for it in memory (chained) and is sent only after it succeeded;
 * otherwise it is recorded as pending behind it. A crash before the commit leaves the
 * entries pending in the consumer group: the next holder sends them again (at least once;
 * at most the attempts in flight at the crash are sent twice).
 *
 * Ownership: the batch being matched (fo->batch) belongs to the fanout until it moves to
 * the queue of open batches (fo->q_head), which owns every batch until its commit
 * succeeded. An open first attempt is owned by the dispatcher; the batch keeps its handle
 * until the attempt reports (dispatch_first_cb), is detached (recorded in flight), or is
 * forgotten (fanout_free). The object outlives its in-flight commands (pending count). */
#include "relay/delivery/fanout.h"
#include "relay/core.h"
#include "relay/delivery/dispatch.h"
#include "relay/ingest/ingest.h"
#include "relay/common/idmap.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/delivery/endpoints.h"
#include "store/events.h"
#include "store/keys.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FANOUT_POLL_MS 50
#define FANOUT_MAX_EVENTS 500
#define FANOUT_MAX_DELIVERIES 4000 /* per script call: bounds the time Redis spends in it */
#define FANOUT_PRE_MAX 8192 /* events this process accepted, kept decoded for the fan-out */
#define FANOUT_MAX_BATCHES 8     /* open batches (read, not committed) */
#define FANOUT_MAX_OPEN 8192     /* first attempts open across them */
#define FANOUT_COMMIT_WAIT_MS 1000 /* a batch commits after this even with attempts open */

struct fo_entry {
    char sid[48];
    int ok; /* decoded */
    struct status_event ev;
    struct dispatch_body *body; /* the webhook body, made once for all first attempts */
};

struct fo_batch;

/* One (event, endpoint) pair of a batch. kind: 'p' pending, 's' skipped (recorded by the
 * commit), 'a' first attempt (open until out is set), 'c' chained behind an open attempt of
 * the same request and endpoint (sent when it succeeds). out: 0 open, 'o' delivered, 'r'
 * retry, 'd' dead, 'g' gone, 'f' in flight (detached at the commit). */
struct fo_dl {
    struct fo_batch *b;
    size_t ev;          /* index in b->ents */
    struct webhook *wh; /* reference */
    char kind, out;
    struct dispatch_attempt *h; /* while the attempt is open */
    char *json;                 /* the attempt log entry (owned) */
    int64_t num;                /* next attempt ms (retry) or lease end (in flight) */
    struct fo_dl *succ;         /* chained successor (kind 'c'), not owned */
    uint32_t slot;              /* in the open-pair map: slot + 1, 0 when not */
};

struct fo_batch {
    struct fanout *fo;
    struct fo_batch *next;
    struct fo_entry *ents;
    size_t n;
    struct fo_dl **dls; /* owned */
    size_t ndl, capdl;
    size_t open; /* pairs of kind 'a' or 'c' without an outcome */
    int64_t t0;  /* mono ms when its first attempts started */
    int committing;
};

/* An event this process accepted, decoded, waiting for the fan-out to read its stream
 * entry: the read then skips decoding the record again. Listeners run in the order of the
 * apply replies, which is the order of the XADDs, so the queue is in stream order; entries
 * of other processes simply find no match here and are decoded. */
struct fo_pre {
    struct fo_pre *next;
    char sid[48];
    struct status_event ev;
};

struct fanout {
    struct core *c;
    struct webhooks *w;
    struct dispatch *dp;
    struct store_script sc_lease, sc_held;
    const struct store_script *sc_fanout;
    struct event *lease_ev, *poll_ev, *kick_ev, *commit_ev;
    int closing, pending;
    int leader, group_ready, need_claim, need_pending, busy;
    int kick_again; /* new events while a step was in flight: read again after it */
    struct fo_batch *batch; /* being matched (owned) */
    size_t count_asked;
    struct fo_batch *q_head, *q_tail; /* open batches, stream order (owned) */
    size_t nq, nopen;
    struct idmap *pairs; /* "<endpoint>\x1f<request>" -> slot of its newest open pair */
    struct fo_dl **slots;
    uint32_t nslots, capslots, *free_slots, nfree;
    char claim_cursor[48];
    struct fo_pre *pre_head, *pre_tail; /* owned */
    size_t npre;
    char k_events[KEY_MAX], k_lease[KEY_MAX], k_whv[KEY_MAX];
};

static void step(struct fanout *fo);
static void process_batch(struct fanout *fo);

/* ---- open (endpoint, request) pairs -------------------------------------------------- */

static void pair_key(char *out, size_t size, const struct fo_dl *dl)
{
    snprintf(out, size, "%s\x1f%s", dl->wh->id, dl->b->ents[dl->ev].ev.request_id);
}

static struct fo_dl *pair_get(struct fanout *fo, const struct fo_dl *dl)
{
    char k[WH_ID_MAX + 160];
    uint32_t v;
    pair_key(k, sizeof(k), dl);
    return idmap_get(fo->pairs, k, &v) ? fo->slots[v] : NULL;
}

static void pair_put(struct fanout *fo, struct fo_dl *dl)
{
    char k[WH_ID_MAX + 160];
    pair_key(k, sizeof(k), dl);
    uint32_t v;
    if (idmap_get(fo->pairs, k, &v)) {
        fo->slots[v]->slot = 0; /* dl is the newest open pair now */
    } else if (fo->nfree > 0) {
        v = fo->free_slots[--fo->nfree];
    } else {
        if (fo->nslots == fo->capslots) {
            fo->capslots = fo->capslots ? fo->capslots * 2 : 256;
            fo->slots = xrealloc(fo->slots, fo->capslots * sizeof(*fo->slots));
            fo->free_slots = xrealloc(fo->free_slots, fo->capslots * sizeof(*fo->free_slots));
        }
        v = fo->nslots++;
    }
    fo->slots[v] = dl;
    dl->slot = v + 1;
    idmap_put(fo->pairs, k, v);
}

static void pair_drop(struct fanout *fo, struct fo_dl *dl)
{
    if (dl->slot == 0)
        return;
    char k[WH_ID_MAX + 160];
    pair_key(k, sizeof(k), dl);
    idmap_del(fo->pairs, k);
    fo->free_slots[fo->nfree++] = dl->slot - 1;
    dl->slot = 0;
}

/* ---- batches --------------------------------------------------------------------------- */

static struct fo_dl *dl_add(struct fo_batch *b, size_t ev, struct webhook *wh, char kind)
{
    if (b->ndl == b->capdl) {
        b->capdl = b->capdl ? b->capdl * 2 : 64;
        b->dls = xrealloc(b->dls, b->capdl * sizeof(*b->dls));
    }
    struct fo_dl *dl = xcalloc(1, sizeof(*dl));
    dl->b = b;
    dl->ev = ev;
    dl->wh = wh;
    webhook_ref(wh);
    dl->kind = kind;
    b->dls[b->ndl++] = dl;
    return dl;
}

static void dls_clear(struct fanout *fo, struct fo_batch *b)
{
    for (size_t i = 0; i < b->ndl; i++) {
        struct fo_dl *dl = b->dls[i];
        if (dl->h != NULL)
            dispatch_first_forget(fo->dp, dl->h);
        pair_drop(fo, dl);
        webhook_unref(dl->wh);
        free(dl->json);
        free(dl);
    }
    free(b->dls);
    b->dls = NULL;
    b->ndl = b->capdl = 0;
    fo->nopen -= b->open;
    b->open = 0;
}

static void batch_free(struct fanout *fo, struct fo_batch *b)
{
    if (b == NULL)
        return;
    dls_clear(fo, b);
    for (size_t i = 0; i < b->n; i++) {
        status_event_cleanup(&b->ents[i].ev);
        dispatch_body_unref(b->ents[i].body);
    }
    free(b->ents);
    free(b);
}

static void pre_drop_head(struct fanout *fo)
{
    struct fo_pre *p = fo->pre_head;
    fo->pre_head = p->next;
    if (fo->pre_head == NULL)
        fo->pre_tail = NULL;
    fo->npre--;
    status_event_cleanup(&p->ev);
    free(p);
}

static void pre_clear(struct fanout *fo)
{
    while (fo->pre_head)
        pre_drop_head(fo);
}

/* Move the pre-decoded event of stream entry sid into ev (1), or 0 when there is none:
 * older queued entries were read elsewhere (a takeover, a re-read) and are dropped. */
static int pre_take(struct fanout *fo, const char *sid, struct status_event *ev)
{
    while (fo->pre_head && stream_id_cmp(fo->pre_head->sid, sid) < 0)
        pre_drop_head(fo);
    if (fo->pre_head == NULL || stream_id_cmp(fo->pre_head->sid, sid) != 0)
        return 0;
    *ev = fo->pre_head->ev; /* moved: the node gives up its strings */
    status_event_init(&fo->pre_head->ev);
    pre_drop_head(fo);
    return 1;
}

static void obj_free(struct fanout *fo)
{
    batch_free(fo, fo->batch);
    while (fo->q_head) {
        struct fo_batch *b = fo->q_head;
        fo->q_head = b->next;
        batch_free(fo, b);
    }
    idmap_free(fo->pairs);
    free(fo->slots);
    free(fo->free_slots);
    pre_clear(fo);
    free(fo);
}

/* Every store callback starts here: 1 when the object is closing (and maybe freed now). */
static int callback_enter(struct fanout *fo)
{
    fo->pending--;
    if (!fo->closing)
        return 0;
    if (fo->pending == 0)
        obj_free(fo);
    return 1;
}

static void idle(struct fanout *fo)
{
    fo->busy = 0;
}

/* ---- lease ----------------------------------------------------------------------------- */

static void on_lease(void *arg, const char *err, redisReply *r)
{
    struct fanout *fo = arg;
    if (callback_enter(fo))
        return;
    if (err != NULL || r->type != REDIS_REPLY_INTEGER)
        return;
    if (r->integer == 1 && !fo->leader) {
        log_info("webhook fan-out lease taken", "instance=%s", fo->c->instance_id);
        fo->leader = 1;
        fo->group_ready = 0;
        fo->need_claim = 1;
        fo->need_pending = 1;
        snprintf(fo->claim_cursor, sizeof(fo->claim_cursor), "0-0");
        step(fo);
    } else if (r->integer == 0 && fo->leader) {
        log_warn("webhook fan-out lease lost", "instance=%s", fo->c->instance_id);
        fo->leader = 0;
        pre_clear(fo);
    }
}

static void on_lease_tick(evutil_socket_t fd, short what, void *arg)
{
    struct fanout *fo = arg;
    if (!store_ready(fo->c->store))
        return;
    char ms[24];
    snprintf(ms, sizeof(ms), "%d", FANOUT_LEASE_MS);
    const char *argv[] = {fo->k_lease, fo->c->instance_id, ms};
    fo->pending++;
    if (store_eval(fo->c->store, &fo->sc_lease, on_lease, fo, 1, 3, argv, NULL) != 0)
        fo->pending--;
}

/* ---- reading --------------------------------------------------------------------------- */

static void on_group(void *arg, const char *err, redisReply *r)
{
    struct fanout *fo = arg;
    if (callback_enter(fo))
        return;
    idle(fo);
    int busy = err == store_err_server && r->str && strncmp(r->str, "BUSYGROUP", 9) == 0;
    if (err == NULL || busy) {
        fo->group_ready = 1;
        step(fo);
    } else {
        log_warn("webhook consumer group create failed", "err=\"%s\"",
                 r && r->str ? r->str : err);
    }
}

static void on_claim(void *arg, const char *err, redisReply *r)
{
    struct fanout *fo = arg;
    if (callback_enter(fo))
        return;
    idle(fo);
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        if (err == store_err_server && r->str && strncmp(r->str, "NOGROUP", 7) == 0)
            fo->group_ready = 0;
        return; /* retried on the next poll */
    }
    const char *next = r->element[0]->str ? r->element[0]->str : "0-0";
    if (r->element[1]->type == REDIS_REPLY_ARRAY && r->element[1]->elements > 0)
        log_info("webhook fan-out took over pending events", "count=%zu",
                 r->element[1]->elements);
    snprintf(fo->claim_cursor, sizeof(fo->claim_cursor), "%s", next);
    if (strcmp(next, "0-0") == 0)
        fo->need_claim = 0;
    step(fo);
}

static void on_read(void *arg, const char *err, redisReply *r)
{
    struct fanout *fo = arg;
    if (callback_enter(fo))
        return;
    idle(fo);
    if (err != NULL) {
        if (err == store_err_server && r->str && strncmp(r->str, "NOGROUP", 7) == 0) {
            log_warn("webhook consumer group missing, recreating", "");
            fo->group_ready = 0;
            step(fo);
        }
        return;
    }
    struct store_events_iter it;
    size_t n = store_events_iter_read(&it, r);
    if (n == 0) {
        if (fo->need_pending || fo->kick_again) {
            fo->need_pending = 0;
            step(fo);
        }
        return;
    }
    batch_free(fo, fo->batch);
    struct fo_batch *b = fo->batch = xcalloc(1, sizeof(*b));
    b->fo = fo;
    b->ents = xcalloc(n, sizeof(*b->ents));
    struct store_event_entry e;
    while (b->n < n && store_events_next(&it, &e)) {
        struct fo_entry *fe = &b->ents[b->n];
        snprintf(fe->sid, sizeof(fe->sid), "%.*s", (int)e.sid_len, e.sid);
        status_event_init(&fe->ev);
        struct proto_err pe = {0};
        if (pre_take(fo, fe->sid, &fe->ev))
            fe->ok = 1;
        else if (e.rec != NULL && store_event_decode(&e, &fe->ev, &pe) == 0)
            fe->ok = 1;
        else if (e.rec != NULL)
            log_warn("event record unreadable, not fanned out", "stream_id=%s err=%s field=%s",
                     fe->sid, proto_strerror(pe.code), pe.field);
        b->n++;
    }
    fo->busy = 1;
    process_batch(fo);
}

static void step(struct fanout *fo)
{
    if (fo->busy) {
        fo->kick_again = 1;
        return;
    }
    if (fo->closing || !fo->leader || fo->c->shutting_down || !store_ready(fo->c->store))
        return;
    /* the pipeline is full, or our own pending entries are to be re-read: they include the
     * open batches' entries, so wait until those are committed */
    if (fo->nq >= FANOUT_MAX_BATCHES || fo->nopen >= FANOUT_MAX_OPEN ||
        ((fo->need_claim || fo->need_pending) && fo->q_head != NULL)) {
        fo->kick_again = 1;
        return;
    }
    fo->kick_again = 0;
    struct store *s = fo->c->store;
    int r;
    fo->busy = 1;
    fo->pending++;
    if (!fo->group_ready) {
        r = store_cmd(s, on_group, fo, "XGROUP CREATE %s %s 0 MKSTREAM", fo->k_events,
                      FANOUT_GROUP);
    } else if (fo->need_claim) {
        r = store_cmd(s, on_claim, fo, "XAUTOCLAIM %s %s %s 0 %s COUNT 1000 JUSTID",
                      fo->k_events, FANOUT_GROUP, fo->c->instance_id, fo->claim_cursor);
    } else {
        size_t nwh = webhooks_count(fo->w);
        size_t count = FANOUT_MAX_DELIVERIES / (nwh ? nwh : 1);
        count = count < 1 ? 1 : count > FANOUT_MAX_EVENTS ? FANOUT_MAX_EVENTS : count;
        fo->count_asked = count;
        char cnt[24];
        snprintf(cnt, sizeof(cnt), "%zu", count);
        r = store_cmd(s, on_read, fo, "XREADGROUP GROUP %s %s COUNT %s STREAMS %s %s",
                      FANOUT_GROUP, fo->c->instance_id, cnt, fo->k_events,
                      fo->need_pending ? "0" : ">");
    }
    if (r != 0) {
        fo->pending--;
        fo->busy = 0;
    }
}

/* ---- first attempts -------------------------------------------------------------------- */

static void commit_soon(struct fanout *fo)
{
    event_active(fo->commit_ev, EV_TIMEOUT, 0);
}

static void on_first(void *arg, const char *outcome, const char *json, int64_t next_ms);

/* dl's predecessor succeeded (or it has none): make its first attempt. */
static void send_first(struct fanout *fo, struct fo_dl *dl)
{
    struct fo_entry *fe = &dl->b->ents[dl->ev];
    if (fe->body == NULL) {
        size_t blen = 0;
        char *body = proto_event_webhook_body(&fe->ev, &blen);
        if (body == NULL) {
            log_err("webhook body encoding failed", "event=%s", fe->ev.event_id);
            abort(); /* out of memory: relay/ aborts, see STYLE 4 */
        }
        fe->body = dispatch_body_new(body, blen);
        free(body);
    }
    char did[PROTO_EVENT_ID_MAX + WH_ID_MAX + 2];
    snprintf(did, sizeof(did), "%s.%s", fe->ev.event_id, dl->wh->id);
    dl->kind = 'a';
    dl->h = dispatch_first(fo->dp, dl->wh, did, fe->ev.event_id, fe->body, on_first, dl);
    if (dl->h == NULL && dl->out == 0) { /* not started: recorded as pending instead */
        dl->kind = 'p';
        dl->b->open--;
        fo->nopen--;
    }
}

/* A chain of successors that will not be sent from memory: recorded as pending, each behind
 * the one before it (the commit writes them in stream order). */
static void chain_to_pending(struct fanout *fo, struct fo_dl *dl)
{
    for (struct fo_dl *s = dl->succ; s != NULL; s = s->succ) {
        s->kind = 'p';
        s->b->open--;
        fo->nopen--;
    }
    dl->succ = NULL;
}

/* dispatch_first_cb: the outcome of a first attempt (maybe inside dispatch_first). */
static void on_first(void *arg, const char *outcome, const char *json, int64_t next_ms)
{
    struct fo_dl *dl = arg;
    struct fo_batch *b = dl->b;
    struct fanout *fo = b->fo;
    dl->h = NULL;
    if (outcome == NULL) { /* not attempted (endpoint deleted or disabled meanwhile) */
        dl->kind = 'p';
    } else {
        dl->out = strcmp(outcome, "ok") == 0     ? 'o'
                  : strcmp(outcome, "retry") == 0 ? 'r'
                  : strcmp(outcome, "gone") == 0  ? 'g'
                                                  : 'd';
        dl->json = xstrdup(json ? json : "{}");
        dl->num = next_ms;
    }
    b->open--;
    fo->nopen--;
    struct fo_dl *s = dl->succ;
    if (s != NULL && dl->out == 'o') {
        dl->succ = NULL;
        send_first(fo, s); /* its own successors stay chained behind it */
    } else if (s != NULL) {
        chain_to_pending(fo, dl);
    }
    if (b->open == 0)
        commit_soon(fo);
}

/* ---- matching a batch ------------------------------------------------------------------ */

static void on_held(void *arg, const char *err, redisReply *r);

static void on_reloaded(void *arg, const char *err)
{
    struct fanout *fo = arg;
    if (fo->closing)
        return;
    if (err != NULL) {
        batch_free(fo, fo->batch);
        fo->batch = NULL;
        fo->need_pending = 1; /* re-read from the PEL later */
        idle(fo);
        return;
    }
    process_batch(fo);
}

/* Match fo->batch against the endpoints: a pair for every (event, endpoint) whose filters
 * match (endpoints that existed at the event's time); a disabled endpoint gets a skipped
 * delivery; endpoints the dispatcher should not try at once (failing, latest mode, a long
 * queue) get a pending one; the rest are candidates for a first attempt, checked for held
 * requests by wh_held.lua. */
static void process_batch(struct fanout *fo)
{
    struct webhooks *w = fo->w;
    struct fo_batch *b = fo->batch;
    if (strcmp(webhooks_version(w), "-") == 0) { /* never loaded yet */
        webhooks_reload(w, on_reloaded, fo);
        return;
    }
    dls_clear(fo, b);
    size_t nwh = webhooks_count(w), ncand = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct fo_entry *fe = &b->ents[i];
        if (!fe->ok)
            continue;
        for (size_t k = 0; k < nwh; k++) {
            struct webhook *wh = webhooks_at(w, k);
            if (!webhook_matches(wh, &fe->ev))
                continue;
            char kind = !wh->enabled ? 's' : dispatch_first_ok(fo->dp, wh) ? 'a' : 'p';
            dl_add(b, i, wh, kind);
            ncand += kind == 'a';
        }
    }
    const char *tag = store_tag(fo->c->store);
    int argc = 3 + 2 * (int)ncand;
    const char **argv = xmalloc(sizeof(char *) * (size_t)argc);
    argv[0] = fo->k_whv, argv[1] = tag, argv[2] = webhooks_version(w);
    int k = 3;
    for (size_t i = 0; i < b->ndl; i++)
        if (b->dls[i]->kind == 'a') {
            argv[k++] = b->dls[i]->wh->id;
            argv[k++] = b->ents[b->dls[i]->ev].ev.request_id;
        }
    fo->pending++;
    if (store_eval(fo->c->store, &fo->sc_held, on_held, fo, 1, argc, argv, NULL) != 0) {
        fo->pending--;
        batch_free(fo, fo->batch);
        fo->batch = NULL;
        fo->need_pending = 1;
        idle(fo);
    }
    free(argv);
}

static void on_held(void *arg, const char *err, redisReply *r)
{
    struct fanout *fo = arg;
    if (callback_enter(fo))
        return;
    struct fo_batch *b = fo->batch;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        log_warn("webhook fan-out check failed", "err=\"%s\"",
                 r && r->str ? r->str : err ? err : "reply");
        batch_free(fo, b);
        fo->batch = NULL;
        fo->need_pending = 1;
        idle(fo);
        return;
    }
    if (r->element[0]->integer == -1) {
        webhooks_reload(fo->w, on_reloaded, fo); /* the endpoint set changed: match again */
        return;
    }
    const char *flags = r->element[1]->str ? r->element[1]->str : "";
    size_t nflags = r->element[1]->str ? r->element[1]->len : 0, f = 0;
    /* the batch joins the open ones first: first attempts may report at once */
    fo->batch = NULL;
    b->t0 = mono_ms();
    if (fo->q_tail)
        fo->q_tail->next = b;
    else
        fo->q_head = b;
    fo->q_tail = b;
    fo->nq++;
    for (size_t i = 0; i < b->ndl; i++) {
        struct fo_dl *dl = b->dls[i];
        if (dl->kind != 'a')
            continue;
        if (f >= nflags || flags[f++] == '1') { /* held behind an unfinished delivery */
            dl->kind = 'p';
            continue;
        }
        struct fo_dl *pred = pair_get(fo, dl);
        b->open++;
        fo->nopen++;
        if (pred != NULL && (pred->kind == 'c' || (pred->kind == 'a' && pred->out == 0))) {
            dl->kind = 'c'; /* waits for its predecessor's outcome */
            pred->succ = dl;
            pair_put(fo, dl);
        } else if (pred != NULL && pred->kind == 'a' && pred->out == 'o') {
            pair_put(fo, dl);
            send_first(fo, dl);
        } else if (pred != NULL) { /* it failed or is recorded pending: behind it */
            dl->kind = 'p';
            b->open--;
            fo->nopen--;
            pair_put(fo, dl);
        } else {
            pair_put(fo, dl);
            send_first(fo, dl);
        }
    }
    /* pending pairs are open pairs too: a later event of the request waits behind them */
    for (size_t i = 0; i < b->ndl; i++)
        if (b->dls[i]->kind == 'p' && b->dls[i]->slot == 0)
            pair_put(fo, b->dls[i]);
    fo->c->metrics.wh_fanout_events += b->n;
    idle(fo);
    commit_soon(fo);
    if (b->n >= fo->count_asked || fo->need_pending || fo->kick_again)
        step(fo);
}

/* ---- committing ------------------------------------------------------------------------ */

static void on_commit(void *arg, const char *err, redisReply *r);

/* Commit the oldest open batch once its attempts are done or it has waited long enough. */
static void try_commit(struct fanout *fo)
{
    struct fo_batch *b = fo->q_head;
    if (b == NULL || b->committing || fo->closing || !store_ready(fo->c->store))
        return;
    if (b->open > 0 && mono_ms() - b->t0 < FANOUT_COMMIT_WAIT_MS)
        return;
    int64_t lease_end = wall_ms() + fo->c->cfg->delivery_lease_ms;
    for (size_t i = 0; i < b->ndl; i++) {
        struct fo_dl *dl = b->dls[i];
        if (dl->kind == 'a' && dl->out == 0 && dl->h != NULL) { /* still in flight */
            dispatch_first_detach(fo->dp, dl->h);
            dl->h = NULL;
            dl->out = 'f';
            dl->num = lease_end;
            b->open--;
            fo->nopen--;
            chain_to_pending(fo, dl);
        } else if (dl->kind == 'c') { /* its predecessor is recorded first, in stream order */
            dl->kind = 'p';
            b->open--;
            fo->nopen--;
        }
    }
    struct fanout_args a;
    fanout_args_begin(&a, fo->c, fo->w, 0);
    long long created = 0;
    size_t d = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct fo_entry *fe = &b->ents[i];
        if (!fe->ok) {
            fanout_args_empty_event(&a, fe->sid);
            continue;
        }
        size_t body_at, n_at;
        fanout_args_event_head(&a, fe->sid, &fe->ev, &body_at, &n_at);
        long long n = 0;
        int need_body = 0;
        for (; d < b->ndl && b->dls[d]->ev == i; d++) {
            struct fo_dl *dl = b->dls[d];
            char k = dl->kind == 'a' ? dl->out : dl->kind;
            fanout_args_pair(&a, dl->wh->id, k, dl->json, (long long)dl->num);
            need_body |= k == 'p' || k == 's' || k == 'r' || k == 'f';
            n++;
        }
        if (need_body) {
            size_t blen = 0;
            const char *body = fe->body ? dispatch_body_data(fe->body, &blen) : NULL;
            char *own = NULL;
            if (body == NULL) {
                own = proto_event_webhook_body(&fe->ev, &blen);
                if (own == NULL) {
                    log_err("webhook body encoding failed", "event=%s", fe->ev.event_id);
                    abort(); /* out of memory: relay/ aborts, see STYLE 4 */
                }
                fanout_args_own(&a, own);
                body = own;
            }
            a.v[body_at] = body;
            a.lens[body_at] = blen;
        }
        if (n > 0)
            fanout_args_set_count(&a, n_at, n);
        a.events++;
        created += n;
    }
    b->committing = 1;
    fo->pending++;
    if (store_eval(fo->c->store, fo->sc_fanout, on_commit, fo, FANOUT_ARGS_NKEYS, (int)a.n, a.v,
                   a.lens) != 0) {
        fo->pending--;
        b->committing = 0; /* tried again on the next poll */
    }
    fanout_args_free(&a);
}

static void on_commit(void *arg, const char *err, redisReply *r)
{
    struct fanout *fo = arg;
    if (callback_enter(fo))
        return;
    struct fo_batch *b = fo->q_head;
    if (b == NULL)
        return;
    b->committing = 0;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        /* unknown whether it ran: the script is idempotent, the next poll writes it again */
        log_warn("webhook fan-out script failed", "err=\"%s\"",
                 r && r->str ? r->str : err ? err : "reply");
        return;
    }
    long long code = r->element[0]->integer;
    fo->q_head = b->next;
    if (fo->q_head == NULL)
        fo->q_tail = NULL;
    fo->nq--;
    if (code == -2) { /* the lease went to another process: it sends these entries again */
        fo->leader = 0;
        batch_free(fo, b);
        while (fo->q_head) {
            struct fo_batch *x = fo->q_head;
            fo->q_head = x->next;
            batch_free(fo, x);
        }
        fo->q_tail = NULL;
        fo->nq = 0;
        return;
    }
    long long created = r->elements > 1 ? r->element[1]->integer : 0;
    fo->c->metrics.wh_deliveries_created += (uint64_t)created;
    int reload = 0;
    for (size_t i = 2; i + 1 < r->elements; i += 2) {
        log_warn("webhook endpoint disabled", "webhook=%s reason=%s", r->element[i]->str,
                 r->element[i + 1]->str);
        fo->c->metrics.wh_endpoints_disabled++;
        reload = 1;
    }
    int queued = 0;
    for (size_t i = 0; i < b->ndl && !queued; i++)
        queued = b->dls[i]->kind == 'p' || (b->dls[i]->kind == 'a' && b->dls[i]->out == 'r');
    batch_free(fo, b);
    if (reload)
        webhooks_reload(fo->w, NULL, NULL);
    if (queued)
        dispatch_kick(fo->dp);
    try_commit(fo);
    step(fo);
}

static void on_commit_ev(evutil_socket_t fd, short what, void *arg)
{
    try_commit(arg);
}

/* ---- wiring ---------------------------------------------------------------------------- */

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    step(arg);
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    try_commit(arg);
    step(arg);
}

int fanout_busy(const struct fanout *fo)
{
    return fo != NULL && (fo->q_head != NULL || fo->batch != NULL);
}

void fanout_kick(struct fanout *fo)
{
    event_active(fo->kick_ev, EV_TIMEOUT, 0);
}

static void on_ingest_event(void *arg, enum proto_verdict v, const struct status_event *ev,
                            const char *stream_id)
{
    struct fanout *fo = arg;
    if (v != PROTO_ACCEPT || fo->closing)
        return;
    if (fo->leader && ev != NULL && stream_id != NULL && fo->npre < FANOUT_PRE_MAX &&
        strlen(stream_id) < sizeof(fo->pre_head->sid)) {
        struct fo_pre *p = xcalloc(1, sizeof(*p));
        snprintf(p->sid, sizeof(p->sid), "%s", stream_id);
        if (status_event_copy(&p->ev, ev) == 0) {
            if (fo->pre_tail)
                fo->pre_tail->next = p;
            else
                fo->pre_head = p;
            fo->pre_tail = p;
            fo->npre++;
        } else {
            free(p); /* out of memory: the fan-out decodes the record instead */
        }
    }
    fanout_kick(fo);
}

static void on_store_state(void *arg, int up)
{
    struct fanout *fo = arg;
    if (fo->closing)
        return;
    if (up) {
        event_active(fo->lease_ev, EV_TIMEOUT, 0);
    } else {
        fo->group_ready = 0; /* re-check after a reconnect (Redis may have restarted) */
        fo->need_pending = 1;
    }
}

struct fanout *fanout_new(struct core *c, struct webhooks *w, struct dispatch *dp)
{
    struct fanout *fo = xcalloc(1, sizeof(*fo));
    fo->c = c;
    fo->w = w;
    fo->dp = dp;
    store_script_init(&fo->sc_lease, "wh_lease");
    store_script_init(&fo->sc_held, "wh_held");
    fo->pairs = idmap_new();
    fo->sc_fanout = webhooks_script(w, WH_SC_FANOUT);
    const char *tag = store_tag(c->store);
    key_build(fo->k_events, KEY_MAX, tag, "events", NULL, NULL);
    key_build(fo->k_lease, KEY_MAX, tag, "fanout", NULL, NULL);
    key_build(fo->k_whv, KEY_MAX, tag, "whv", NULL, NULL);
    fo->lease_ev = event_new(c->base, -1, EV_PERSIST, on_lease_tick, fo);
    fo->poll_ev = event_new(c->base, -1, EV_PERSIST, on_poll, fo);
    fo->kick_ev = event_new(c->base, -1, 0, on_kick, fo);
    fo->commit_ev = event_new(c->base, -1, 0, on_commit_ev, fo);
    struct timeval lt = {0, FANOUT_RENEW_MS * 1000}, pt = {0, FANOUT_POLL_MS * 1000};
    event_add(fo->lease_ev, &lt);
    event_add(fo->poll_ev, &pt);
    event_active(fo->lease_ev, EV_TIMEOUT, 0); /* try for the lease at once */
    if (c->ingest)
        ingest_on_event(c->ingest, on_ingest_event, fo);
    store_on_state(c->store, on_store_state, fo);
    return fo;
}

void fanout_free(struct fanout *fo)
{
    if (fo == NULL)
        return;
    fo->closing = 1;
    event_free(fo->lease_ev);
    event_free(fo->poll_ev);
    event_free(fo->kick_ev);
    event_free(fo->commit_ev);
    /* open first attempts are forgotten (their results are dropped): the entries stay
     * pending in the consumer group and the next holder sends them again */
    for (struct fo_batch *b = fo->q_head; b != NULL; b = b->next)
        for (size_t i = 0; i < b->ndl; i++)
            if (b->dls[i]->h != NULL) {
                dispatch_first_forget(fo->dp, b->dls[i]->h);
                b->dls[i]->h = NULL;
            }
    /* The ingest listener cannot be removed: it checks closing. ingest is freed after us
     * (core_free order), and never calls listeners after its owner stops the loop. */
    if (fo->pending == 0)
        obj_free(fo);
}
