/* deliveries.c - see deliveries.h. runs on: core thread.
 *
 * Each call: keys from store/keys.h, arguments in the order of the script's header comment,
 * one struct call (owned here: freed in on_reply, or at once when the command could not be
 * sent), and the reply decoded into the types of deliveries.h before the caller's callback.
 * The scripts are registered on first use (file-scope table: one per process). */
#include "store/deliveries.h"
#include "protocol/event.h"
#include "relay/common/util.h"
#include "store/events.h"
#include "store/keys.h"
#include "store/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char dl_err_reply[] = "reply";
const char dl_err_nogroup[] = "nogroup";

enum sc_id {
    SC_CLAIM, SC_DONE, SC_HEALTH, SC_REAP, SC_LEASE, SC_HELD, SC_FANOUT, SC_REQUEUE,
    SC_MEMBERS, SC_LOAD, SC_PUT, SC_DEL, SC_EVENTS_BY_REQUEST, SC_DISABLED, SC_N
};
static const char *const sc_names[SC_N] = {
    "wh_claim", "wh_done",   "wh_health", "wh_reap", "wh_lease", "wh_held",
    "wh_fanout", "wh_requeue", "members",  "wh_load", "wh_put",   "wh_del",
    "events_by_request", "wh_disabled",
};
static struct store_script scripts[SC_N];

static const struct store_script *script(enum sc_id id)
{
    if (scripts[id].name == NULL)
        store_script_init(&scripts[id], sc_names[id]);
    return &scripts[id];
}

/* ---- names ----------------------------------------------------------------------------- */

/* wh_done.lua's outcome words; "none" is never written */
static const char *const outcome_names[DL_OUTCOME_COUNT] = {
    [DL_OUTCOME_NONE] = "none", [DL_OUTCOME_OK] = "ok",     [DL_OUTCOME_RETRY] = "retry",
    [DL_OUTCOME_DEAD] = "dead", [DL_OUTCOME_GONE] = "gone", [DL_OUTCOME_LOCAL] = "local",
};

const char *dl_outcome_name(enum dl_outcome o)
{
    return (unsigned)o < DL_OUTCOME_COUNT ? outcome_names[o] : "none";
}

/* wh_fanout.lua's pair kinds (one letter each) and their names for logs */
static const char pair_letters[DL_PAIR_COUNT] = {
    [DL_PAIR_PENDING] = 'p', [DL_PAIR_SKIPPED] = 's', [DL_PAIR_OK] = 'o', [DL_PAIR_RETRY] = 'r',
    [DL_PAIR_DEAD] = 'd',    [DL_PAIR_GONE] = 'g',    [DL_PAIR_INFLIGHT] = 'f',
};
static const char *const pair_names[DL_PAIR_COUNT] = {
    [DL_PAIR_PENDING] = "pending", [DL_PAIR_SKIPPED] = "skipped", [DL_PAIR_OK] = "ok",
    [DL_PAIR_RETRY] = "retry",     [DL_PAIR_DEAD] = "dead",       [DL_PAIR_GONE] = "gone",
    [DL_PAIR_INFLIGHT] = "inflight",
};

const char *dl_pair_name(enum dl_pair k)
{
    return (unsigned)k < DL_PAIR_COUNT ? pair_names[k] : "?";
}

int dl_pair_needs_body(enum dl_pair k)
{
    /* sent later by the dispatcher, or kept for a replay of a skipped one */
    return k == DL_PAIR_PENDING || k == DL_PAIR_SKIPPED || k == DL_PAIR_RETRY ||
           k == DL_PAIR_INFLIGHT;
}

/* ---- the tag argument ------------------------------------------------------------------ */

/* The tag argument of a partition script (malloc'd): the tag with one partition, else
 * "<partition tag> <deployment tag> <view>" (store/wh_lib.lua). */
static char *view_tag(struct store *s, unsigned part, const char *view)
{
    if (store_partitions(s) <= 1)
        return xstrdup(store_tag(s));
    return xasprintf("%s %s", store_wh_tag(s, part), view ? view : "");
}

/* The endpoint set's version key for a partition script: the deployment's with one
 * partition; with several an unused key of the partition (one slot per script; the caller
 * reads the version itself). */
static void ver_key(struct store *s, unsigned part, char *out)
{
    key_build(out, KEY_MAX, store_partitions(s) > 1 ? store_part_tag(s, part) : store_tag(s),
              "whv", NULL, NULL);
}

/* ---- calls ----------------------------------------------------------------------------- */

enum op {
    OP_CLAIM, OP_PAIRS, OP_FANOUT, OP_COUNT, OP_VERSION, OP_HELD, OP_GROUP, OP_AUTOCLAIM,
    OP_READ, OP_RANGE, OP_LOAD
};

struct call {
    enum op op;
    union {
        dl_claim_cb *claim;
        dl_pairs_cb *pairs;
        dl_fanout_cb *fanout;
        dl_count_cb *count;
        dl_version_cb *version;
        dl_held_cb *held;
        dl_group_cb *group;
        dl_autoclaim_cb *autoclaim;
        dl_events_cb *events;
        dl_endpoints_cb *load;
    } cb;
    void *arg;
    size_t from; /* OP_PAIRS: the first element of the pairs */
};

