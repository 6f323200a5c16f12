/* apply.c - see apply.h. runs on: core thread.
 *
 * Steps per observation: HGET rec -> proto_lifecycle_decide -> EVALSHA apply.lua with the
 * expected seq. A conflict (another process or an earlier in-flight observation wrote first)
 * returns the current record, and we decide again; bounded to a few rounds.
 *
 * A small direct-mapped cache keeps the last state this process wrote or read per request
 * (APPLY_CACHE_SLOTS, a colliding request just takes the slot). An observation the cached
 * state accepts skips the HGET and the decode: the write is still a compare-and-set on seq,
 * so a stale entry only costs a conflict round. Anything the cache would not accept
 * (duplicate, stale) is decided against Redis as before, so no observation is ever dropped
 * on the cache's word.
 *
 * Tracking metadata: the record is encoded here without it; apply.lua appends the request's
 * metadata (read inside the script, so it is the value at the moment of the write) and
 * returns it, and the written event (the callback's ev) gets the same compact text, so an
 * event rendered from ev and one decoded from the stored record are the same bytes.
 *
 * Confirmation time: the hash's "cf" is when the upstream last confirmed the stored state (the
 * fresh status reads of relay/api/compat.c). apply.lua sets it with every applied event; an
 * observation Redis shows to be a duplicate sets it with store/apply_confirm.lua (one write,
 * not waited for). */
#include "store/command.h"
#include "store/apply.h"
#include "store/keys.h"
#include "store/search.h"
#include "relay/common/log.h"
#include "relay/common/siphash.h"
#include "relay/common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define APPLY_MAX_ROUNDS 8
#define TIMELINE_CAP "200"
#define APPLY_CACHE_SLOTS 8192 /* ~1 KB each: at most ~8 MB whatever the traffic */

struct cache_slot {
    int used;
    struct status_event ev; /* owned copy; ev.request_id is the key */
};

struct applier {
    struct store *s;
    struct store_script script, confirm_sc;
    char maxlen[24];
    apply_poll_policy_cb *policy;
    void *policy_arg;
    char wttl[24], settled[24], ftail[24]; /* watch windows, ms */
    apply_refund_failure_cb *on_refund;
    void *on_refund_arg;
    struct cache_slot *cache; /* APPLY_CACHE_SLOTS entries */
};

struct apply_op {
    struct applier *a;
    struct status_event obs;
    struct status_event next;
    int track;
    int rounds;
    int cached; /* decided against the cache: anything but an accept asks Redis */
    int refund_new; /* the accepted event sets a refundFailReason the last state lacked */
    apply_done_cb *cb;
    void *arg;
};

static struct cache_slot *cache_slot(struct applier *a, const char *id)
{
    return &a->cache[sip_str32(id) % APPLY_CACHE_SLOTS]; /* keyed: ids cannot be aimed at a slot */
}

static const struct status_event *cache_get(struct applier *a, const char *id)
{
    struct cache_slot *sl = cache_slot(a, id);
    return sl->used && strcmp(sl->ev.request_id, id) == 0 ? &sl->ev : NULL;
}

static void cache_drop(struct applier *a, const char *id)
{
    struct cache_slot *sl = cache_slot(a, id);
    if (sl->used && strcmp(sl->ev.request_id, id) == 0) {
        status_event_cleanup(&sl->ev);
        sl->used = 0;
    }
}

static void cache_put(struct applier *a, const struct status_event *ev)
{
    if (ev->request_id == NULL)
        return;
    struct cache_slot *sl = cache_slot(a, ev->request_id);
    if (sl->used)
        status_event_cleanup(&sl->ev);
    sl->used = status_event_copy(&sl->ev, ev) == 0; /* out of memory: just not cached */
}

struct applier *applier_new(struct store *s, int64_t stream_maxlen,
                            apply_poll_policy_cb *policy, void *policy_arg)
{
    struct applier *a = xcalloc(1, sizeof(*a));
    a->s = s;
    store_script_init(&a->script, "apply");
    store_script_init(&a->confirm_sc, "apply_confirm");
    snprintf(a->maxlen, sizeof(a->maxlen), "%lld", (long long)stream_maxlen);
    applier_set_watch(a, 86400000, 86400000, 7 * 86400000LL);
    a->policy = policy;
    a->policy_arg = policy_arg;
    a->cache = xcalloc(APPLY_CACHE_SLOTS, sizeof(*a->cache));
    return a;
}

void applier_set_watch(struct applier *a, int64_t waiting_ttl, int64_t settled_watch,
                       int64_t failure_tail)
{
    snprintf(a->wttl, sizeof(a->wttl), "%lld", (long long)waiting_ttl);
    snprintf(a->settled, sizeof(a->settled), "%lld", (long long)settled_watch);
    snprintf(a->ftail, sizeof(a->ftail), "%lld", (long long)failure_tail);
}

void applier_on_refund_failure(struct applier *a, apply_refund_failure_cb *fn, void *arg)
{
    a->on_refund = fn;
    a->on_refund_arg = arg;
}

