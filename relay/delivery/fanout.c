/* fanout.c - see fanout.h. runs on: core thread. This file: the lease, reading the stream,
 * the pre-decoded events and the wiring; fanout_batch.c: matching, first attempts, commits.
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
 * recorded as in flight and, once that commit landed, finish through wh_done.lua like
 * claimed deliveries; an outcome that comes before it landed is written by the commit
 * retried or, when the commit was already out, by wh_done.lua after it): delivered
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
 * until the attempt reports (dispatch_first_cb), is detached (its in-flight record was
 * committed), or is forgotten (fanout_free). The object outlives its in-flight commands (pending count). */
#include "relay/delivery/fanout.h"
#include "relay/delivery/fanout_internal.h"
#include "relay/core.h"
#include "relay/delivery/dispatch.h"
#include "relay/ingest/ingest.h"
#include "relay/common/idmap.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/delivery/endpoints.h"
#include "store/deliveries.h"
#include "store/events.h"
#include "store/facts.h"
#include "store/keys.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Move the pre-decoded event of stream entry sid into ev (1, *facts: the applier's word on
 * its facts), or 0 when there is none: older queued entries were read elsewhere (a
 * takeover, a re-read) and are dropped. */
static int pre_take(struct fanout *fo, const char *sid, struct status_event *ev, int *facts)
{
    while (fo->pre_head && stream_id_cmp(fo->pre_head->sid, sid) < 0)
        pre_drop_head(fo);
    if (fo->pre_head == NULL || stream_id_cmp(fo->pre_head->sid, sid) != 0)
        return 0;
    *ev = fo->pre_head->ev; /* moved: the node gives up its strings */
    *facts = fo->pre_head->facts;
    status_event_init(&fo->pre_head->ev);
    pre_drop_head(fo);
    return 1;
}

static void obj_free(struct fanout *fo)
{
    fo_batch_free(fo, fo->batch);
    while (fo->q_head) {
        struct fo_batch *b = fo->q_head;
        fo->q_head = b->next;
        fo_batch_free(fo, b);
    }
    idmap_free(fo->pairs);
    free(fo->slots);
    free(fo->free_slots);
    pre_clear(fo);
    free(fo);
}

/* Every store callback starts here: 1 when the object is closing (and maybe freed now). */
int fo_callback_enter(struct fanout *fo)
{
    fo->pending--;
    if (!fo->closing)
        return 0;
    if (fo->pending == 0)
        obj_free(fo);
    return 1;
}

void fo_idle(struct fanout *fo)
{
    fo->busy = 0;
}

/* ---- lease ----------------------------------------------------------------------------- */

static void on_lease(void *arg, const char *err, const char *msg, long long held)
{
    struct fanout *fo = arg;
    if (fo_callback_enter(fo))
        return;
    if (err != NULL)
        return;
    if (held == 1 && !fo->leader) {
        if (fo->share == NULL)
            log_info("webhook fan-out lease taken", "instance=%s", fo->c->instance_id);
        else
            log_info("webhook fan-out lease taken", "instance=%s partition=%u",
                     fo->c->instance_id, fo->part);
        if (fo->share != NULL)
            fo->share->held++;
        fo->leader = 1;
        fo->group_ready = 0;
        fo->need_claim = 1;
        fo->need_pending = 1;
        snprintf(fo->claim_cursor, sizeof(fo->claim_cursor), "0-0");
        fo_step(fo);
    } else if (held == 0 && fo->leader) {
        if (fo->share == NULL)
            log_warn("webhook fan-out lease lost", "instance=%s", fo->c->instance_id);
        else
            log_warn("webhook fan-out lease lost", "instance=%s partition=%u",
                     fo->c->instance_id, fo->part);
        fo->leader = 0;
        if (fo->share != NULL)
            fo->share->held--;
        pre_clear(fo);
    }
}

int fanout_leader(const struct fanout *fo)
{
    return fo != NULL && fo->leader;
}

/* Several partitions: 1 when this fan-out should not take or renew its lease now - the
 * process holds its share already (not leader), or more than its share and this is the
 * highest partition it holds (leader: given up, another process takes it within a lease). */
static int over_share(struct fanout *fo)
{
    struct fanout_share *sh = fo->share;
    unsigned live = sh->live ? sh->live : 1;
    unsigned target = (sh->n + live - 1) / live;
    if (!fo->leader)
        return sh->held >= target;
    if (sh->held <= target)
        return 0;
    for (unsigned k = fo->part + 1; k < sh->n; k++)
        if (sh->all[k] != NULL && sh->all[k]->leader)
            return 0; /* a higher one goes first */
    return 1;
}