static struct call *call_new(enum op op, void *arg)
{
    struct call *c = xcalloc(1, sizeof(*c));
    c->op = op;
    c->arg = arg;
    return c;
}

/* The pairs of r's elements [from..] (malloc'd array of borrowed strings; *n pairs). */
static struct dl_idval *pairs_of(const redisReply *r, size_t from, size_t *n)
{
    *n = 0;
    if (r->type != REDIS_REPLY_ARRAY || from >= r->elements)
        return NULL;
    size_t np = (r->elements - from) / 2;
    if (np == 0)
        return NULL;
    struct dl_idval *v = xcalloc(np, sizeof(*v));
    for (size_t i = 0; i < np; i++) {
        const redisReply *a = r->element[from + 2 * i], *b = r->element[from + 2 * i + 1];
        v[i].id = a->type == REDIS_REPLY_STRING ? a->str : "";
        v[i].val = b->type == REDIS_REPLY_STRING ? b->str : "";
    }
    *n = np;
    return v;
}

static const char *str_or(const redisReply *e, const char *dflt)
{
    return e->str ? e->str : dflt;
}

/* wh_claim.lua: {version, {endpoint id, due left, ...}, then 7 items per delivery
 * (deliveries.h)} */
static void claim_reply(struct call *c, const char *err, const char *msg, redisReply *r)
{
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
                        r->element[1]->type != REDIS_REPLY_ARRAY))
        err = dl_err_reply;
    if (err != NULL) {
        c->cb.claim(c->arg, err, msg, NULL);
        return;
    }
    const redisReply *dr = r->element[1];
    size_t ndue = dr->elements / 2;
    struct dl_due *due = xcalloc(ndue ? ndue : 1, sizeof(*due));
    for (size_t i = 0; i < ndue; i++) {
        const redisReply *a = dr->element[2 * i], *b = dr->element[2 * i + 1];
        due[i].whid = a->type == REDIS_REPLY_STRING ? a->str : "";
        due[i].n = b->type == REDIS_REPLY_INTEGER ? (long)b->integer : 0;
    }
    size_t n = (r->elements - 2) / 7;
    struct dl_claimed *v = xcalloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        redisReply **e = r->element + 2 + 7 * i;
        struct dl_claimed *x = &v[i];
        x->did = str_or(e[0], "");
        x->whid = str_or(e[1], "");
        x->event_id = str_or(e[2], "");
        x->attempt = (int)(e[3]->type == REDIS_REPLY_INTEGER ? e[3]->integer : 1);
        x->replay = e[4]->str && e[4]->str[0] == '1';
        char k = e[5]->str ? e[5]->str[0] : 'b';
        x->kind = k == 'r'   ? DL_CLAIM_RECORD
                  : k == 'x' ? DL_CLAIM_EXPIRED
                  : k == '=' ? DL_CLAIM_SAME
                             : DL_CLAIM_BODY;
        x->body = str_or(e[6], "");
        x->body_len = e[6]->str ? e[6]->len : 0;
        if (x->kind == DL_CLAIM_SAME)
            x->same_as = (size_t)strtoull(x->body, NULL, 10);
    }
    struct dl_claim_res res = {
        .version = str_or(r->element[0], "0"), .v = v, .n = n, .due = due, .ndue = ndue};
    c->cb.claim(c->arg, NULL, NULL, &res);
    free(v);
    free(due);
}

/* wh_load.lua: {version, {id, field, value, ...}, ...}; malformed rows are skipped */
static void load_reply(struct call *c, const char *err, const char *msg, redisReply *r)
{
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 1))
        err = dl_err_reply;
    if (err != NULL) {
        c->cb.load(c->arg, err, msg, NULL);
        return;
    }
    size_t n = r->elements - 1, k = 0;
    struct dl_endpoint_row *v = xcalloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        const redisReply *row = r->element[i + 1];
        if (row->type != REDIS_REPLY_ARRAY || row->elements < 1 || row->element[0]->str == NULL)
            continue;
        size_t nkv = row->elements > 1 ? (row->elements - 1) / 2 : 0;
        const char **kv = xcalloc(2 * nkv + 1, sizeof(*kv));
        for (size_t j = 0; j < nkv; j++) {
            kv[2 * j] = row->element[1 + 2 * j]->str;
            kv[2 * j + 1] = row->element[2 + 2 * j]->str;
        }
        v[k++] = (struct dl_endpoint_row){.id = row->element[0]->str, .kv = kv, .nkv = nkv};
    }
    struct dl_endpoints_res res = {.version = str_or(r->element[0], "0"), .v = v, .n = k};
    c->cb.load(c->arg, NULL, NULL, &res);
    for (size_t i = 0; i < k; i++)
        free(v[i].kv);
    free(v);
}

static void pairs_reply(struct call *c, const char *err, const char *msg, redisReply *r)
{
    if (c->cb.pairs == NULL)
        return;
    if (err != NULL) {
        c->cb.pairs(c->arg, err, msg, NULL);
        return;
    }
    struct dl_pairs res = {0};
    struct dl_idval *v = pairs_of(r, c->from, &res.n);
    res.v = v;
    c->cb.pairs(c->arg, NULL, NULL, &res);
    free(v);
}

