/* fanout_batch.c - the delivery log's half of the fan-out (see fanout.c for the design): a
 * batch read from the stream is matched against the endpoints, checked for held requests
 * (wh_held.lua), its free pairs get their first attempts from this process
 * (dispatch_first), chained pairs wait in memory for their predecessor, and the batch is
 * committed in stream order by ONE wh_fanout.lua call.
 * runs on: core thread. */
#include "relay/delivery/fanout_internal.h"
#include "relay/core.h"
#include "relay/config.h"
#include "relay/delivery/dispatch.h"
#include "relay/common/idmap.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/delivery/endpoints.h"
#include "relay/delivery/wh_view.h"
#include "store/deliveries.h"
#include "store/store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- open (endpoint, request) pairs -------------------------------------------------- */

static void pair_key(char *out, size_t size, const struct fo_dl *dl)
{
    str_copy2(out, size, dl->wh->id, '\x1f', dl->b->ents[dl->ev].ev.request_id);
}

/* The newest open pair of dl's (endpoint, request), or NULL. The key's hash is made here,
 * once per pair, and kept in dl->hash for pair_put and pair_drop (issue 26: it was hashed
 * three or four times per event). */
static struct fo_dl *pair_get(struct fanout *fo, struct fo_dl *dl)
{
    char k[WH_ID_MAX + 160];
    uint32_t v;
    pair_key(k, sizeof(k), dl);
    dl->hash = idmap_hash(fo->pairs, k);
    return idmap_get_h(fo->pairs, k, dl->hash, &v) ? fo->slots[v] : NULL;
}

/* dl becomes the newest open pair of its key. pred: what pair_get returned for dl (its
 * slot is taken over without a map operation), or have_hash 0 when pair_get was not
 * called for dl. */
static void pair_put(struct fanout *fo, struct fo_dl *dl, struct fo_dl *pred, int have_hash)
{
    uint32_t v;
    if (pred != NULL && pred->slot != 0) {
        v = pred->slot - 1; /* the map holds this slot for the key already */
        pred->slot = 0;
        fo->slots[v] = dl;
        dl->slot = v + 1;
        dl->hash = pred->hash;
        return;
    }
    char k[WH_ID_MAX + 160];
    pair_key(k, sizeof(k), dl);
    if (!have_hash)
        dl->hash = idmap_hash(fo->pairs, k);
    if (idmap_get_h(fo->pairs, k, dl->hash, &v)) {
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
    idmap_put_h(fo->pairs, k, dl->hash, v);
}

static void pair_drop(struct fanout *fo, struct fo_dl *dl)
{
    if (dl->slot == 0)
        return;
    char k[WH_ID_MAX + 160];
    pair_key(k, sizeof(k), dl);
    idmap_del_h(fo->pairs, k, dl->hash);
    fo->free_slots[fo->nfree++] = dl->slot - 1;
    dl->slot = 0;
}

/* ---- batches --------------------------------------------------------------------------- */

static struct fo_dl *dl_add(struct fo_batch *b, size_t ev, struct webhook *wh, enum fo_state st)
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
    dl->st = st;
    b->dls[b->ndl++] = dl;
    return dl;
}

static void fo_dls_clear(struct fanout *fo, struct fo_batch *b)
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

void fo_batch_free(struct fanout *fo, struct fo_batch *b)
{
    if (b == NULL)
        return;
    fo_dls_clear(fo, b);
    for (size_t i = 0; i < b->n; i++) {
        status_event_cleanup(&b->ents[i].ev);
        dispatch_body_unref(b->ents[i].body);
    }
    free(b->ents);
    free(b);
}

/* ---- first attempts -------------------------------------------------------------------- */

static void commit_soon(struct fanout *fo)
{
    event_active(fo->commit_ev, EV_TIMEOUT, 0);
}