static void on_lease_tick(evutil_socket_t fd, short what, void *arg)
{
    struct fanout *fo = arg;
    if (!store_ready(fo->c->store))
        return;
    if (fo->share != NULL && over_share(fo)) {
        if (fo->leader) { /* not renewed: it expires and another process takes it */
            log_info("webhook fan-out lease given up (spreading)", "instance=%s partition=%u "
                     "held=%u live=%u", fo->c->instance_id, fo->part, fo->share->held,
                     fo->share->live);
            fo->leader = 0;
            fo->share->held--;
            pre_clear(fo);
        }
        return;
    }
    fo->pending++;
    if (dl_lease(fo->c->store, fo->part, fo->c->instance_id, FANOUT_LEASE_MS, on_lease, fo) != 0)
        fo->pending--;
}

/* ---- reading --------------------------------------------------------------------------- */

static void on_group(void *arg, const char *err, const char *msg)
{
    struct fanout *fo = arg;
    if (fo_callback_enter(fo))
        return;
    fo_idle(fo);
    if (err == NULL) { /* created, or it existed */
        fo->group_ready = 1;
        fo_step(fo);
    } else {
        log_warn("webhook consumer group create failed", "err=\"%s\"", msg ? msg : err);
    }
}

static void on_claim(void *arg, const char *err, const char *msg, const char *next,
                     size_t claimed)
{
    struct fanout *fo = arg;
    if (fo_callback_enter(fo))
        return;
    fo_idle(fo);
    if (err != NULL) {
        if (err == dl_err_nogroup)
            fo->group_ready = 0;
        return; /* retried on the next poll */
    }
    if (claimed > 0)
        log_info("webhook fan-out took over pending events", "count=%zu", claimed);
    snprintf(fo->claim_cursor, sizeof(fo->claim_cursor), "%s", next);
    if (strcmp(next, "0-0") == 0)
        fo->need_claim = 0;
    fo_step(fo);
}

/* An entry whose facts are read (store_facts_at): decoded, and not known to carry none. */
static int needs_facts(const struct fo_entry *fe)
{
    return fe->ok && fe->ev.request_id != NULL && !fe->no_facts;
}

/* The facts of the batch's events (texts in the order on_read asked: its decoded entries):
 * attached, then the batch is matched. Without them (Redis error) no body may be made: the
 * batch is dropped and read again from our pending entries, so a body never lacks facts its
 * event carries. */
static void on_facts(void *arg, const char *err, char **texts, size_t n)
{
    struct fanout *fo = arg;
    if (fo_callback_enter(fo))
        return;
    struct fo_batch *b = fo->batch;
    if (err != NULL || b == NULL) {
        if (err != NULL)
            log_warn("request facts not read, batch read again", "err=%s", err);
        fo_batch_free(fo, fo->batch);
        fo->batch = NULL;
        fo->need_pending = 1;
        fo_idle(fo);
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < b->n && m < n; i++)
        if (needs_facts(&b->ents[i])) {
            free(b->ents[i].ev.facts);
            b->ents[i].ev.facts = texts[m]; /* taken */
            texts[m++] = NULL;
        }
    fo_process_batch(fo);
}

static void on_read(void *arg, const char *err, const char *msg, struct store_events_iter *it,
                    size_t n)
{
    struct fanout *fo = arg;
    if (fo_callback_enter(fo))
        return;
    fo_idle(fo);
    if (err != NULL) {
        if (err == dl_err_nogroup) {
            log_warn("webhook consumer group missing, recreating", "");
            fo->group_ready = 0;
            fo_step(fo);
        }
        return;
    }
    if (n == 0) {
        if (fo->need_pending || fo->kick_again) {
            fo->need_pending = 0;
            fo_step(fo);
        }
        return;
    }
    fo_batch_free(fo, fo->batch);
    struct fo_batch *b = fo->batch = xcalloc(1, sizeof(*b));
    b->fo = fo;
    b->ents = xcalloc(n, sizeof(*b->ents));
    struct store_event_entry e;
    while (b->n < n && store_events_next(it, &e)) {
        struct fo_entry *fe = &b->ents[b->n];
        snprintf(fe->sid, sizeof(fe->sid), "%.*s", (int)e.sid_len, e.sid);
        status_event_init(&fe->ev);
        struct proto_err pe = {0};
        int facts = -1;
        if (pre_take(fo, fe->sid, &fe->ev, &facts)) {
            fe->ok = 1;
            if (facts == 0) { /* what facts_at would say: none (store/apply.h) */
                fe->no_facts = 1;
                free(fe->ev.facts);
                fe->ev.facts = NULL;
            }
        }
        else if (e.rec != NULL && store_event_decode(&e, &fe->ev, &pe) == 0) {
            fe->ok = 1;
            if (fe->ev.type != PROTO_EV_STATUS) /* only records carry the other types */
                fo->c->metrics.wh_fanout_typed[fe->ev.type]++;
        }
        else if (e.rec != NULL)
            log_warn("event record unreadable, not fanned out", "stream_id=%s err=%s field=%s",
                     fe->sid, proto_strerror(pe.code), pe.field);
        b->n++;
    }
    fo->busy = 1;
    /* the request facts each event carries (the version of its seq): one script per batch */
    const char **ids = xcalloc(b->n ? b->n : 1, sizeof(*ids));
    uint64_t *seqs = xcalloc(b->n ? b->n : 1, sizeof(*seqs));
    size_t m = 0;
    for (size_t i = 0; i < b->n; i++)
        if (needs_facts(&b->ents[i])) {
            ids[m] = b->ents[i].ev.request_id;
            seqs[m++] = b->ents[i].ev.seq;
        }
    if (m == 0) { /* none can carry facts (events this process applied): no round trip */
        free(ids);
        free(seqs);
        fo_process_batch(fo);
        return;
    }
    fo->pending++;
    int rc = store_facts_at(fo->c->store, ids, seqs, m, on_facts, fo);
    free(ids);
    free(seqs);
    if (rc != 0) {
        fo->pending--;
        fo_batch_free(fo, fo->batch); /* read again from our pending entries */
        fo->batch = NULL;
        fo->need_pending = 1;
        fo_idle(fo);
    }
}