/* {code, created, then pairs (deliveries.h)} */
static void fanout_reply(struct call *c, const char *err, const char *msg, redisReply *r)
{
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
                        r->element[0]->type != REDIS_REPLY_INTEGER))
        err = dl_err_reply;
    if (err != NULL) {
        c->cb.fanout(c->arg, err, msg, NULL);
        return;
    }
    struct dl_fanout_res res = {.code = r->element[0]->integer,
                                .created = r->elements > 1 ? r->element[1]->integer : 0};
    struct dl_idval *v = pairs_of(r, 2, &res.pairs.n);
    res.pairs.v = v;
    c->cb.fanout(c->arg, NULL, NULL, &res);
    free(v);
}

/* {next cursor, {ids}, ...} */
static void autoclaim_reply(struct call *c, const char *err, const char *msg, redisReply *r)
{
    if (err == store_err_server && msg != NULL && strncmp(msg, "NOGROUP", 7) == 0)
        err = dl_err_nogroup;
    else if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 2))
        err = dl_err_reply;
    if (err != NULL) {
        c->cb.autoclaim(c->arg, err, msg, NULL, 0);
        return;
    }
    c->cb.autoclaim(c->arg, NULL, NULL, str_or(r->element[0], "0-0"),
                    r->element[1]->type == REDIS_REPLY_ARRAY ? r->element[1]->elements : 0);
}

/* OP_READ (XREADGROUP) or OP_RANGE (XRANGE): the entries, walked without copies */
static void events_reply(struct call *c, const char *err, const char *msg, redisReply *r)
{
    if (c->op == OP_READ && err == store_err_server && msg != NULL &&
        strncmp(msg, "NOGROUP", 7) == 0)
        err = dl_err_nogroup;
    else if (c->op == OP_RANGE && err == NULL && r->type != REDIS_REPLY_ARRAY)
        err = dl_err_reply;
    if (err != NULL) {
        c->cb.events(c->arg, err, msg, NULL, 0);
        return;
    }
    struct store_events_iter it;
    size_t n = c->op == OP_READ ? store_events_iter_read(&it, r) : store_events_iter_range(&it, r);
    c->cb.events(c->arg, NULL, NULL, &it, n);
}

/* {-1, version} or {1, flags} */
static void held_reply(struct call *c, const char *err, const char *msg, redisReply *r)
{
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
                        r->element[0]->type != REDIS_REPLY_INTEGER))
        err = dl_err_reply;
    if (err != NULL) {
        c->cb.held(c->arg, err, msg, NULL);
        return;
    }
    struct dl_held_res res = {.stale = r->element[0]->integer == -1};
    if (res.stale)
        res.version = r->element[1]->str ? r->element[1]->str : "0";
    else {
        res.flags = r->element[1]->str ? r->element[1]->str : "";
        res.nflags = r->element[1]->str ? r->element[1]->len : 0;
    }
    c->cb.held(c->arg, NULL, NULL, &res);
}

static void on_reply(void *arg, const char *err, redisReply *r)
{
    struct call *c = arg;
    const char *msg = r != NULL && r->str != NULL ? r->str : NULL;
    switch (c->op) {
    case OP_CLAIM:
        claim_reply(c, err, msg, r);
        break;
    case OP_PAIRS:
        pairs_reply(c, err, msg, r);
        break;
    case OP_FANOUT:
        fanout_reply(c, err, msg, r);
        break;
    case OP_COUNT:
        if (c->cb.count == NULL)
            break;
        if (err == NULL && r->type != REDIS_REPLY_INTEGER)
            err = dl_err_reply;
        c->cb.count(c->arg, err, msg, err == NULL ? r->integer : 0);
        break;
    case OP_GROUP:
        if (err == store_err_server && msg != NULL && strncmp(msg, "BUSYGROUP", 9) == 0)
            err = NULL; /* it exists */
        c->cb.group(c->arg, err, msg);
        break;
    case OP_AUTOCLAIM:
        autoclaim_reply(c, err, msg, r);
        break;
    case OP_READ:
    case OP_RANGE:
        events_reply(c, err, msg, r);
        break;
    case OP_LOAD:
        load_reply(c, err, msg, r);
        break;
    case OP_VERSION:
        if (err == NULL && r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)
            err = dl_err_reply;
        c->cb.version(c->arg, err, msg,
                      err != NULL                    ? NULL
                      : r->type == REDIS_REPLY_STRING ? r->str
                                                      : "0");
        break;
    case OP_HELD:
        held_reply(c, err, msg, r);
        break;
    }
    free(c);
}

/* EVALSHA sc with c as privdata; c is freed when the command cannot be sent. */
static int eval(struct store *s, enum sc_id id, struct call *c, int nkeys, int argc,
                const char **argv, const size_t *lens)
{
    if (store_eval(s, script(id), on_reply, c, nkeys, argc, argv, lens) != 0) {
        free(c);
        return -1;
    }
    return 0;
}

/* A decimal number, in buf (24 bytes). */
static const char *num(char *buf, long long v)
{
    snprintf(buf, 24, "%lld", v);
    return buf;
}

/* ---- claim ----------------------------------------------------------------------------- */

