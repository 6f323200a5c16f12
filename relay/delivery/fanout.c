/* fanout.c - see fanout.h. runs on: core thread.
 *
 * State: leader (holds {P}:fanout) -> group_ready (XGROUP CREATE done) -> need_claim
 * (XAUTOCLAIM the previous holder's pending entries) -> need_pending (re-read our own
 * pending entries from id 0) -> reading new entries (">"). One Redis step at a time (busy).
 * Ownership: the batch being fanned out (decoded events) belongs to the fanout until its
 * script succeeded, so an endpoint-set change (script answers -1) re-matches the same batch
 * after a reload. The object outlives its in-flight commands (pending count). */
#include "relay/delivery/fanout.h"
#include "relay/core.h"
#include "relay/delivery/dispatch.h"
#include "relay/ingest/ingest.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/delivery/endpoints.h"
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

struct fo_entry {
    char sid[48];
    int ok; /* decoded */
    struct status_event ev;
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
    struct store_script sc_lease;
    const struct store_script *sc_fanout;
    struct event *lease_ev, *poll_ev, *kick_ev;
    int closing, pending;
    int leader, group_ready, need_claim, need_pending, busy;
    int kick_again; /* new events while a step was in flight: read again after it */
    struct fo_entry *batch;
    size_t nbatch, count_asked;
    char claim_cursor[48];
    struct fo_pre *pre_head, *pre_tail; /* owned */
    size_t npre;
    char k_events[KEY_MAX], k_lease[KEY_MAX];
};

static void step(struct fanout *fo);
static void process_batch(struct fanout *fo);

static void batch_free(struct fanout *fo)
{
    for (size_t i = 0; i < fo->nbatch; i++)
        status_event_cleanup(&fo->batch[i].ev);
    free(fo->batch);
    fo->batch = NULL;
    fo->nbatch = 0;
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
    batch_free(fo);
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

static const char *field_of(const redisReply *fields, const char *name, size_t *len)
{
    if (fields == NULL || fields->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < fields->elements; i += 2)
        if (fields->element[i]->str && strcmp(fields->element[i]->str, name) == 0) {
            *len = fields->element[i + 1]->len;
            return fields->element[i + 1]->str;
        }
    return NULL;
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
    const redisReply *entries = NULL;
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements == 2)
        entries = r->element[0]->element[1];
    size_t n = entries && entries->type == REDIS_REPLY_ARRAY ? entries->elements : 0;
    if (n == 0) {
        if (fo->need_pending || fo->kick_again) {
            fo->need_pending = 0;
            step(fo);
        }
        return;
    }
    batch_free(fo);
    fo->batch = xcalloc(n, sizeof(*fo->batch));
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = entries->element[i];
        struct fo_entry *fe = &fo->batch[fo->nbatch];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 || e->element[0]->str == NULL)
            continue;
        snprintf(fe->sid, sizeof(fe->sid), "%s", e->element[0]->str);
        status_event_init(&fe->ev);
        size_t len = 0;
        const char *rec = field_of(e->element[1], "rec", &len);
        struct proto_err pe = {0};
        if (pre_take(fo, fe->sid, &fe->ev))
            fe->ok = 1;
        else if (rec != NULL && proto_event_from_record(rec, len, &fe->ev, &pe) == 0)
            fe->ok = 1;
        else if (rec != NULL)
            log_warn("event record unreadable, not fanned out", "stream_id=%s err=%s field=%s",
                     fe->sid, proto_strerror(pe.code), pe.field);
        fo->nbatch++;
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
    if (fo->closing || !fo->leader || !store_ready(fo->c->store))
        return;
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

/* ---- fanning out ----------------------------------------------------------------------- */

static void on_reloaded(void *arg, const char *err)
{
    struct fanout *fo = arg;
    if (fo->closing)
        return;
    if (err != NULL) {
        batch_free(fo);
        fo->need_pending = 1; /* re-read from the PEL later */
        idle(fo);
        return;
    }
    process_batch(fo);
}

