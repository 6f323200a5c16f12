/* apply.c - see apply.h. runs on: core thread.
 *
 * Steps per observation: its last state (the cache below, or Redis) -> proto_lifecycle_decide
 * -> apply.lua with the expected seq. A conflict (another process wrote first) returns the
 * current record, and we decide again; bounded to a few rounds.
 *
 * Batches: observations wait in a queue per partition (FIFO). While APPLY_INFLIGHT batches of
 * a partition are in flight, new observations wait and form the next one, so a busy applier
 * sends up to APPLY_BATCH_MAX observations per Redis round trip (batches pipelined: Redis
 * works on one while the daemon answers another) and an idle one sends each at once (no
 * timer, no added latency). The bound is small on purpose: an observation is answered when
 * its whole batch is, so a batch of 64 (~4 ms of Redis work) made answers wait; 16 keeps
 * nearly all of the per-call saving (Redis instructions per event -8% against -9% with 64).
 * A batch is: one read (apply_read.lua; a plain HGET for one, read again through the script
 * when it answers the first part of a packed hash's record, store/chunk_lib.lua: an ended
 * watch's) of the states the cache could not decide, then one apply.lua call for every
 * accepted item, which answers each item on its own. Per-request order: a batch takes at most one
 * observation per request and none of a request with one in flight; a later one stays queued
 * in its place (it is decided on the first's result in a later batch). An item that
 * conflicted is decided again on the record Redis returned and, if still accepted, goes first
 * into the next batch. A store failure (not sent, disconnected, an error reply) is every
 * item's answer. Every callback is called exactly once per observation, as without batches.
 *
 * A small direct-mapped cache keeps the last state this process wrote or read per request
 * (APPLY_CACHE_SLOTS, a colliding request just takes the slot). An observation the cached
 * state accepts skips the read and the decode: the write is still a compare-and-set on seq,
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
#include "store/rec.h"
#include "store/search.h"
#include "relay/common/log.h"
#include "relay/common/siphash.h"
#include "relay/common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define APPLY_MAX_ROUNDS 8
#define APPLY_BATCH_MAX 16 /* observations per Redis round trip */
#define APPLY_SCAN_MAX 512 /* queued observations looked at to form one batch */
#define APPLY_INFLIGHT 4   /* batches of one partition in flight at once (pipelined) */
#define TIMELINE_CAP "200"
#define APPLY_CACHE_SLOTS 8192 /* ~1 KB each: at most ~8 MB whatever the traffic */

struct cache_slot {
    int used;
    struct status_event ev; /* owned copy; ev.request_id is the key */
};

struct apply_op;

struct part_q;

/* One batch of a partition (ops owned by the batch until finished or put back). */
struct batch {
    struct part_q *q;
    int busy; /* in flight, or being formed or completed */
    size_t n;
    struct apply_op *op[APPLY_BATCH_MAX]; /* NULL: finished meanwhile */
};

/* The queue of one partition (ops owned by the queue until taken into a batch) and its
 * batches. */
struct part_q {
    struct applier *a;
    struct apply_op *head, *tail;
    struct batch b[APPLY_INFLIGHT];
};

struct applier {
    struct store *s;
    struct store_script script, read_sc, confirm_sc;
    char maxlen[24];
    apply_poll_policy_cb *policy;
    void *policy_arg;
    char wttl[24], settled[24], ftail[24]; /* watch windows, ms */
    apply_refund_failure_cb *on_refund;
    void *on_refund_arg;
    struct cache_slot *cache; /* APPLY_CACHE_SLOTS entries */
    struct part_q *pq;        /* one per partition, made at the first apply */
    unsigned npq;
};

enum op_state {
    OP_NEW = 0, /* to decide (cache, else read) */
    OP_READ,    /* its state is being read */
    OP_WRITE,   /* accepted: the write below is ready */
};