static void on_first(void *arg, enum dl_outcome outcome, const char *json, int64_t next_ms);

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
    str_copy2(did, sizeof(did), fe->ev.event_id, '.', dl->wh->id);
    fo_dl_set(dl, FO_OPEN);
    dl->h = dispatch_first(fo->dp, dl->wh, did, fe->ev.event_id, fe->body, fo->part,
                           on_first, dl);
    if (dl->h == NULL) { /* not started: recorded as pending instead */
        fo_dl_set(dl, FO_PENDING);
        dl->b->open--;
        fo->nopen--;
    }
}

/* A chain of successors that will not be sent from memory: recorded as pending, each behind
 * the one before it (the commit writes them in stream order). */
static void chain_to_pending(struct fanout *fo, struct fo_dl *dl)
{
    for (struct fo_dl *s = dl->succ; s != NULL; s = s->succ) {
        fo_dl_set(s, FO_PENDING);
        s->b->open--;
        fo->nopen--;
    }
    dl->succ = NULL;
}

/* dispatch_first_cb: the outcome of a first attempt (never inside dispatch_first). */
static void on_first(void *arg, enum dl_outcome outcome, const char *json, int64_t next_ms)
{
    struct fo_dl *dl = arg;
    struct fo_batch *b = dl->b;
    struct fanout *fo = b->fo;
    int attempted = outcome != DL_OUTCOME_NONE && outcome != DL_OUTCOME_LOCAL;
    dl->h = NULL;
    if (dl->st == FO_INFLIGHT) { /* a commit carried it in flight (its successors are pending) */
        if (!attempted) {
            /* not attempted: written pending by the next commit; if the one out lands with
             * it in flight, the lease runs out and the reaper queues it */
            fo_dl_set(dl, FO_PENDING);
            return;
        }
        fo_dl_set(dl, fo_outcome_state(outcome));
        free(dl->json);
        dl->json = xstrdup(json ? json : "{}");
        dl->num = next_ms;
        dl->late = (char)b->committing; /* else the next commit writes the outcome itself */
        return;
    }
    if (!attempted) {
        /* not attempted (endpoint deleted or disabled meanwhile), or it could not start here
         * (out of descriptors: not an attempt): recorded pending, the dispatcher sends it */
        fo_dl_set(dl, FO_PENDING);
    } else {
        fo_dl_set(dl, fo_outcome_state(outcome));
        dl->json = xstrdup(json ? json : "{}");
        dl->num = next_ms;
    }
    b->open--;
    fo->nopen--;
    struct fo_dl *s = dl->succ;
    if (s != NULL && dl->st == FO_OK) {
        dl->succ = NULL;
        send_first(fo, s); /* its own successors stay chained behind it */
    } else if (s != NULL) {
        chain_to_pending(fo, dl);
    }
    if (b->open == 0)
        commit_soon(fo);
}

/* ---- failure lines --------------------------------------------------------------------- */

/* A failed check or script comes back at every poll while Redis refuses it (a slot being
 * migrated, a master gone): the first line is logged at once, later ones of the same kind at
 * most every FO_FAIL_LOG_MS with the count of those not logged. Process-wide: the fan-outs
 * of every partition share them. */
#define FO_FAIL_LOG_MS 10000
struct fo_quiet {
    int64_t last_ms; /* mono ms of the last line; 0 = never */
    unsigned long long suppressed;
};
static struct fo_quiet quiet_check, quiet_script;

static void fail_line(struct fo_quiet *q, const char *msg, const char *err, const char *detail)
{
    int64_t now = mono_ms();
    if (q->last_ms != 0 && now - q->last_ms < FO_FAIL_LOG_MS) {
        q->suppressed++;
        return;
    }
    log_warn(msg, "err=\"%s\" suppressed=%llu", detail ? detail : err ? err : "reply",
             q->suppressed);
    q->last_ms = now;
    q->suppressed = 0;
}

/* ---- matching a batch ------------------------------------------------------------------ */