int dl_claim(struct store *s, const struct dl_claim_req *q, dl_claim_cb *cb, void *arg)
{
    const char *ptag = store_part_tag(s, q->part);
    char k_due[KEY_MAX], k_inflight[KEY_MAX], k_ver[KEY_MAX];
    key_build(k_due, sizeof(k_due), ptag, "due", NULL, NULL);
    key_build(k_inflight, sizeof(k_inflight), ptag, "inflight", NULL, NULL);
    ver_key(s, q->part, k_ver);
    char *tag = view_tag(s, q->part, q->view);
    int argc = 9 + 2 * (int)q->nfree;
    const char **argv = xmalloc(sizeof(char *) * (size_t)argc);
    char now[24], lease[24], max[24], defs[24], ret[24];
    char (*fr)[24] = xmalloc(24 * (q->nfree ? q->nfree : 1));
    argv[0] = k_due, argv[1] = k_inflight, argv[2] = k_ver, argv[3] = tag;
    argv[4] = num(now, q->now_ms), argv[5] = num(lease, q->lease_ms);
    argv[6] = num(max, (long long)q->max), argv[7] = num(defs, q->def_free);
    argv[8] = num(ret, q->retention_ms);
    for (size_t i = 0; i < q->nfree; i++) {
        argv[9 + 2 * i] = q->free[i].whid;
        snprintf(fr[i], 24, "%ld%s", q->free[i].free, q->free[i].limited ? "r" : "");
        argv[10 + 2 * i] = fr[i];
    }
    struct call *c = call_new(OP_CLAIM, arg);
    c->cb.claim = cb;
    int r = eval(s, SC_CLAIM, c, 3, argc, argv, NULL);
    free(argv);
    free(fr);
    free(tag);
    return r;
}

/* ---- outcomes -------------------------------------------------------------------------- */

int dl_done(struct store *s, unsigned part, const char *view, int64_t now_ms,
            int64_t disable_after_ms, int64_t retention_ms, const struct dl_result *res,
            size_t n, dl_pairs_cb *cb, void *arg)
{
    const char *ptag = store_part_tag(s, part);
    char k_due[KEY_MAX], k_inflight[KEY_MAX], k_dead[KEY_MAX], k_ver[KEY_MAX];
    /* several partitions: health goes back through wh_health.lua (dl_health) */
    ver_key(s, part, k_ver);
    key_build(k_due, sizeof(k_due), ptag, "due", NULL, NULL);
    key_build(k_inflight, sizeof(k_inflight), ptag, "inflight", NULL, NULL);
    key_build(k_dead, sizeof(k_dead), ptag, "dead", NULL, NULL);
    char *tag = view_tag(s, part, view);
    int argc = 8 + 5 * (int)n;
    const char **argv = xmalloc(sizeof(char *) * (size_t)argc);
    char now[24], dis[24], ret[24];
    char (*nx)[24] = xmalloc(24 * (n ? n : 1));
    argv[0] = k_due, argv[1] = k_inflight, argv[2] = k_ver, argv[3] = k_dead;
    argv[4] = tag, argv[5] = num(now, now_ms), argv[6] = num(dis, disable_after_ms);
    argv[7] = num(ret, retention_ms);
    for (size_t i = 0; i < n; i++) {
        argv[8 + 5 * i] = res[i].did;
        argv[9 + 5 * i] = res[i].whid;
        argv[10 + 5 * i] = dl_outcome_name(res[i].outcome);
        argv[11 + 5 * i] = res[i].json;
        argv[12 + 5 * i] = num(nx[i], res[i].next_ms);
    }
    struct call *c = call_new(OP_PAIRS, arg);
    c->cb.pairs = cb;
    int r = eval(s, SC_DONE, c, 4, argc, argv, NULL);
    free(argv);
    free(nx);
    free(tag);
    return r;
}

int dl_health(struct store *s, int64_t now_ms, int64_t disable_after_ms,
              const struct dl_pairs *p, dl_pairs_cb *cb, void *arg)
{
    if (p->n == 0)
        return 0;
    if (store_partitions(s) <= 1) { /* applied by the script: these are the disabled ones */
        if (cb != NULL)
            cb(arg, NULL, NULL, p);
        return 0;
    }
    const struct dl_idval *v = p->v;
    size_t n = p->n;
    char kv[KEY_MAX], now[24], dis[24];
    key_build(kv, sizeof(kv), store_tag(s), "whv", NULL, NULL);
    int argc = 4 + 2 * (int)n;
    const char **argv = xmalloc(sizeof(char *) * (size_t)argc);
    argv[0] = kv, argv[1] = store_tag(s), argv[2] = num(now, now_ms);
    argv[3] = num(dis, disable_after_ms);
    for (size_t i = 0; i < n; i++) {
        argv[4 + 2 * i] = v[i].id;
        argv[5 + 2 * i] = v[i].val;
    }
    struct call *c = call_new(OP_PAIRS, arg);
    c->cb.pairs = cb;
    int r = eval(s, SC_HEALTH, c, 1, argc, argv, NULL);
    free(argv);
    return r;
}

/* ---- endpoint.disabled with several partitions (wh_disabled.lua) ------------------------ */

/* One outbox entry on its way: written to its partition's stream, then removed. */
struct dis_op {
    struct store *s;
    char *entry; /* "<webhook id> <record>", owned */
};

