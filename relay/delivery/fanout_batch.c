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

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void fo_dls_clear(struct fanout *fo, struct fo_batch *b)
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
    dl->h = dispatch_first(fo->dp, dl->wh, did, fe->ev.event_id, fe->body, fo->part,
                           on_first, dl);
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

/* The kind (store/wh_fanout.lua) of a first attempt's outcome, and back. */
static char out_code(const char *outcome)
{
    return strcmp(outcome, "ok") == 0      ? 'o'
           : strcmp(outcome, "retry") == 0 ? 'r'
           : strcmp(outcome, "gone") == 0  ? 'g'
                                           : 'd';
}

static const char *out_name(char out)
{
    return out == 'o' ? "ok" : out == 'r' ? "retry" : out == 'g' ? "gone" : "dead";
}

/* dispatch_first_cb: the outcome of a first attempt (maybe inside dispatch_first). */
static void on_first(void *arg, const char *outcome, const char *json, int64_t next_ms)
{
    struct fo_dl *dl = arg;
    struct fo_batch *b = dl->b;
    struct fanout *fo = b->fo;
    dl->h = NULL;
    if (dl->out == 'f') { /* a commit carried it as in flight (its successors are pending) */
        if (outcome == NULL || strcmp(outcome, "local") == 0) {
            /* not attempted: written pending by the next commit; if the one out lands with
             * 'f', the lease runs out and the reaper queues it */
            dl->kind = 'p';
            dl->out = 0;
            return;
        }
        dl->out = out_code(outcome);
        free(dl->json);
        dl->json = xstrdup(json ? json : "{}");
        dl->num = next_ms;
        dl->late = (char)b->committing; /* else the next commit writes the outcome itself */
        return;
    }
    if (outcome == NULL || strcmp(outcome, "local") == 0) {
        /* not attempted (endpoint deleted or disabled meanwhile), or it could not start here
         * (out of descriptors: not an attempt): recorded pending, the dispatcher sends it */
        dl->kind = 'p';
    } else {
        dl->out = out_code(outcome);
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

static void fail_line(struct fo_quiet *q, const char *msg, const char *err, redisReply *r)
{
    int64_t now = mono_ms();
    if (q->last_ms != 0 && now - q->last_ms < FO_FAIL_LOG_MS) {
        q->suppressed++;
        return;
    }
    log_warn(msg, "err=\"%s\" suppressed=%llu", r && r->str ? r->str : err ? err : "reply",
             q->suppressed);
    q->last_ms = now;
    q->suppressed = 0;
}

/* ---- matching a batch ------------------------------------------------------------------ */

static void on_held(void *arg, const char *err, redisReply *r);
static void on_whv(void *arg, const char *err, redisReply *r);
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
 * queue) get a pending one; the rest are candidates for a first attempt, checked for held
 * requests by wh_held.lua. */
void fo_process_batch(struct fanout *fo)
{
    struct webhooks *w = fo->w;
    struct fo_batch *b = fo->batch;
    if (strcmp(webhooks_version(w), "-") == 0) { /* never loaded yet */
        webhooks_reload(w, on_reloaded, fo);
        return;
    }
    fo_dls_clear(fo, b);
    snprintf(fo->matched_ver, sizeof(fo->matched_ver), "%s", webhooks_version(w));
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
    if (store_partitions(fo->c->store) > 1) {
        /* several partitions: the version (a deployment key) is read first, then wh_held.lua
         * runs on the partition alone (one slot per script) */
        fo->pending++;
        if (store_cmd(fo->c->store, on_whv, fo, "GET %s", fo->k_whv) != 0) {
            fo->pending--;
            held_failed(fo);
        }
        return;
    }
    send_held(fo, ncand);
}

/* wh_held.lua for the ncand first-attempt candidates of fo->batch. */
static void send_held(struct fanout *fo, size_t ncand)
{
    struct webhooks *w = fo->w;
    struct fo_batch *b = fo->batch;
    int several = store_partitions(fo->c->store) > 1;
    int argc = 3 + 2 * (int)ncand;
    const char **argv = xmalloc(sizeof(char *) * (size_t)argc);
    /* several partitions: KEYS[1] is a key of the partition (the version was checked) */
    argv[0] = several ? fo->k_events : fo->k_whv;
    argv[1] = store_part_tag(fo->c->store, fo->part); /* order sets: the partition's */
    argv[2] = several ? "*" : webhooks_version(w);
    int k = 3;
    for (size_t i = 0; i < b->ndl; i++)
        if (b->dls[i]->kind == 'a') {
            argv[k++] = b->dls[i]->wh->id;
            argv[k++] = b->ents[b->dls[i]->ev].ev.request_id;
        }
    fo->pending++;
    if (store_eval(fo->c->store, &fo->sc_held, on_held, fo, 1, argc, argv, NULL) != 0) {
        fo->pending--;
        held_failed(fo);
    }
    free(argv);
}

static void on_whv(void *arg, const char *err, redisReply *r)
{
    struct fanout *fo = arg;
    if (fo_callback_enter(fo))
        return;
    if (err != NULL || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
        fail_line(&quiet_check, "webhook fan-out check failed", err, r);
        held_failed(fo);
        return;
    }
    /* compared with the version the batch was matched against, not the set's now: another
     * caller (the dispatcher's version read) may have reloaded the set meanwhile */
    const char *ver = r->type == REDIS_REPLY_STRING ? r->str : "0";
    if (strcmp(ver, fo->matched_ver) != 0) {
        if (strcmp(ver, webhooks_version(fo->w)) == 0)
            fo_process_batch(fo); /* reloaded meanwhile: match again */
        else
            webhooks_reload(fo->w, on_reloaded, fo); /* the endpoint set changed: match again */
        return;
    }
    size_t ncand = 0;
    for (size_t i = 0; i < fo->batch->ndl; i++)
        ncand += fo->batch->dls[i]->kind == 'a';
    send_held(fo, ncand);
}

static void on_held(void *arg, const char *err, redisReply *r)
{
    struct fanout *fo = arg;
    if (fo_callback_enter(fo))
        return;
    struct fo_batch *b = fo->batch;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        fail_line(&quiet_check, "webhook fan-out check failed", err, r);
        fo_batch_free(fo, b);
        fo->batch = NULL;
        fo->need_pending = 1;
        fo_idle(fo);
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
    fo_idle(fo);
    commit_soon(fo);
    if (b->n >= fo->count_asked || fo->need_pending || fo->kick_again)
        fo_step(fo);
}

/* ---- committing ------------------------------------------------------------------------ */

static void on_commit(void *arg, const char *err, redisReply *r);

/* Commit the oldest open batch once its attempts are done or it has waited long enough. */
void fo_try_commit(struct fanout *fo)
{
    struct fo_batch *b = fo->q_head;
    if (b == NULL || b->committing || fo->closing || !store_ready(fo->c->store))
        return;
    if (b->open > 0 && mono_ms() - b->t0 < FANOUT_COMMIT_WAIT_MS)
        return;
    int64_t lease_end = wall_ms() + fo->c->cfg->delivery_lease_ms;
    for (size_t i = 0; i < b->ndl; i++) {
        struct fo_dl *dl = b->dls[i];
        /* still in flight: recorded so (with a lease); the attempt stays ours until the commit
         * lands (on_commit detaches it), so an outcome that comes before is written by a
         * commit again or after it, never before its record exists */
        if (dl->kind == 'a' && dl->out == 0 && dl->h != NULL) {
            dl->out = 'f';
            dl->num = lease_end;
            b->open--;
            fo->nopen--;
            chain_to_pending(fo, dl);
        } else if (dl->kind == 'a' && dl->out == 'f' && dl->h != NULL) {
            dl->num = lease_end; /* written again after a failed commit: a fresh lease */
        } else if (dl->kind == 'c') { /* its predecessor is recorded first, in stream order */
            dl->kind = 'p';
            b->open--;
            fo->nopen--;
        }
    }
    struct fanout_args a;
    fanout_args_begin(&a, fo->c, fo->w, 0, fo->part);
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
    if (fo_callback_enter(fo))
        return;
    struct fo_batch *b = fo->q_head;
    if (b == NULL)
        return;
    b->committing = 0;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        /* unknown whether it ran: the script is idempotent, the next poll writes it again,
         * with the outcomes that came meanwhile */
        fail_line(&quiet_script, "webhook fan-out script failed", err, r);
        for (size_t i = 0; i < b->ndl; i++)
            b->dls[i]->late = 0;
        return;
    }
    long long code = r->element[0]->integer;
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
        if (dl->kind == 'a' && dl->out == 'f' && dl->h != NULL) {
            dispatch_first_detach(fo->dp, dl->h);
            dl->h = NULL;
        } else if (dl->late) {
            char did[PROTO_EVENT_ID_MAX + WH_ID_MAX + 2];
            snprintf(did, sizeof(did), "%s.%s", b->ents[dl->ev].ev.event_id, dl->wh->id);
            dispatch_report(fo->dp, dl->wh, did, fo->part, out_name(dl->out), dl->json,
                            dl->num);
            dl->late = 0;
        }
    }
    long long created = r->elements > 1 ? r->element[1]->integer : 0;
    fo->c->metrics.wh_deliveries_created += (uint64_t)created;
    int reload = 0;
    if (store_partitions(fo->c->store) > 1) /* health outcomes, for the deployment's hashes */
        wh_view_health(fo->c, r, 2);
    for (size_t i = 2; store_partitions(fo->c->store) <= 1 && i + 1 < r->elements; i += 2) {
        log_warn("webhook endpoint disabled", "webhook=%s reason=%s", r->element[i]->str,
                 r->element[i + 1]->str);
        fo->c->metrics.wh_endpoints_disabled++;
        reload = 1;
    }
    int queued = 0;
    for (size_t i = 0; i < b->ndl && !queued; i++)
        queued = b->dls[i]->kind == 'p' || (b->dls[i]->kind == 'a' && b->dls[i]->out == 'r');
    fo_batch_free(fo, b);
    if (reload)
        webhooks_reload(fo->w, NULL, NULL);
    if (queued)
        dispatch_kick(fo->dp);
    fo_try_commit(fo);
    fo_step(fo);
}

void fo_on_commit_ev(evutil_socket_t fd, short what, void *arg)
{
    fo_try_commit(arg);
}