void fo_step(struct fanout *fo)
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
        r = dl_group_create(s, fo->part, FANOUT_GROUP, on_group, fo);
    } else if (fo->need_claim) {
        r = dl_autoclaim(s, fo->part, FANOUT_GROUP, fo->c->instance_id, fo->claim_cursor,
                         on_claim, fo);
    } else {
        size_t nwh = webhooks_count(fo->w);
        size_t count = FANOUT_MAX_DELIVERIES / (nwh ? nwh : 1);
        count = count < 1 ? 1 : count > FANOUT_MAX_EVENTS ? FANOUT_MAX_EVENTS : count;
        fo->count_asked = count;
        r = dl_read(s, fo->part, FANOUT_GROUP, fo->c->instance_id, count, fo->need_pending,
                    on_read, fo);
    }
    if (r != 0) {
        fo->pending--;
        fo->busy = 0;
    }
}

/* ---- wiring ---------------------------------------------------------------------------- */

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    fo_step(arg);
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    fo_try_commit(arg);
    fo_step(arg);
}

int fanout_busy(const struct fanout *fo)
{
    return fo != NULL && (fo->q_head != NULL || fo->batch != NULL);
}

/* Read the stream now (coalesced). */
static void fanout_kick(struct fanout *fo)
{
    event_active(fo->kick_ev, EV_TIMEOUT, 0);
}

/* An event this process applied (ingest's taker, called after every borrowing listener):
 * its members are moved into a fo_pre node (owned by the queue, then by the batch entry
 * pre_take moves it into), not copied; the applier frees the emptied struct. */
static void on_ingest_event(void *arg, struct status_event *ev, const char *stream_id,
                            int facts)
{
    struct fanout *fo = arg;
    if (fo->closing || ev->request_id == NULL)
        return; /* closing, or taken by the fan-out of its partition already */
    if (key_partition(ev->request_id, strlen(ev->request_id),
                      store_partitions(fo->c->store)) != fo->part)
        return; /* another partition's event (never with one partition) */
    if (fo->leader && stream_id != NULL && fo->npre < FANOUT_PRE_MAX &&
        strlen(stream_id) < sizeof(fo->pre_head->sid)) {
        struct fo_pre *p = xmalloc(sizeof(*p));
        p->next = NULL;
        str_copy(p->sid, sizeof(p->sid), stream_id);
        p->facts = facts;
        p->ev = *ev; /* moved: the applier's struct is left empty */
        status_event_init(ev);
        if (fo->pre_tail)
            fo->pre_tail->next = p;
        else
            fo->pre_head = p;
        fo->pre_tail = p;
        fo->npre++;
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

struct fanout *fanout_new(struct core *c, struct webhooks *w, struct dispatch *dp,
                          unsigned part, struct fanout_share *share)
{
    struct fanout *fo = xcalloc(1, sizeof(*fo));
    fo->c = c;
    fo->w = w;
    fo->dp = dp;
    fo->part = part;
    fo->share = share;
    fo->pairs = idmap_new();
    fo->lease_ev = event_new(c->base, -1, EV_PERSIST, on_lease_tick, fo);
    fo->poll_ev = event_new(c->base, -1, EV_PERSIST, on_poll, fo);
    fo->kick_ev = event_new(c->base, -1, 0, on_kick, fo);
    fo->commit_ev = event_new(c->base, -1, 0, fo_on_commit_ev, fo);
    struct timeval lt = {0, FANOUT_RENEW_MS * 1000}, pt = {0, FANOUT_POLL_MS * 1000};
    event_add(fo->lease_ev, &lt);
    event_add(fo->poll_ev, &pt);
    event_active(fo->lease_ev, EV_TIMEOUT, 0); /* try for the lease at once */
    if (c->ingest)
        ingest_on_event_take(c->ingest, on_ingest_event, fo);
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