static void on_held(void *arg, const char *err, const char *msg, const struct dl_held_res *res);
static void send_held(struct fanout *fo, size_t ncand);

/* The check before the first attempts could not be made: the batch is read again later. */
static void held_failed(struct fanout *fo)
{
    fo_batch_free(fo, fo->batch);
    fo->batch = NULL;
    fo->need_pending = 1;
    fo_idle(fo);
}

static void on_reloaded(void *arg, const char *err)
{
    struct fanout *fo = arg;
    if (fo->closing)
        return;
    if (err != NULL) {
        fo_batch_free(fo, fo->batch);
        fo->batch = NULL;
        fo->need_pending = 1; /* re-read from the PEL later */
        fo_idle(fo);
        return;
    }
    fo_process_batch(fo);
}

/* Match fo->batch against the endpoints: a pair for every (event, endpoint) whose filters
 * match (endpoints that existed at the event's time); a disabled endpoint gets a skipped
 * delivery; endpoints the dispatcher should not try at once (failing, latest mode, a long
 * queue) get a pending one; the rest are candidates for a first attempt (OPEN, not sent),
 * checked for held requests by wh_held.lua. */
void fo_process_batch(struct fanout *fo)
{
    struct webhooks *w = fo->w;
    struct fo_batch *b = fo->batch;
    if (strcmp(webhooks_version(w), "-") == 0) { /* never loaded yet */
        webhooks_reload(w, on_reloaded, fo);
        return;
    }
    fo_dls_clear(fo, b);
    size_t nwh = webhooks_count(w), ncand = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct fo_entry *fe = &b->ents[i];
        if (!fe->ok)
            continue;
        struct event_subject x; /* one per event, for every endpoint */
        subject_from_event(&fe->ev, &x);
        for (size_t k = 0; k < nwh; k++) {
            struct webhook *wh = webhooks_at(w, k);
            if (!webhook_matches(wh, &x))
                continue;
            enum fo_state st = !wh->enabled                    ? FO_SKIPPED
                               : dispatch_first_ok(fo->dp, wh) ? FO_OPEN
                                                               : FO_PENDING;
            dl_add(b, i, wh, st);
            ncand += st == FO_OPEN;
        }
        subject_cleanup(&x);
    }
    send_held(fo, ncand);
}

/* The held check (wh_held.lua, after the endpoint set's version: store/deliveries.h) for the
 * ncand first-attempt candidates of fo->batch. */
static void send_held(struct fanout *fo, size_t ncand)
{
    struct fo_batch *b = fo->batch;
    struct dl_pair_ref *p = xmalloc(sizeof(*p) * (ncand ? ncand : 1));
    size_t k = 0;
    for (size_t i = 0; i < b->ndl; i++)
        if (b->dls[i]->st == FO_OPEN)
            p[k++] = (struct dl_pair_ref){.whid = b->dls[i]->wh->id,
                                          .request_id = b->ents[b->dls[i]->ev].ev.request_id};
    fo->pending++;
    if (dl_held(fo->c->store, fo->part, webhooks_version(fo->w), p, k, on_held, fo) != 0) {
        fo->pending--;
        held_failed(fo);
    }
    free(p);
}