static void on_dis_removed(void *arg, const char *err, redisReply *r)
{
    (void)err;
    (void)r;
    struct dis_op *op = arg;
    free(op->entry);
    free(op);
}

static void on_dis_written(void *arg, const char *err, redisReply *r)
{
    struct dis_op *op = arg;
    char k[KEY_MAX];
    (void)r;
    key_build(k, sizeof(k), store_tag(op->s), "wdisq", NULL, NULL);
    /* written (or written before): the entry goes; an error leaves it for the next flush */
    if (err != NULL ||
        store_cmd(op->s, on_dis_removed, op, "LREM %s 1 %s", k, op->entry) != 0) {
        free(op->entry);
        free(op);
    }
}

static void on_dis_queue(void *arg, const char *err, redisReply *r)
{
    struct store *s = arg;
    for (size_t i = 0; err == NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        const char *sp = e->type == REDIS_REPLY_STRING ? memchr(e->str, ' ', e->len) : NULL;
        if (sp == NULL || sp == e->str)
            continue;
        struct dis_op *op = xcalloc(1, sizeof(*op));
        op->s = s;
        op->entry = xstrdup(e->str);
        char *id = xstrndup(e->str, (size_t)(sp - e->str));
        const char *tag = store_tag_of(s, id);
        char k[KEY_MAX];
        key_build(k, sizeof(k), tag, "events", NULL, NULL);
        const char *argv[] = {k, tag, id, op->entry + (sp - e->str) + 1};
        if (store_eval(s, script(SC_DISABLED), on_dis_written, op, 1, 4, argv, NULL) != 0) {
            free(op->entry);
            free(op);
        }
        free(id);
    }
}

int dl_disabled_flush(struct store *s)
{
    if (store_partitions(s) <= 1)
        return 0; /* written by the script that disabled the endpoint */
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag(s), "wdisq", NULL, NULL);
    return store_cmd(s, on_dis_queue, s, "LRANGE %s 0 31", k);
}

/* ---- reaper, version, lease ------------------------------------------------------------ */

int dl_reap(struct store *s, unsigned part, int64_t now_ms, long max, dl_count_cb *cb,
            void *arg)
{
    const char *tag = store_part_tag(s, part);
    char now[24], mx[24], k_due[KEY_MAX], k_inflight[KEY_MAX];
    key_build(k_due, sizeof(k_due), tag, "due", NULL, NULL);
    key_build(k_inflight, sizeof(k_inflight), tag, "inflight", NULL, NULL);
    const char *argv[] = {k_due, k_inflight, tag, num(now, now_ms), num(mx, max)};
    struct call *c = call_new(OP_COUNT, arg);
    c->cb.count = cb;
    return eval(s, SC_REAP, c, 2, 5, argv, NULL);
}

static int version_get(struct store *s, dl_version_cb *cb, void *arg)
{
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag(s), "whv", NULL, NULL);
    struct call *c = call_new(OP_VERSION, arg);
    c->cb.version = cb;
    if (store_cmd(s, on_reply, c, "GET %s", k) != 0) {
        free(c);
        return -1;
    }
    return 0;
}

int dl_version_probe(struct store *s, dl_version_cb *cb, void *arg)
{
    if (store_partitions(s) <= 1)
        return 1; /* each claim's reply carries it */
    return version_get(s, cb, arg);
}

int dl_lease(struct store *s, unsigned part, const char *holder, int64_t lease_ms,
             dl_count_cb *cb, void *arg)
{
    char k[KEY_MAX], ms[24];
    key_build(k, sizeof(k), store_part_tag(s, part), "fanout", NULL, NULL);
    const char *argv[] = {k, holder, num(ms, lease_ms)};
    struct call *c = call_new(OP_COUNT, arg);
    c->cb.count = cb;
    return eval(s, SC_LEASE, c, 1, 3, argv, NULL);
}

/* ---- held pairs ------------------------------------------------------------------------ */

/* wh_held.lua on partition part; version "*": not checked by the script. */
static int held_send(struct store *s, unsigned part, const char *version,
                     const struct dl_pair_ref *p, size_t n, dl_held_cb *cb, void *arg)
{
    const char *ptag = store_part_tag(s, part);
    char k[KEY_MAX];
    /* several partitions: KEYS[1] is a key of the partition (the version was read before) */
    if (store_partitions(s) > 1)
        key_build(k, sizeof(k), ptag, "events", NULL, NULL);
    else
        key_build(k, sizeof(k), store_tag(s), "whv", NULL, NULL);
    int argc = 3 + 2 * (int)n;
    const char **argv = xmalloc(sizeof(char *) * (size_t)argc);
    argv[0] = k;
    argv[1] = ptag; /* order sets: the partition's */
    argv[2] = version;
    for (size_t i = 0; i < n; i++) {
        argv[3 + 2 * i] = p[i].whid;
        argv[4 + 2 * i] = p[i].request_id;
    }
    struct call *c = call_new(OP_HELD, arg);
    c->cb.held = cb;
    int r = eval(s, SC_HELD, c, 1, argc, argv, NULL);
    free(argv);
    return r;
}

/* dl_held with several partitions, between the version read and the script: the caller's
 * arguments, copied (owned here until the version's reply). */
struct held_chain {
    struct store *s;
    unsigned part;
    char *version;
    struct dl_pair_ref *p; /* strings in strs */
    char *strs;
    size_t n;
    dl_held_cb *cb;
    void *arg;
};