struct apply_op {
    struct apply_op *qnext;
    struct applier *a;
    const struct status_event *obs; /* the caller's, borrowed until cb (apply.h) */
    struct status_event next;
    int track;
    int rounds;
    enum op_state state;
    int refund_new; /* the accepted event sets a refundFailReason the last state lacked */
    /* the write (OP_WRITE): owned */
    char *rec;
    size_t reclen;
    char *old_status;
    uint64_t expected;
    char pollbuf[24], tier[2];
    struct store_search_ents ents;
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
    store_script_init(&a->read_sc, "apply_read");
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

static void write_clear(struct apply_op *op)
{
    free(op->rec);
    op->rec = NULL;
    free(op->old_status);
    op->old_status = NULL;
    store_search_ents_free(&op->ents);
    memset(&op->ents, 0, sizeof(op->ents));
}

static void op_finish_facts(struct apply_op *op, const char *err, enum proto_verdict v,
                            const char *sid, int facts)
{
    /* op->next is the op's: the callback may take its members (apply.h); what is left
     * (everything, or an emptied struct) is freed here */
    op->cb(op->arg, err, v, v == PROTO_ACCEPT && err == NULL ? &op->next : NULL, sid, facts);
    write_clear(op);
    status_event_cleanup(&op->next);
    free(op);
}

static void op_finish(struct apply_op *op, const char *err, enum proto_verdict v,
                      const char *sid)
{
    op_finish_facts(op, err, v, sid, -1);
}

void applier_free(struct applier *a)
{
    if (a == NULL)
        return;
    /* the store is freed first (core.c): its completions ended every batch, and a queue
     * left behind is answered like a store that went away */
    for (unsigned k = 0; k < a->npq; k++)
        while (a->pq[k].head != NULL) {
            struct apply_op *op = a->pq[k].head;
            a->pq[k].head = op->qnext;
            op_finish(op, store_err_disconnected, PROTO_STALE, NULL);
        }
    free(a->pq);
    for (size_t i = 0; i < APPLY_CACHE_SLOTS; i++)
        if (a->cache[i].used)
            status_event_cleanup(&a->cache[i].ev);
    free(a->cache);
    free(a);
}

/* The upstream repeated the stored state of id at now: its "cf" (apply_confirm.lua). */
static void confirm(struct applier *a, const char *id, int64_t now)
{
    char k_req[KEY_MAX], nowbuf[24];
    key_build(k_req, sizeof(k_req), store_tag_of(a->s, id), "req", id, NULL);
    snprintf(nowbuf, sizeof(nowbuf), "%lld", (long long)now);
    const char *argv[] = {k_req, nowbuf};
    store_eval(a->s, &a->confirm_sc, NULL, NULL, 1, 2, argv, NULL);
}

/* Decide op against last (NULL = unknown). from_redis: last is Redis' word (else the cache's).
 * Returns 1 when op is accepted (state OP_WRITE, the write prepared), 0 when it needs a read
 * (the cache would not accept), -1 when op was finished (callback called). */
static int decide(struct apply_op *op, const struct status_event *last, int from_redis)
{
    struct applier *a = op->a;
    enum proto_verdict v;
    status_event_cleanup(&op->next);
    write_clear(op);
    int64_t now = wall_ms();
    if (proto_lifecycle_decide(last, op->obs, now, &v, &op->next) != 0) {
        log_err("lifecycle decision failed", "request=%s", op->obs->request_id);
        op_finish(op, store_err_server, PROTO_STALE, NULL);
        return -1;
    }
    if (v != PROTO_ACCEPT && !from_redis)
        return 0; /* the cache may be behind: only Redis may say "not new" */
    if (v != PROTO_ACCEPT) {
        if (v == PROTO_DUPLICATE && last != NULL && !(op->obs->flags & PROTO_F_FACTS))
            confirm(a, op->obs->request_id, now); /* decided against Redis: it holds this state */
        op_finish(op, NULL, v, NULL);
        return -1;
    }
    struct status_event *ev = &op->next;
    free(ev->metadata); /* apply.lua adds the request's own (never twice: it must be last) */
    ev->metadata = NULL;
    op->rec = proto_event_record(ev, &op->reclen);
    if (op->rec == NULL) {
        op_finish(op, store_err_server, PROTO_STALE, NULL);
        return -1;
    }
    op->old_status = xstrdup(last ? last->status : ev->status);
    op->expected = last ? last->seq : 0;
    op->tier[0] = 'a';
    op->tier[1] = '\0';
    int64_t np = a->policy ? a->policy(a->policy_arg, ev, now, &op->tier[0]) : now;
    snprintf(op->pollbuf, sizeof(op->pollbuf), "%lld", (long long)(np >= 0 ? np : now));
    const char *rfr = ev->refund_fail_reason;
    op->refund_new = rfr != NULL && strcmp(rfr, "N/A") != 0 &&
                     (last == NULL || last->refund_fail_reason == NULL ||
                      strcmp(last->refund_fail_reason, rfr) != 0);
    /* the search index entries this record adds (store/search.h): usually none */
    store_search_event_entries(last, ev, &op->ents);
    op->state = OP_WRITE;
    return 1;
}

/* Decode a stored record (or nil) and decide on it (Redis' word). Returns as decide. */
static int decide_on_record(struct apply_op *op, const redisReply *rec)
{
    if (rec == NULL || rec->type != REDIS_REPLY_STRING)
        return decide(op, NULL, 1);
    struct status_event last;
    struct proto_err perr = {0};
    status_event_init(&last);
    char *plain = NULL; /* a deflated record, inflated (store/rec.h) */
    size_t plen = 0;
    int inflated = store_rec_decode(rec->str, rec->len, &plain, &plen) == 0;
    int bad = !inflated ||
              proto_event_from_record(plain != NULL ? plain : rec->str, plen, &last, &perr) != 0;
    free(plain);
    if (bad) {
        log_err("stored state unreadable", "request=%s err=%s field=%s", op->obs->request_id,
                inflated ? proto_strerror(perr.code) : "deflated", inflated ? perr.field : "rec");
        status_event_cleanup(&last);
        op_finish(op, store_err_server, PROTO_STALE, NULL);
        return -1;
    }
    cache_put(op->a, &last);
    int rc = decide(op, &last, 1);
    status_event_cleanup(&last);
    return rc;
}

static void pump(struct part_q *q);

/* Every op of the batch answered with err (nothing of theirs is known to be written). */
static void batch_fail(struct batch *b, const char *err)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->op[i] != NULL)
            op_finish(b->op[i], err, PROTO_STALE, NULL);
    b->n = 0;
}