static void on_held(void *arg, const char *err, const char *msg, const struct dl_held_res *res)
{
    struct fanout *fo = arg;
    if (fo_callback_enter(fo))
        return;
    struct fo_batch *b = fo->batch;
    if (err != NULL) {
        fail_line(&quiet_check, "webhook fan-out check failed", err, msg);
        held_failed(fo);
        return;
    }
    if (res->stale) {
        /* compared with the set's version now, not the one the batch was matched against:
         * another caller (the dispatcher's claim or version read) may have reloaded it */
        if (strcmp(res->version, webhooks_version(fo->w)) == 0)
            fo_process_batch(fo); /* reloaded meanwhile: match again */
        else
            webhooks_reload(fo->w, on_reloaded, fo); /* the endpoint set changed: match again */
        return;
    }
    const char *flags = res->flags;
    size_t nflags = res->nflags, f = 0;
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
        if (dl->st != FO_OPEN)
            continue;
        int held = f >= nflags || flags[f++] == '1'; /* behind an unfinished delivery */
        if (fo_admit_decide(held, 0, FO_PENDING) == FO_ADMIT_HELD) {
            fo_dl_set(dl, FO_PENDING);
            continue;
        }
        struct fo_dl *pred = pair_get(fo, dl);
        b->open++;
        fo->nopen++;
        switch (fo_admit_decide(0, pred != NULL, pred != NULL ? pred->st : FO_PENDING)) {
        case FO_ADMIT_CHAIN:
            fo_dl_set(dl, FO_CHAINED); /* waits for its predecessor's outcome */
            pred->succ = dl;
            pair_put(fo, dl, pred, 1);
            break;
        case FO_ADMIT_BEHIND: /* it failed or is recorded pending: behind it */
            fo_dl_set(dl, FO_PENDING);
            b->open--;
            fo->nopen--;
            pair_put(fo, dl, pred, 1);
            break;
        default: /* FO_ADMIT_SEND */
            pair_put(fo, dl, pred, 1);
            send_first(fo, dl);
            break;
        }
    }
    /* pending pairs are open pairs too: a later event of the request waits behind them */
    for (size_t i = 0; i < b->ndl; i++)
        if (b->dls[i]->st == FO_PENDING && b->dls[i]->slot == 0)
            pair_put(fo, b->dls[i], NULL, 0);
    fo->c->metrics.wh_fanout_events += b->n;
    fo_idle(fo);
    commit_soon(fo);
    if (b->n >= fo->count_asked || fo->need_pending || fo->kick_again)
        fo_step(fo);
}

/* ---- committing ------------------------------------------------------------------------ */

static void on_commit(void *arg, const char *err, const char *msg,
                      const struct dl_fanout_res *res);

/* Commit the oldest open batch once its attempts are done or it has waited long enough. */
void fo_try_commit(struct fanout *fo)
{
    struct fo_batch *b = fo->q_head;
    if (b == NULL || b->committing || fo->closing || !store_ready(fo->c->store))
        return;
    if (b->open > 0 && mono_ms() - b->t0 < FANOUT_COMMIT_WAIT_MS)
        return;
    int64_t lease_end = wall_ms() + fo->c->cfg->delivery_lease_ms;
    /* an attempt still in flight is recorded so (with a lease); it stays ours until the
     * commit lands (on_commit detaches it), so an outcome that comes before is written by a
     * commit again or after it, never before its record exists */
    for (size_t i = 0; i < b->ndl; i++) {
        struct fo_dl *dl = b->dls[i];
        struct fo_commit_step st = fo_commit_decide(dl->st, dl->h != NULL);
        fo_dl_set(dl, st.st);
        if (st.lease)
            dl->num = lease_end;
        if (st.closes) {
            b->open--;
            fo->nopen--;
        }
        if (st.unchain)
            chain_to_pending(fo, dl);
    }
    struct dl_fanout a;
    struct dl_fanout_opts o = {
        .part = fo->part,
        .view = wh_view_of(fo->c, fo->w),
        .replay = 0,
        .version = NULL, /* checked with wh_held.lua before the first attempts */
        .holder = fo->c->instance_id,
        .group = FANOUT_GROUP,
        .now_ms = wall_ms(),
        .retention_ms = WH_RETENTION_MS,
        .disable_after_ms = fo->c->cfg->disable_after_ms,
        .list_cap = WH_LIST_CAP,
    };
    dl_fanout_begin(&a, fo->c->store, &o);
    size_t d = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct fo_entry *fe = &b->ents[i];
        if (!fe->ok) {
            dl_fanout_event(&a, fe->sid, NULL);
            continue;
        }
        dl_fanout_event(&a, fe->sid, &fe->ev);
        int need_body = 0;
        for (; d < b->ndl && b->dls[d]->ev == i; d++) {
            struct fo_dl *dl = b->dls[d];
            enum dl_pair k = fo_state_pair(dl->st);
            dl_fanout_pair(&a, dl->wh->id, k, dl->json, dl->num);
            need_body |= dl_pair_needs_body(k);
        }
        if (need_body) {
            size_t blen = 0;
            const char *body = fe->body ? dispatch_body_data(fe->body, &blen) : NULL;
            int own = 0;
            if (body == NULL) {
                body = proto_event_webhook_body(&fe->ev, &blen);
                if (body == NULL) {
                    log_err("webhook body encoding failed", "event=%s", fe->ev.event_id);
                    abort(); /* out of memory: relay/ aborts, see STYLE 4 */
                }
                own = 1;
            }
            dl_fanout_body(&a, body, blen, own);
        }
    }
    b->committing = 1;
    fo->pending++;
    if (dl_fanout_send(&a, on_commit, fo) != 0) {
        fo->pending--;
        b->committing = 0; /* tried again on the next poll */
    }
    dl_fanout_free(&a);
}