void applier_free(struct applier *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < APPLY_CACHE_SLOTS; i++)
        if (a->cache[i].used)
            status_event_cleanup(&a->cache[i].ev);
    free(a->cache);
    free(a);
}

static void on_read(void *arg, const char *err, redisReply *r);

static int read_state(struct apply_op *op)
{
    char k_req[KEY_MAX];
    key_build(k_req, sizeof(k_req), store_tag_of(op->a->s, op->obs.request_id), "req",
              op->obs.request_id, NULL);
    return store_cmd(op->a->s, on_read, op, "HGET %s rec", k_req);
}

static void op_finish(struct apply_op *op, const char *err, enum proto_verdict v,
                      const char *sid)
{
    op->cb(op->arg, err, v, v == PROTO_ACCEPT && err == NULL ? &op->next : NULL, sid);
    status_event_cleanup(&op->obs);
    status_event_cleanup(&op->next);
    free(op);
}

static void on_script(void *arg, const char *err, redisReply *r);

/* The upstream repeated the stored state of id at now: its "cf" (apply_confirm.lua). */
static void confirm(struct applier *a, const char *id, int64_t now)
{
    char k_req[KEY_MAX], nowbuf[24];
    key_build(k_req, sizeof(k_req), store_tag_of(a->s, id), "req", id, NULL);
    snprintf(nowbuf, sizeof(nowbuf), "%lld", (long long)now);
    const char *argv[] = {k_req, nowbuf};
    store_eval(a->s, &a->confirm_sc, NULL, NULL, 1, 2, argv, NULL);
}

/* Decide against last (NULL = unknown) and write if accepted. */
static void decide_and_write(struct apply_op *op, const struct status_event *last)
{
    struct applier *a = op->a;
    enum proto_verdict v;
    status_event_cleanup(&op->next);
    int64_t now = wall_ms();
    if (proto_lifecycle_decide(last, &op->obs, now, &v, &op->next) != 0) {
        log_err("lifecycle decision failed", "request=%s", op->obs.request_id);
        op_finish(op, store_err_server, PROTO_STALE, NULL);
        return;
    }
    if (v != PROTO_ACCEPT && op->cached) {
        op->cached = 0; /* the cache may be behind: only Redis may say "not new" */
        if (read_state(op) != 0)
            op_finish(op, store_err_disconnected, PROTO_STALE, NULL);
        return;
    }
    if (v != PROTO_ACCEPT) {
        if (v == PROTO_DUPLICATE && last != NULL && !(op->obs.flags & PROTO_F_FACTS))
            confirm(a, op->obs.request_id, now); /* decided against Redis: it holds this state */
        op_finish(op, NULL, v, NULL);
        return;
    }
    struct status_event *ev = &op->next;
    free(ev->metadata); /* apply.lua adds the request's own (never twice: it must be last) */
    ev->metadata = NULL;
    size_t reclen;
    char *rec = proto_event_record(ev, &reclen);
    if (rec == NULL) {
        op_finish(op, store_err_server, PROTO_STALE, NULL);
        return;
    }
    const char *id = ev->request_id;
    const char *old_status = last ? last->status : ev->status;
    char k_req[KEY_MAX], k_ev[KEY_MAX], k_all[KEY_MAX], k_st[KEY_MAX], k_old[KEY_MAX],
        k_tl[KEY_MAX], k_poll[KEY_MAX];
    const char *tag = store_tag_of(a->s, id); /* the request's partition */
    key_build(k_req, sizeof(k_req), tag, "req", id, NULL);
    key_build(k_ev, sizeof(k_ev), tag, "events", NULL, NULL);
    key_build(k_all, sizeof(k_all), tag, "all", NULL, NULL);
    key_build(k_st, sizeof(k_st), tag, "st", ev->status, NULL);
    key_build(k_old, sizeof(k_old), tag, "st", old_status, NULL);
    key_build(k_tl, sizeof(k_tl), tag, "tl", id, NULL);
    key_build(k_poll, sizeof(k_poll), tag, "poll", NULL, NULL);
    char expected[24], seq[24], nowbuf[24], pollbuf[24] = "";
    snprintf(expected, sizeof(expected), "%llu", (unsigned long long)(last ? last->seq : 0));
    snprintf(seq, sizeof(seq), "%llu", (unsigned long long)ev->seq);
    snprintf(nowbuf, sizeof(nowbuf), "%lld", (long long)now);
    char tier[2] = "a";
    int64_t np = a->policy ? a->policy(a->policy_arg, ev, now, &tier[0]) : now;
    snprintf(pollbuf, sizeof(pollbuf), "%lld", (long long)(np >= 0 ? np : now));
    const char *rfr = ev->refund_fail_reason;
    op->refund_new = rfr != NULL && strcmp(rfr, "N/A") != 0 &&
                     (last == NULL || last->refund_fail_reason == NULL ||
                      strcmp(last->refund_fail_reason, rfr) != 0);
    /* the search index entries this record adds (store/search.h): usually none */
    struct store_search_ents ents = {0};
    store_search_event_entries(last, ev, &ents);
    char cap[24];
    snprintf(cap, sizeof(cap), "%d", STORE_SEARCH_CAP);
    const char *base[] = {k_req, k_ev, k_all, k_st, k_old, k_tl, k_poll,
                          expected, seq, rec, ev->status, ev->event_id, id, a->maxlen,
                          nowbuf, pollbuf, proto_source_name(ev->source), TIMELINE_CAP,
                          op->track ? "1" : "0", tier, tag, a->wttl, a->settled, a->ftail, cap};
    size_t argc = ARRAY_LEN(base) + ents.n;
    const char **argv = xcalloc(argc, sizeof(*argv));
    size_t *lens = xcalloc(argc, sizeof(*lens));
    memcpy(argv, base, sizeof(base));
    for (size_t i = 0; i < ents.n; i++)
        argv[ARRAY_LEN(base) + i] = ents.v[i];
    for (size_t i = 0; i < argc; i++)
        lens[i] = argv[i] == rec ? reclen : strlen(argv[i]);
    int rc = store_eval(a->s, &a->script, on_script, op, 7, (int)argc, argv, lens);
    free(argv);
    free(lens);
    store_search_ents_free(&ents);
    free(rec);
    if (rc != 0)
        op_finish(op, store_err_disconnected, PROTO_STALE, NULL);
}