/* The batch is answered: the next one may go (pump starts it; the callers that run inside
 * pump just return to it). */
static void batch_end(struct batch *b)
{
    b->n = 0;
    b->busy = 0;
}

static void on_script(void *arg, const char *err, redisReply *r)
{
    struct batch *b = arg;
    struct part_q *q = b->q;
    struct applier *a = q->a;
    size_t nw = 0;
    for (size_t i = 0; i < b->n; i++)
        nw += b->op[i] != NULL;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements != nw))
        err = store_err_server;
    if (err != NULL) {
        if (err == store_err_server)
            log_err("apply script failed", "items=%zu err=\"%s\"", nw,
                    r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
        batch_fail(b, err);
        batch_end(b);
        pump(q);
        return;
    }
    struct apply_op *again = NULL, *again_last = NULL; /* conflicted, accepted again */
    size_t j = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct apply_op *op = b->op[i];
        if (op == NULL)
            continue;
        b->op[i] = NULL;
        const redisReply *e = r->element[j++];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2) {
            op_finish(op, store_err_server, PROTO_STALE, NULL);
            continue;
        }
        if (e->element[0]->integer == 1) {
            char sid[64];
            snprintf(sid, sizeof(sid), "%.*s", (int)e->element[1]->len, e->element[1]->str);
            const redisReply *meta = e->elements > 2 ? e->element[2] : NULL;
            if (meta != NULL && meta->type == REDIS_REPLY_STRING) {
                struct proto_err pe;
                memset(&pe, 0, sizeof(pe));
                if (proto_metadata_parse(meta->str, meta->len, &op->next.metadata, &pe) != 0)
                    log_err("tracking metadata unreadable", "request=%s err=%s field=%s",
                            op->obs->request_id, proto_strerror(pe.code), pe.field);
            }
            cache_put(a, &op->next);
            if (op->refund_new && a->on_refund != NULL)
                a->on_refund(a->on_refund_arg, op->obs->request_id, op->next.refund_fail_reason);
            /* apply.lua's 4th: whether the hash held facts as the event was written */
            const redisReply *fx = e->elements > 3 ? e->element[3] : NULL;
            int facts = fx != NULL && fx->type == REDIS_REPLY_INTEGER ? fx->integer != 0 : -1;
            op_finish_facts(op, NULL, PROTO_ACCEPT, sid, facts);
            continue;
        }
        cache_drop(a, op->obs->request_id);
        if (++op->rounds >= APPLY_MAX_ROUNDS) {
            log_err("apply kept conflicting", "request=%s rounds=%d", op->obs->request_id,
                    op->rounds);
            op_finish(op, store_err_server, PROTO_STALE, NULL);
            continue;
        }
        if (decide_on_record(op, e->element[1]) == 1) {
            /* first in the next batch, before later ops of its request */
            if (again_last != NULL)
                again_last->qnext = op;
            else
                again = op;
            again_last = op;
        }
    }
    if (again != NULL) {
        again_last->qnext = q->head;
        if (q->head == NULL)
            q->tail = again_last;
        q->head = again;
    }
    batch_end(b);
    pump(q);
}