static void on_fanout(void *arg, const char *err, redisReply *r)
{
    struct fanout *fo = arg;
    if (callback_enter(fo))
        return;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1) {
        log_warn("webhook fan-out script failed", "err=\"%s\"",
                 r && r->str ? r->str : err ? err : "reply");
        batch_free(fo);
        fo->need_pending = 1;
        idle(fo);
        return;
    }
    long long code = r->element[0]->integer;
    if (code == -1) {
        webhooks_reload(fo->w, on_reloaded, fo); /* the endpoint set changed: match again */
        return;
    }
    size_t n = fo->nbatch;
    batch_free(fo);
    idle(fo);
    if (code == -2) {
        fo->leader = 0;
        return;
    }
    long long created = r->elements > 1 ? r->element[1]->integer : 0;
    fo->c->metrics.wh_fanout_events += n;
    fo->c->metrics.wh_deliveries_created += (uint64_t)created;
    if (created > 0)
        dispatch_kick(fo->dp);
    if (n >= fo->count_asked || fo->need_pending || fo->kick_again)
        step(fo);
}

/* ---- wh_fanout.lua arguments (fanout.h) ------------------------------------------------ */

static void av_own(struct fanout_args *a, char *s)
{
    if (a->nowned == a->capowned) {
        a->capowned = a->capowned ? a->capowned * 2 : 64;
        a->owned = xrealloc(a->owned, a->capowned * sizeof(*a->owned));
    }
    a->owned[a->nowned++] = s;
}

static void av_push(struct fanout_args *a, const char *s, size_t len, int own)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 64;
        a->v = xrealloc(a->v, a->cap * sizeof(*a->v));
        a->lens = xrealloc(a->lens, a->cap * sizeof(*a->lens));
    }
    a->v[a->n] = s;
    a->lens[a->n++] = len;
    if (own)
        av_own(a, (char *)s);
}

static void av_str(struct fanout_args *a, const char *s)
{
    av_push(a, s, strlen(s), 0);
}

static void av_num(struct fanout_args *a, long long v)
{
    char *s = xasprintf("%lld", v);
    av_push(a, s, strlen(s), 1);
}

static void av_key(struct fanout_args *a, const char *tag, const char *kind)
{
    char *k = xmalloc(KEY_MAX);
    key_build(k, KEY_MAX, tag, kind, NULL, NULL);
    av_push(a, k, strlen(k), 1);
}

void fanout_args_begin(struct fanout_args *a, struct core *c, struct webhooks *w, int replay)
{
    const char *tag = store_tag(c->store);
    memset(a, 0, sizeof(*a));
    av_key(a, tag, "events");
    av_key(a, tag, "whv");
    av_key(a, tag, "fanout");
    av_str(a, tag);
    av_str(a, webhooks_version(w));
    av_str(a, c->instance_id);
    av_num(a, wall_ms());
    av_str(a, FANOUT_GROUP);
    av_num(a, WH_RETENTION_MS);
    av_str(a, replay ? "1" : "0");
    av_num(a, WH_LIST_CAP);
}