static void held_chain_free(struct held_chain *h)
{
    free(h->version);
    free(h->p);
    free(h->strs);
    free(h);
}

static struct held_chain *held_chain_new(struct store *s, unsigned part, const char *version,
                                         const struct dl_pair_ref *p, size_t n)
{
    struct held_chain *h = xcalloc(1, sizeof(*h));
    h->s = s, h->part = part, h->n = n;
    h->version = xstrdup(version);
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(p[i].whid) + strlen(p[i].request_id) + 2;
    h->strs = xmalloc(len);
    h->p = xcalloc(n ? n : 1, sizeof(*h->p));
    char *at = h->strs;
    for (size_t i = 0; i < n; i++) {
        size_t a = strlen(p[i].whid) + 1, b = strlen(p[i].request_id) + 1;
        h->p[i].whid = memcpy(at, p[i].whid, a);
        h->p[i].request_id = memcpy(at + a, p[i].request_id, b);
        at += a + b;
    }
    return h;
}

static void held_on_version(void *arg, const char *err, const char *msg, const char *ver)
{
    struct held_chain *h = arg;
    if (err != NULL) {
        h->cb(h->arg, err, msg, NULL);
    } else if (strcmp(ver, h->version) != 0) {
        struct dl_held_res res = {.stale = 1, .version = ver};
        h->cb(h->arg, NULL, NULL, &res);
    } else if (held_send(h->s, h->part, "*", h->p, h->n, h->cb, h->arg) != 0) {
        h->cb(h->arg, store_err_disconnected, NULL, NULL);
    }
    held_chain_free(h);
}

int dl_held(struct store *s, unsigned part, const char *version, const struct dl_pair_ref *p,
            size_t n, dl_held_cb *cb, void *arg)
{
    if (store_partitions(s) <= 1) /* the script checks the version itself */
        return held_send(s, part, version, p, n, cb, arg);
    struct held_chain *h = held_chain_new(s, part, version, p, n);
    h->cb = cb;
    h->arg = arg;
    if (version_get(s, held_on_version, h) != 0) {
        held_chain_free(h);
        return -1;
    }
    return 0;
}

/* ---- fan-out --------------------------------------------------------------------------- */

static void f_own(struct dl_fanout *f, char *s)
{
    if (f->nowned == f->capowned) {
        f->capowned = f->capowned ? f->capowned * 2 : 64;
        f->owned = xrealloc(f->owned, f->capowned * sizeof(*f->owned));
    }
    f->owned[f->nowned++] = s;
}

static void f_push(struct dl_fanout *f, const char *s, size_t len, int own)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 64;
        f->v = xrealloc(f->v, f->cap * sizeof(*f->v));
        f->lens = xrealloc(f->lens, f->cap * sizeof(*f->lens));
    }
    f->v[f->n] = s;
    f->lens[f->n++] = len;
    if (own)
        f_own(f, (char *)s);
}

static void f_str(struct dl_fanout *f, const char *s)
{
    f_push(f, s, strlen(s), 0);
}

static void f_num(struct dl_fanout *f, long long v)
{
    char *s = xasprintf("%lld", v);
    f_push(f, s, strlen(s), 1);
}

static void f_key(struct dl_fanout *f, const char *tag, const char *kind)
{
    char *k = xmalloc(KEY_MAX);
    key_build(k, KEY_MAX, tag, kind, NULL, NULL);
    f_push(f, k, strlen(k), 1);
}

/* The current event's pair count goes into its slot. */
static void f_event_end(struct dl_fanout *f)
{
    if (f->pairs > 0) {
        char *ns = xasprintf("%zu", f->pairs);
        f->v[f->n_at] = ns;
        f->lens[f->n_at] = strlen(ns);
        f_own(f, ns);
    }
    f->pairs = 0;
}

/* wh_fanout.lua: KEYS events, version, lease, inflight, dead; ARGV tag, version, holder, now,
 * group, retention, replay, list cap, disable after; then per event (stream id, event id,
 * request id, seq, status, event time, body, pair count) and its pairs (endpoint id, kind
 * letter, attempt JSON, number). */
#define FANOUT_NKEYS 5
void dl_fanout_begin(struct dl_fanout *f, struct store *s, const struct dl_fanout_opts *o)
{
    const char *tag = store_part_tag(s, o->part);
    int several = store_partitions(s) > 1;
    memset(f, 0, sizeof(*f));
    f->s = s;
    f_key(f, tag, "events");
    /* the endpoint set's version is a deployment key: with several partitions the script
     * cannot read it (one slot per script), the caller checks it, and KEYS[2] names an
     * unused key of the partition */
    f_key(f, several ? tag : store_tag(s), "whv");
    f_key(f, tag, "fanout");
    f_key(f, tag, "inflight");
    f_key(f, tag, "dead");
    char *vt = view_tag(s, o->part, o->view);
    f_push(f, vt, strlen(vt), 1);
    f_str(f, o->version != NULL && !several ? o->version : "*");
    f_str(f, o->holder);
    f_num(f, o->now_ms);
    f_str(f, o->group);
    f_num(f, o->retention_ms);
    f_str(f, o->replay ? "1" : "0");
    f_num(f, o->list_cap);
    f_num(f, o->disable_after_ms);
}