/* Send one apply.lua call for the accepted ops of the batch (or end it if there is none). */
static void batch_write(struct batch *b)
{
    struct applier *a = b->q->a;
    size_t nw = 0, argc = 3 + 9;
    for (size_t i = 0; i < b->n; i++)
        if (b->op[i] != NULL) {
            nw++;
            argc += 4 + 12 + b->op[i]->ents.n;
        }
    if (nw == 0) {
        batch_end(b);
        return;
    }
    const char *tag = NULL;
    for (size_t i = 0; i < b->n; i++)
        if (b->op[i] != NULL) {
            tag = store_tag_of(a->s, b->op[i]->obs->request_id); /* the partition's tag */
            break;
        }
    char(*keys)[KEY_MAX] = xmalloc((3 + 4 * nw) * KEY_MAX); /* filled by key_build */
    char(*nums)[24] = xcalloc(4 * nw + 3, 24);
    const char **argv = xcalloc(argc, sizeof(*argv));
    size_t *lens = xcalloc(argc, sizeof(*lens));
    key_build(keys[0], KEY_MAX, tag, "events", NULL, NULL);
    key_build(keys[1], KEY_MAX, tag, "ct", NULL, NULL);
    key_build(keys[2], KEY_MAX, tag, "poll", NULL, NULL);
    size_t nk = 3, nn = 0;
    char *nowbuf = nums[nn++], *cap = nums[nn++], *count = nums[nn++];
    snprintf(nowbuf, 24, "%lld", (long long)wall_ms());
    snprintf(cap, 24, "%d", STORE_SEARCH_CAP);
    snprintf(count, 24, "%zu", nw);
    /* argv: the keys, then the batch values, then each item's */
    size_t ai = 3 + 4 * nw;
    const char *common[] = {a->maxlen, nowbuf, TIMELINE_CAP, tag, a->wttl, a->settled,
                            a->ftail, cap, count};
    for (size_t i = 0; i < ARRAY_LEN(common); i++)
        argv[ai++] = common[i];
    for (size_t i = 0; i < b->n; i++) {
        struct apply_op *op = b->op[i];
        if (op == NULL)
            continue;
        const struct status_event *ev = &op->next;
        const char *id = ev->request_id;
        key_build(keys[nk++], KEY_MAX, tag, "req", id, NULL);
        key_build(keys[nk++], KEY_MAX, tag, "st", ev->status, NULL);
        key_build(keys[nk++], KEY_MAX, tag, "st", op->old_status, NULL);
        key_build(keys[nk++], KEY_MAX, tag, "tl", id, NULL);
        char *c = nums[nn++], *exp = nums[nn++], *seq = nums[nn++], *at = nums[nn++];
        snprintf(c, 24, "%zu", 11 + op->ents.n);
        snprintf(at, 24, "%lld", (long long)ev->created_at);
        snprintf(exp, 24, "%llu", (unsigned long long)op->expected);
        snprintf(seq, 24, "%llu", (unsigned long long)ev->seq);
        argv[ai++] = c;
        argv[ai++] = exp;
        argv[ai++] = seq;
        lens[ai] = op->reclen;
        argv[ai++] = op->rec;
        argv[ai++] = ev->status;
        argv[ai++] = ev->event_id;
        argv[ai++] = id;
        argv[ai++] = op->pollbuf;
        argv[ai++] = proto_source_name(ev->source);
        argv[ai++] = op->track ? "1" : "0";
        argv[ai++] = op->tier;
        argv[ai++] = at; /* the event's createdAt: a status change's time (chg) */
        for (size_t e = 0; e < op->ents.n; e++)
            argv[ai++] = op->ents.v[e];
    }
    for (size_t i = 0; i < nk; i++)
        argv[i] = keys[i];
    for (size_t i = 0; i < argc; i++)
        if (lens[i] == 0)
            lens[i] = strlen(argv[i]);
    int rc = store_eval(a->s, &a->script, on_script, b, (int)nk, (int)argc, argv, lens);
    free(argv);
    free(lens);
    free(keys);
    free(nums);
    if (rc != 0) {
        batch_fail(b, store_err_disconnected);
        batch_end(b);
    }
}