static void on_commit(void *arg, const char *err, const char *msg,
                      const struct dl_fanout_res *res)
{
    struct fanout *fo = arg;
    if (fo_callback_enter(fo))
        return;
    struct fo_batch *b = fo->q_head;
    if (b == NULL)
        return;
    b->committing = 0;
    if (err != NULL) {
        /* unknown whether it ran: the script is idempotent, the next poll writes it again,
         * with the outcomes that came meanwhile */
        fail_line(&quiet_script, "webhook fan-out script failed", err, msg);
        for (size_t i = 0; i < b->ndl; i++)
            b->dls[i]->late = 0;
        return;
    }
    long long code = res->code;
    fo->q_head = b->next;
    if (fo->q_head == NULL)
        fo->q_tail = NULL;
    fo->nq--;
    if (code == -2) { /* the lease went to another process: it sends these entries again */
        if (fo->leader && fo->share != NULL)
            fo->share->held--;
        fo->leader = 0;
        fo_batch_free(fo, b);
        while (fo->q_head) {
            struct fo_batch *x = fo->q_head;
            fo->q_head = x->next;
            fo_batch_free(fo, x);
        }
        fo->q_tail = NULL;
        fo->nq = 0;
        return;
    }
    /* the records exist now: attempts still in flight report to wh_done.lua from here on,
     * outcomes that came while this commit was out are written by it now */
    for (size_t i = 0; i < b->ndl; i++) {
        struct fo_dl *dl = b->dls[i];
        if (dl->st == FO_INFLIGHT && dl->h != NULL) {
            dispatch_first_detach(fo->dp, dl->h);
            dl->h = NULL;
        } else if (dl->late) {
            char did[PROTO_EVENT_ID_MAX + WH_ID_MAX + 2];
            str_copy2(did, sizeof(did), b->ents[dl->ev].ev.event_id, '.', dl->wh->id);
            dispatch_report(fo->dp, dl->wh, did, fo->part, fo_state_outcome(dl->st), dl->json,
                            dl->num);
            dl->late = 0;
        }
    }
    fo->c->metrics.wh_deliveries_created += (uint64_t)res->created;
    wh_view_health(fo->c, &res->pairs); /* endpoints disabled: logged, counted, reloaded */
    int queued = 0;
    for (size_t i = 0; i < b->ndl && !queued; i++)
        queued = b->dls[i]->st == FO_PENDING || b->dls[i]->st == FO_RETRY;
    fo_batch_free(fo, b);
    if (queued)
        dispatch_kick(fo->dp);
    fo_try_commit(fo);
    fo_step(fo);
}

void fo_on_commit_ev(evutil_socket_t fd, short what, void *arg)
{
    fo_try_commit(arg);
}