void dl_fanout_event(struct dl_fanout *f, const char *sid, const struct status_event *ev)
{
    f_event_end(f);
    f->events++;
    f->body_at = f->n_at = 0;
    f_str(f, sid);
    if (ev == NULL) { /* deleted or unreadable entry: acknowledged, nothing to deliver */
        for (int k = 0; k < 6; k++)
            f_push(f, "", 0, 0);
        f_push(f, "0", 1, 0);
        return;
    }
    f_str(f, ev->event_id);
    f_str(f, ev->request_id);
    f_num(f, (long long)ev->seq);
    f_str(f, ev->status ? ev->status : "");
    f_num(f, ev->created_at);
    f->body_at = f->n;
    f_push(f, "", 0, 0);
    f->n_at = f->n;
    f_push(f, "0", 1, 0);
}

void dl_fanout_pair(struct dl_fanout *f, const char *whid, enum dl_pair kind, const char *json,
                    int64_t num)
{
    f_str(f, whid);
    f_push(f, (unsigned)kind < DL_PAIR_COUNT ? &pair_letters[kind] : "p", 1, 0);
    f_str(f, json ? json : "");
    f_num(f, num);
    f->pairs++;
}

void dl_fanout_body(struct dl_fanout *f, const char *body, size_t len, int own)
{
    if (own)
        f_own(f, (char *)body);
    if (f->body_at == 0)
        return; /* no event, or an unreadable one */
    f->v[f->body_at] = body;
    f->lens[f->body_at] = len;
}

void dl_fanout_drop(struct dl_fanout *f)
{
    if (f->events == 0)
        return;
    /* the event started at its stream id: 6 slots before the body slot */
    f->n = f->body_at != 0 ? f->body_at - 6 : f->n - 8;
    f->events--;
    f->pairs = 0;
    f->body_at = f->n_at = 0;
}

int dl_fanout_send(struct dl_fanout *f, dl_fanout_cb *cb, void *arg)
{
    f_event_end(f);
    struct call *c = call_new(OP_FANOUT, arg);
    c->cb.fanout = cb;
    return eval(f->s, SC_FANOUT, c, FANOUT_NKEYS, (int)f->n, f->v, f->lens);
}

void dl_fanout_free(struct dl_fanout *f)
{
    for (size_t i = 0; i < f->nowned; i++)
        free(f->owned[i]);
    free(f->v);
    free(f->lens);
    free(f->owned);
    memset(f, 0, sizeof(*f));
}

/* ---- replay of dead or skipped deliveries ---------------------------------------------- */

int dl_requeue(struct store *s, const struct dl_requeue_req *q, dl_count_cb *cb, void *arg)
{
    const char *ptag = store_part_tag(s, q->part);
    char *tag = view_tag(s, q->part, q->view);
    char kset[KEY_MAX], kdue[KEY_MAX], now[24], since[24] = "", until[24] = "", max[24];
    key_build(kset, sizeof(kset), ptag, q->skipped ? "skipped" : "dead", NULL, NULL);
    key_build(kdue, sizeof(kdue), ptag, "due", NULL, NULL);
    if (q->has_since)
        num(since, q->since_ms);
    if (q->has_until)
        num(until, q->until_ms);
    const char *argv[] = {kset,  kdue,  tag,   num(now, q->now_ms), q->webhook_id, q->request_id,
                          since, until, q->dry ? "1" : "0", num(max, q->max)};
    struct call *c = call_new(OP_COUNT, arg);
    c->cb.count = cb;
    int r = eval(s, SC_REQUEUE, c, 2, 10, argv, NULL);
    free(tag);
    return r;
}

/* ---- the fan-out's stream -------------------------------------------------------------- */

static void events_key(struct store *s, unsigned part, char *out)
{
    key_build(out, KEY_MAX, store_part_tag(s, part), "events", NULL, NULL);
}

int dl_group_create(struct store *s, unsigned part, const char *group, dl_group_cb *cb,
                    void *arg)
{
    char k[KEY_MAX];
    events_key(s, part, k);
    struct call *c = call_new(OP_GROUP, arg);
    c->cb.group = cb;
    if (store_cmd(s, on_reply, c, "XGROUP CREATE %s %s 0 MKSTREAM", k, group) != 0) {
        free(c);
        return -1;
    }
    return 0;
}

int dl_autoclaim(struct store *s, unsigned part, const char *group, const char *consumer,
                 const char *cursor, dl_autoclaim_cb *cb, void *arg)
{
    char k[KEY_MAX];
    events_key(s, part, k);
    struct call *c = call_new(OP_AUTOCLAIM, arg);
    c->cb.autoclaim = cb;
    if (store_cmd(s, on_reply, c, "XAUTOCLAIM %s %s %s 0 %s COUNT 1000 JUSTID", k, group,
                  consumer, cursor) != 0) {
        free(c);
        return -1;
    }
    return 0;
}