static void on_read(void *arg, const char *err, redisReply *r);

/* Send the read of b's nr ops in OP_READ: a plain HGET of the record for one (the cheapest
 * command; joined = 0), else apply_read.lua, which joins a packed hash's chunks. 0 or -1. */
static int read_send(struct batch *b, size_t nr, int joined)
{
    struct applier *a = b->q->a;
    char(*keys)[KEY_MAX] = xmalloc(nr * KEY_MAX);
    const char **argv = xcalloc(nr, sizeof(*argv));
    size_t j = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->op[i] != NULL && b->op[i]->state == OP_READ) {
            const char *id = b->op[i]->obs->request_id;
            key_build(keys[j], KEY_MAX, store_tag_of(a->s, id), "req", id, NULL);
            argv[j] = keys[j];
            j++;
        }
    int rc = nr == 1 && !joined ? store_cmd(a->s, on_read, b, "HGET %s rec", keys[0])
                                : store_eval(a->s, &a->read_sc, on_read, b, (int)nr, (int)nr,
                                             argv, NULL);
    free(argv);
    free(keys);
    return rc;
}

static void on_read(void *arg, const char *err, redisReply *r)
{
    struct batch *b = arg;
    struct part_q *q = b->q;
    size_t nr = 0;
    for (size_t i = 0; i < b->n; i++)
        nr += b->op[i] != NULL && b->op[i]->state == OP_READ;
    if (err != NULL) {
        batch_fail(b, err);
        batch_end(b);
        pump(q);
        return;
    }
    /* one read: the HGET's reply itself, unless it is the first part of a packed record
     * ("\0": store/chunk_lib.lua), which apply_read.lua joins; several: the script's array */
    int one = r->type != REDIS_REPLY_ARRAY;
    if (one && nr == 1 && r->type == REDIS_REPLY_STRING && r->len > 0 && r->str[0] == '\0') {
        if (read_send(b, nr, 1) != 0) {
            batch_fail(b, store_err_disconnected);
            batch_end(b);
            pump(q);
        }
        return;
    }
    if (one ? nr != 1 : r->elements != nr) {
        batch_fail(b, store_err_server);
        batch_end(b);
        pump(q);
        return;
    }
    size_t j = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct apply_op *op = b->op[i];
        if (op == NULL || op->state != OP_READ)
            continue;
        if (decide_on_record(op, one ? r : r->element[j++]) != 1)
            b->op[i] = NULL; /* finished */
    }
    batch_write(b);
    pump(q); /* when batch_write ended the batch at once */
}