/* Decode a stored record (or nil) and decide. */
static void decide_from_reply(struct apply_op *op, redisReply *rec)
{
    if (rec == NULL || rec->type != REDIS_REPLY_STRING) {
        decide_and_write(op, NULL);
        return;
    }
    struct status_event last;
    struct proto_err perr;
    status_event_init(&last);
    if (proto_event_from_record(rec->str, rec->len, &last, &perr) != 0) {
        log_err("stored state unreadable", "request=%s err=%s field=%s", op->obs.request_id,
                proto_strerror(perr.code), perr.field);
        status_event_cleanup(&last);
        op_finish(op, store_err_server, PROTO_STALE, NULL);
        return;
    }
    cache_put(op->a, &last);
    decide_and_write(op, &last);
    status_event_cleanup(&last);
}

static void on_script(void *arg, const char *err, redisReply *r)
{
    struct apply_op *op = arg;
    if (err != NULL) {
        if (err == store_err_server)
            log_err("apply script failed", "request=%s err=\"%s\"", op->obs.request_id, r->str);
        op_finish(op, err, PROTO_STALE, NULL);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        op_finish(op, store_err_server, PROTO_STALE, NULL);
        return;
    }
    if (r->element[0]->integer == 1) {
        char sid[64];
        snprintf(sid, sizeof(sid), "%.*s", (int)r->element[1]->len, r->element[1]->str);
        const redisReply *meta = r->elements > 2 ? r->element[2] : NULL;
        if (meta != NULL && meta->type == REDIS_REPLY_STRING) {
            struct proto_err pe;
            memset(&pe, 0, sizeof(pe));
            if (proto_metadata_parse(meta->str, meta->len, &op->next.metadata, &pe) != 0)
                log_err("tracking metadata unreadable", "request=%s err=%s field=%s",
                        op->obs.request_id, proto_strerror(pe.code), pe.field);
        }
        cache_put(op->a, &op->next);
        if (op->refund_new && op->a->on_refund != NULL)
            op->a->on_refund(op->a->on_refund_arg, op->obs.request_id,
                            op->next.refund_fail_reason);
        op_finish(op, NULL, PROTO_ACCEPT, sid);
        return;
    }
    cache_drop(op->a, op->obs.request_id);
    op->cached = 0;
    if (++op->rounds >= APPLY_MAX_ROUNDS) {
        log_err("apply kept conflicting", "request=%s rounds=%d", op->obs.request_id,
                op->rounds);
        op_finish(op, store_err_server, PROTO_STALE, NULL);
        return;
    }
    decide_from_reply(op, r->element[1]);
}

static void on_read(void *arg, const char *err, redisReply *r)
{
    struct apply_op *op = arg;
    if (err != NULL) {
        op_finish(op, err, PROTO_STALE, NULL);
        return;
    }
    decide_from_reply(op, r);
}

int applier_apply(struct applier *a, const struct status_event *obs, int track,
                  apply_done_cb *cb, void *arg)
{
    if (!store_ready(a->s))
        return -1;
    struct apply_op *op = xcalloc(1, sizeof(*op));
    op->a = a;
    op->cb = cb;
    op->arg = arg;
    op->track = track;
    status_event_init(&op->next);
    if (status_event_copy(&op->obs, obs) != 0) {
        free(op);
        return -1;
    }
    const struct status_event *last = cache_get(a, obs->request_id);
    if (last != NULL) {
        /* decide_and_write finishes the op itself (cb called) on every path */
        op->cached = 1;
        struct status_event copy;
        if (status_event_copy(&copy, last) == 0) { /* the slot may change meanwhile */
            decide_and_write(op, &copy);
            status_event_cleanup(&copy);
            return 0;
        }
        op->cached = 0;
    }
    if (read_state(op) != 0) {
        status_event_cleanup(&op->obs);
        status_event_cleanup(&op->next);
        free(op);
        return -1;
    }
    return 0;
}