long long fanout_args_event(struct fanout_args *a, struct webhooks *w, const char *sid,
                            const struct status_event *ev, fanout_match_cb *match, void *arg,
                            int flags)
{
    size_t at = a->n;
    av_str(a, sid);
    if (ev == NULL) { /* deleted or unreadable entry: acknowledged, nothing to deliver */
        for (int k = 0; k < 6; k++)
            av_push(a, "", 0, 0);
        av_push(a, "0", 1, 0);
        a->events++;
        return 0;
    }
    av_str(a, ev->event_id);
    av_str(a, ev->request_id);
    av_num(a, (long long)ev->seq);
    av_str(a, ev->status ? ev->status : "");
    av_num(a, ev->created_at);
    size_t body_at = a->n;
    av_push(a, "", 0, 0); /* body, filled below when some endpoint matches */
    size_t n_at = a->n;
    av_push(a, "0", 1, 0);
    long long nmatch = 0;
    size_t nwh = webhooks_count(w);
    for (size_t k = 0; k < nwh; k++) {
        struct webhook *wh = webhooks_at(w, k);
        char m = match(arg, wh, ev);
        if (m == 0)
            continue;
        av_str(a, wh->id);
        av_push(a, m == 's' ? "s" : "p", 1, 0);
        nmatch++;
    }
    if (nmatch == 0 && !(flags & FANOUT_ARGS_KEEP_EMPTY)) {
        a->n = at; /* nothing for this event (owned strings stay owned until freed) */
        return 0;
    }
    if (nmatch > 0 && !(flags & FANOUT_ARGS_NO_BODY)) {
        size_t blen = 0;
        char *body = proto_event_webhook_body(ev, &blen);
        if (body == NULL) {
            log_err("webhook body encoding failed", "event=%s", ev->event_id);
            abort(); /* out of memory: relay/ aborts, see STYLE 4 */
        }
        a->v[body_at] = body;
        a->lens[body_at] = blen;
        av_own(a, body);
    }
    if (nmatch > 0) {
        char *ns = xasprintf("%lld", nmatch);
        a->v[n_at] = ns;
        a->lens[n_at] = strlen(ns);
        av_own(a, ns);
    }
    a->events++;
    return nmatch;
}

void fanout_args_free(struct fanout_args *a)
{
    for (size_t i = 0; i < a->nowned; i++)
        free(a->owned[i]);
    free(a->v);
    free(a->lens);
    free(a->owned);
    memset(a, 0, sizeof(*a));
}

/* Live fan-out: every endpoint whose filters match and that existed at the event's time;
 * a disabled one gets a skipped delivery. */
static char live_match(void *arg, const struct webhook *wh, const struct status_event *ev)
{
    return webhook_matches(wh, ev) ? (wh->enabled ? 'p' : 's') : 0;
}

static void process_batch(struct fanout *fo)
{
    struct webhooks *w = fo->w;
    if (strcmp(webhooks_version(w), "-") == 0) { /* never loaded yet */
        webhooks_reload(w, on_reloaded, fo);
        return;
    }
    struct fanout_args a;
    fanout_args_begin(&a, fo->c, w, 0);
    for (size_t i = 0; i < fo->nbatch; i++) {
        struct fo_entry *fe = &fo->batch[i];
        fanout_args_event(&a, w, fe->sid, fe->ok ? &fe->ev : NULL, live_match, NULL,
                          FANOUT_ARGS_KEEP_EMPTY);
    }
    fo->pending++;
    int r = store_eval(fo->c->store, fo->sc_fanout, on_fanout, fo, 3, (int)a.n, a.v, a.lens);
    fanout_args_free(&a);
    if (r != 0) {
        fo->pending--;
        batch_free(fo);
        fo->need_pending = 1;
        idle(fo);
    }
}

/* ---- wiring ---------------------------------------------------------------------------- */

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    step(arg);
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    step(arg);
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
    fo->sc_fanout = webhooks_script(w, WH_SC_FANOUT);
    const char *tag = store_tag(c->store);
    key_build(fo->k_events, KEY_MAX, tag, "events", NULL, NULL);
    key_build(fo->k_lease, KEY_MAX, tag, "fanout", NULL, NULL);
    fo->lease_ev = event_new(c->base, -1, EV_PERSIST, on_lease_tick, fo);
    fo->poll_ev = event_new(c->base, -1, EV_PERSIST, on_poll, fo);
    fo->kick_ev = event_new(c->base, -1, 0, on_kick, fo);
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
    /* The ingest listener cannot be removed: it checks closing. ingest is freed after us
     * (core_free order), and never calls listeners after its owner stops the loop. */
    if (fo->pending == 0)
        obj_free(fo);
}