/* Is id the request of an op in one of q's batches (in flight or being formed)? */
static int batch_has(const struct part_q *q, const char *id)
{
    for (size_t k = 0; k < APPLY_INFLIGHT; k++) {
        const struct batch *b = &q->b[k];
        if (!b->busy)
            continue;
        for (size_t i = 0; i < b->n; i++)
            if (b->op[i] != NULL && strcmp(b->op[i]->obs->request_id, id) == 0)
                return 1;
    }
    return 0;
}

/* Form batch b from its queue (at most one op per request and none of a request in flight,
 * FIFO otherwise), decide what the cache can, read the rest in one command, then write.
 * b->busy is set by the caller. Returns the count of ops taken (0: b ended, nothing to do). */
static size_t batch_start(struct batch *b)
{
    struct part_q *q = b->q;
    struct applier *a = q->a;
    b->n = 0;
    struct apply_op **pp = &q->head, *prev = NULL;
    for (size_t scanned = 0; *pp != NULL && b->n < APPLY_BATCH_MAX && scanned < APPLY_SCAN_MAX;
         scanned++) {
        struct apply_op *op = *pp;
        if (batch_has(q, op->obs->request_id)) {
            prev = op; /* a later observation of a request in a batch: next time */
            pp = &op->qnext;
            continue;
        }
        *pp = op->qnext;
        if (q->tail == op)
            q->tail = prev;
        op->qnext = NULL;
        b->op[b->n++] = op;
    }
    size_t taken = b->n;
    if (taken == 0) {
        batch_end(b);
        return 0;
    }
    size_t nr = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct apply_op *op = b->op[i];
        if (op->state == OP_WRITE)
            continue; /* decided on the record a conflict returned */
        const struct status_event *last = cache_get(a, op->obs->request_id);
        /* decided on the slot itself, not a copy: decide reads last before any callback it
         * may call (op_finish on a failure, after which it returns at once) and the poll
         * policy is pure, so nothing changes the slot while it is read */
        int rc = last != NULL ? decide(op, last, 0) : 0;
        if (rc == -1) {
            b->op[i] = NULL;
        } else if (rc == 0) {
            op->state = OP_READ;
            nr++;
        }
    }
    if (nr == 0) {
        batch_write(b);
        return taken;
    }
    if (read_send(b, nr, 0) != 0) {
        batch_fail(b, store_err_disconnected);
        batch_end(b);
    }
    return taken;
}

/* Start batches of q while one of its slots is free and the queue has an op that may go.
 * Synchronous completions (the store not ready, nothing to write) loop here rather than
 * recurse. */
static void pump(struct part_q *q)
{
    while (q->head != NULL) {
        struct batch *b = NULL;
        for (size_t k = 0; k < APPLY_INFLIGHT && b == NULL; k++)
            if (!q->b[k].busy)
                b = &q->b[k];
        if (b == NULL)
            return; /* every slot in flight: their answers pump again */
        b->busy = 1;
        if (batch_start(b) == 0)
            return; /* what is queued waits for a request in flight */
    }
}

int applier_apply(struct applier *a, const struct status_event *obs, int track,
                  apply_done_cb *cb, void *arg)
{
    if (!store_ready(a->s))
        return -1;
    if (a->pq == NULL) {
        unsigned n = store_partitions(a->s);
        a->npq = n > 0 ? n : 1;
        a->pq = xcalloc(a->npq, sizeof(*a->pq));
        for (unsigned k = 0; k < a->npq; k++) {
            a->pq[k].a = a;
            for (unsigned i = 0; i < APPLY_INFLIGHT; i++)
                a->pq[k].b[i].q = &a->pq[k];
        }
    }
    struct apply_op *op = xcalloc(1, sizeof(*op));
    op->a = a;
    op->cb = cb;
    op->arg = arg;
    op->track = track;
    status_event_init(&op->next);
    op->obs = obs; /* borrowed, not copied: the caller keeps it until cb (issue 26) */
    struct part_q *q = &a->pq[key_partition(op->obs->request_id, strlen(op->obs->request_id),
                                            a->npq)];
    if (q->tail != NULL)
        q->tail->qnext = op;
    else
        q->head = op;
    q->tail = op;
    pump(q); /* from here on cb is called exactly once, whatever happens */
    return 0;
}