int dl_read(struct store *s, unsigned part, const char *group, const char *consumer,
            size_t count, int pending, dl_events_cb *cb, void *arg)
{
    char k[KEY_MAX], cnt[24];
    events_key(s, part, k);
    snprintf(cnt, sizeof(cnt), "%zu", count);
    struct call *c = call_new(OP_READ, arg);
    c->cb.events = cb;
    if (store_cmd(s, on_reply, c, "XREADGROUP GROUP %s %s COUNT %s STREAMS %s %s", group,
                  consumer, cnt, k, pending ? "0" : ">") != 0) {
        free(c);
        return -1;
    }
    return 0;
}

int dl_events_page(struct store *s, unsigned part, const char *start, const char *end,
                   int count, dl_events_cb *cb, void *arg)
{
    struct call *c = call_new(OP_RANGE, arg);
    c->cb.events = cb;
    if (store_events_range_in(s, store_part_tag(s, part), start, end, count, on_reply, c) != 0) {
        free(c);
        return -1;
    }
    return 0;
}

int dl_events_of_request(struct store *s, const char *request_id, dl_events_cb *cb, void *arg)
{
    const char *tag = store_tag_of(s, request_id);
    char ktl[KEY_MAX], kev[KEY_MAX], kreq[KEY_MAX];
    key_build(ktl, sizeof(ktl), tag, "tl", request_id, NULL);
    key_build(kreq, sizeof(kreq), tag, "req", request_id, NULL);
    key_build(kev, sizeof(kev), tag, "events", NULL, NULL);
    const char *argv[] = {ktl, kev, kreq, "", "", "100000"};
    struct call *c = call_new(OP_RANGE, arg);
    c->cb.events = cb;
    return eval(s, SC_EVENTS_BY_REQUEST, c, 3, 6, argv, NULL);
}

/* ---- members --------------------------------------------------------------------------- */

int dl_members(struct store *s, const char *instance, int64_t now_ms, int64_t lease_ms,
               dl_count_cb *cb, void *arg)
{
    char k[KEY_MAX], now[24], lease[24];
    key_build(k, sizeof(k), store_tag(s), "members", NULL, NULL);
    const char *argv[] = {k, instance, num(now, now_ms), num(lease, lease_ms)};
    struct call *c = call_new(OP_COUNT, arg);
    c->cb.count = cb;
    return eval(s, SC_MEMBERS, c, 1, 4, argv, NULL);
}

/* ---- the endpoint set ------------------------------------------------------------------ */

int dl_endpoints_load(struct store *s, dl_endpoints_cb *cb, void *arg)
{
    char kidx[KEY_MAX], kver[KEY_MAX];
    const char *tag = store_tag(s);
    key_build(kidx, sizeof(kidx), tag, "whs", NULL, NULL);
    key_build(kver, sizeof(kver), tag, "whv", NULL, NULL);
    const char *argv[] = {kidx, kver, tag};
    struct call *c = call_new(OP_LOAD, arg);
    c->cb.load = cb;
    return eval(s, SC_LOAD, c, 2, 3, argv, NULL);
}

int dl_endpoint_put(struct store *s, const char *id, int create, const char *const *fields,
                    int nfields, int64_t now_ms, dl_count_cb *cb, void *arg)
{
    const char *tag = store_tag(s);
    char kwh[KEY_MAX], kidx[KEY_MAX], kver[KEY_MAX], now[24];
    key_build(kwh, sizeof(kwh), tag, "wh", id, NULL);
    key_build(kidx, sizeof(kidx), tag, "whs", NULL, NULL);
    key_build(kver, sizeof(kver), tag, "whv", NULL, NULL);
    int argc = 6 + 2 * nfields;
    const char **argv = xcalloc((size_t)argc, sizeof(char *));
    size_t *lens = xcalloc((size_t)argc, sizeof(size_t));
    argv[0] = kwh, argv[1] = kidx, argv[2] = kver, argv[3] = id;
    argv[4] = create ? "create" : "update", argv[5] = num(now, now_ms);
    /* a deleted field's value is the 4 bytes "\0del" (wh_put.lua) */
    for (int i = 0; i < 2 * nfields; i++)
        argv[6 + i] = fields[i] ? fields[i] : "\0del";
    for (int i = 0; i < argc; i++)
        lens[i] = i >= 6 && fields[i - 6] == NULL ? 4 : strlen(argv[i]);
    struct call *c = call_new(OP_COUNT, arg);
    c->cb.count = cb;
    int r = eval(s, SC_PUT, c, 3, argc, argv, lens);
    free(argv);
    free(lens);
    return r;
}

int dl_endpoint_del(struct store *s, const char *id, int64_t now_ms, dl_count_cb *cb,
                    void *arg)
{
    const char *tag = store_tag(s);
    char k[5][KEY_MAX], now[24];
    key_build(k[0], KEY_MAX, tag, "wh", id, NULL);
    key_build(k[1], KEY_MAX, tag, "whs", NULL, NULL);
    key_build(k[2], KEY_MAX, tag, "whv", NULL, NULL);
    key_build(k[3], KEY_MAX, tag, "due", NULL, NULL);
    key_build(k[4], KEY_MAX, tag, "whgone", NULL, NULL); /* purged by store/wh_gc.lua */
    const char *argv[] = {k[0], k[1], k[2], k[3], k[4], num(now, now_ms), id};
    struct call *c = call_new(OP_COUNT, arg);
    c->cb.count = cb;
    return eval(s, SC_DEL, c, 5, 7, argv, NULL);
}
