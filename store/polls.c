/* polls.c - see polls.h: the keys, arguments and replies of the poll, budget and chain list
 * scripts. Ownership: each call allocates one op (the callback argument of its commands),
 * freed after its callback ran; claimed ids of a round are copied into it.
 * runs on: core thread only. */
#include "store/polls.h"
#include "relay/common/util.h"
#include "store/keys.h"
#include "store/script_table.h"
#include "store/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char polls_err_reply[] = "unexpected reply";

enum sc_id {
    SC_CLAIM = 0,
    SC_TAKE,
    SC_SET,
    SC_DUE,
    SC_BUDGET_TAKE,
    SC_BUDGET_GIVE,
    SC_CHAINS_LOOK,
    SC_CHAINS_PUT,
    SC_N
};
static const char *const sc_names[SC_N] = {"poll_claim",  "poll_take",   "poll_set",
                                           "poll_due",    "budget_take", "budget_give",
                                           "chains_poll", "chains_put"};
static struct store_script scripts[SC_N]; /* script_table.h */

static const struct store_script *script(enum sc_id id)
{
    return script_table_get(scripts, sc_names, id);
}

/* The keys of poll_claim.lua, and the tiers poll_due.lua makes due, in their order. */
static const char *const claim_kinds[6] = {"poll", "budget", "pollu", "polls", "polln", "budgetr"};
static const char *const due_active[2] = {"poll", "pollu"};
static const char *const due_all[4] = {"pollu", "poll", "polls", "polln"};

/* ---- poll_claim.lua: one partition's budget and polls in one step ---------------------------
 * KEYS poll, budget, pollu, polls, polln, budgetr; ARGV now, max polls, lease, budget, calls
 * to reserve, only reserve ("1"/"0"), anonymous share, feed skip ms, tag. Reply {granted
 * calls, id, ...}. */
static int claim_script(struct store *s, int max, int64_t lease_ms, int64_t budget, int calls,
                        int64_t share, int64_t skip_ms, store_cb *cb, void *arg)
{
    char k[6][KEY_MAX], now[SCRIPT_NUM_MAX], maxs[SCRIPT_NUM_MAX], lease[SCRIPT_NUM_MAX],
        bud[SCRIPT_NUM_MAX], extra[SCRIPT_NUM_MAX], sh[SCRIPT_NUM_MAX], sk[SCRIPT_NUM_MAX];
    const char *tag = store_tag(s);
    for (int i = 0; i < 6; i++)
        key_build(k[i], KEY_MAX, tag, claim_kinds[i], NULL, NULL);
    const char *argv[] = {k[0],
                          k[1],
                          k[2],
                          k[3],
                          k[4],
                          k[5],
                          script_num(now, wall_ms()),
                          script_num(maxs, max),
                          script_num(lease, lease_ms),
                          script_num(bud, budget),
                          script_num(extra, calls),
                          max > 0 ? "0" : "1",
                          script_num(sh, share),
                          script_num(sk, skip_ms),
                          tag};
    return store_eval(s, script(SC_CLAIM), cb, arg, 6, 15, argv, NULL);
}

struct reserve_op {
    polls_reserve_cb *cb;
    void *arg;
};

static void on_reserved(void *arg, const char *err, redisReply *r)
{
    struct reserve_op *op = arg;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 1))
        err = polls_err_reply;
    op->cb(op->arg, err, err == NULL ? (int)r->element[0]->integer : 0);
    free(op);
}

/* A reservation only touches the budget, a deployment key: with several partitions too it is
 * poll_claim.lua under the deployment tag, whose tiers it names but never reads. */
int polls_reserve(struct store *s, const struct polls_reserve *q, polls_reserve_cb *cb, void *arg)
{
    struct reserve_op *op = xcalloc(1, sizeof(*op));
    op->cb = cb;
    op->arg = arg;
    if (claim_script(s, 0, 0, q->budget, q->calls, q->anon_share, 0, on_reserved, op) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

/* ---- claims ------------------------------------------------------------------------------ */

struct claim_op {
    struct store *s;
    struct polls_claim q;
    polls_claim_cb *cb;
    void *arg;
    /* a round (several partitions): calls taken from the budget, tokens there were, and the
     * claimed ids (copies); pass 0 the tracked tiers, 1 the anonymous tier; partition
     * (start + i) % np is asked next */
    int granted, avail;
    char **ids;
    size_t n;
    int pass;
    unsigned np, start, i;
};

static void claim_done(struct claim_op *op, const char *err)
{
    op->cb(op->arg, err, (const char *const *)op->ids, op->n);
    for (size_t i = 0; i < op->n; i++)
        free(op->ids[i]);
    free(op->ids);
    free(op);
}

/* One partition: poll_claim.lua, the reply's ids handed over as they are. */
static void on_claimed(void *arg, const char *err, redisReply *r)
{
    struct claim_op *op = arg;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements < 1))
        err = polls_err_reply;
    size_t n = 0;
    const char **ids = xcalloc(err == NULL ? r->elements : 1, sizeof(*ids));
    for (size_t i = 1; err == NULL && i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING)
            ids[n++] = r->element[i]->str;
    op->cb(op->arg, err, ids, n);
    free(ids);
    free(op);
}

/* budget_take.lua / budget_give.lua on the deployment's bucket: n calls. */
static int budget_call(struct store *s, enum sc_id sc, int64_t budget, int n, store_cb *cb,
                       void *arg)
{
    char k[KEY_MAX], now[SCRIPT_NUM_MAX], ns[SCRIPT_NUM_MAX], bud[SCRIPT_NUM_MAX];
    key_build(k, sizeof(k), store_tag(s), "budget", NULL, NULL);
    const char *argv[] = {k, script_num(now, wall_ms()), script_num(ns, n),
                          script_num(bud, budget)};
    return store_eval(s, script(sc), cb, arg, 1, 4, argv, NULL);
}

/* The end of a round: what was taken and not used goes back to the budget. */
static void round_end(struct claim_op *op, const char *err)
{
    int unused = op->granted - (int)op->n;
    if (unused > 0)
        budget_call(op->s, SC_BUDGET_GIVE, op->q.budget, unused, NULL, NULL);
    claim_done(op, err);
}

static void round_next(struct claim_op *op);

static void on_taken(void *arg, const char *err, redisReply *r)
{
    struct claim_op *op = arg;
    if (err == NULL && r->type != REDIS_REPLY_ARRAY)
        err = polls_err_reply;
    if (err != NULL) {
        round_end(op, err);
        return;
    }
    op->ids = xrealloc(op->ids, (op->n + r->elements + 1) * sizeof(*op->ids));
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]->type == REDIS_REPLY_STRING)
            op->ids[op->n++] = xstrdup(r->element[i]->str);
    op->i++;
    round_next(op);
}

/* poll_take.lua on the next partition: the tracked tiers of every partition first, then the
 * anonymous tier of every partition with at most half of the tokens left. */
static void round_next(struct claim_op *op)
{
    if (op->i == op->np && op->pass == 0)
        op->pass = 1, op->i = 0;
    int left = op->granted - (int)op->n;
    int anon = (op->avail - (int)op->n) / 2;
    if (anon > left)
        anon = left;
    if (op->i == op->np || left <= 0 || (op->pass == 1 && anon <= 0)) {
        round_end(op, NULL);
        return;
    }
    const char *tag = store_part_tag(op->s, (op->start + op->i) % op->np);
    char ku[KEY_MAX], ka[KEY_MAX], ks[KEY_MAX], kn[KEY_MAX], now[SCRIPT_NUM_MAX],
        nt[SCRIPT_NUM_MAX], lease[SCRIPT_NUM_MAX], na[SCRIPT_NUM_MAX], sk[SCRIPT_NUM_MAX];
    key_build(ku, sizeof(ku), tag, "pollu", NULL, NULL);
    key_build(ka, sizeof(ka), tag, "poll", NULL, NULL);
    key_build(ks, sizeof(ks), tag, "polls", NULL, NULL);
    key_build(kn, sizeof(kn), tag, "polln", NULL, NULL);
    const char *argv[] = {ku,
                          ka,
                          ks,
                          kn,
                          script_num(now, wall_ms()),
                          script_num(nt, op->pass == 0 ? left : 0),
                          script_num(lease, op->q.lease_ms),
                          script_num(na, op->pass == 1 ? anon : 0),
                          script_num(sk, op->q.skip_feed_ms),
                          tag};
    if (store_eval(op->s, script(SC_TAKE), on_taken, op, 4, 10, argv, NULL) != 0)
        round_end(op, store_err_disconnected);
}

static void on_budget_taken(void *arg, const char *err, redisReply *r)
{
    struct claim_op *op = arg;
    if (err == NULL && (r->type != REDIS_REPLY_ARRAY || r->elements != 2))
        err = polls_err_reply;
    if (err != NULL) {
        round_end(op, err); /* nothing was granted */
        return;
    }
    op->granted = (int)r->element[0]->integer;
    op->avail = (int)r->element[1]->integer;
    round_next(op);
}

int polls_claim(struct store *s, const struct polls_claim *q, polls_claim_cb *cb, void *arg)
{
    struct claim_op *op = xcalloc(1, sizeof(*op));
    op->s = s;
    op->q = *q;
    op->cb = cb;
    op->arg = arg;
    op->np = store_partitions(s);
    int rc;
    if (op->np <= 1) { /* one partition: budget and tiers in one atomic step */
        rc = claim_script(s, q->max, q->lease_ms, q->budget, 0, 0, q->skip_feed_ms, on_claimed,
                          op);
    } else {
        op->start = q->round % op->np;
        rc = budget_call(s, SC_BUDGET_TAKE, q->budget, q->max, on_budget_taken, op);
    }
    if (rc != 0)
        free(op);
    return rc;
}

/* ---- the schedule ------------------------------------------------------------------------- */

int polls_set(struct store *s, const char *id, char tier, int64_t due_ms)
{
    char k[KEY_MAX], at[SCRIPT_NUM_MAX], t[2] = {tier, 0};
    const char *tag = store_tag_of(s, id);
    key_build(k, sizeof(k), tag, "req", id, NULL);
    const char *argv[] = {k, id, t, script_num(at, due_ms), tag};
    return store_eval(s, script(SC_SET), NULL, NULL, 1, 5, argv, NULL);
}

void polls_due_now(struct store *s, enum polls_tiers which)
{
    const char *const *kinds = which == POLLS_TIERS_ALL ? due_all : due_active;
    int nk = which == POLLS_TIERS_ALL ? 4 : 2;
    char k[4][KEY_MAX], now[SCRIPT_NUM_MAX];
    script_num(now, wall_ms());
    for (unsigned p = 0; p < store_partitions(s); p++) { /* each partition's tiers */
        const char *tag = store_part_tag(s, p);
        const char *argv[5];
        for (int i = 0; i < nk; i++) {
            key_build(k[i], KEY_MAX, tag, kinds[i], NULL, NULL);
            argv[i] = k[i];
        }
        argv[nk] = now;
        store_eval(s, script(SC_DUE), NULL, NULL, nk, nk + 1, argv, NULL);
    }
}

/* ---- the chain list ----------------------------------------------------------------------- */

struct chains_op {
    polls_chains_look_cb *look_cb;
    polls_chains_put_cb *put_cb;
    void *arg;
};

static void chains_keys(struct store *s, char *k_list, char *k_lease)
{
    key_build(k_list, KEY_MAX, store_tag(s), "chains", NULL, NULL);
    key_build(k_lease, KEY_MAX, store_tag(s), "chainsl", NULL, NULL);
}

/* chains_poll.lua's reply: {fetch, at, body?}. */
static void on_chains_look(void *arg, const char *err, redisReply *r)
{
    struct chains_op *op = arg;
    struct polls_chains_seen seen = {0};
    if (err == NULL &&
        (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
         r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_STRING))
        err = polls_err_reply;
    if (err == NULL) {
        seen.fetch = r->element[0]->integer == 1;
        seen.at = r->element[1]->str;
        if (r->elements >= 3 && r->element[2]->type == REDIS_REPLY_STRING) {
            seen.body = r->element[2]->str;
            seen.body_len = r->element[2]->len;
        }
    }
    op->look_cb(op->arg, err, err == NULL ? &seen : NULL);
    free(op);
}

int polls_chains_look(struct store *s, const struct polls_chains_look *q, polls_chains_look_cb *cb,
                      void *arg)
{
    char k_list[KEY_MAX], k_lease[KEY_MAX], now[SCRIPT_NUM_MAX], period[SCRIPT_NUM_MAX],
        lease[SCRIPT_NUM_MAX];
    chains_keys(s, k_list, k_lease);
    const char *argv[] = {k_list,
                          k_lease,
                          script_num(now, wall_ms()),
                          script_num(period, q->period_ms),
                          script_num(lease, q->lease_ms),
                          q->holder,
                          q->known_at};
    struct chains_op *op = xcalloc(1, sizeof(*op));
    op->look_cb = cb;
    op->arg = arg;
    if (store_eval(s, script(SC_CHAINS_LOOK), on_chains_look, op, 2, 7, argv, NULL) != 0) {
        free(op);
        return -1;
    }
    return 0;
}

static void on_chains_put(void *arg, const char *err, redisReply *r)
{
    struct chains_op *op = arg;
    if (err == NULL && r->type != REDIS_REPLY_INTEGER)
        err = polls_err_reply;
    op->put_cb(op->arg, err, err == NULL && r->integer == 1);
    free(op);
}

int polls_chains_put(struct store *s, const char *holder, const char *body, size_t len,
                     int64_t hold_ms, polls_chains_put_cb *cb, void *arg)
{
    char k_list[KEY_MAX], k_lease[KEY_MAX], now[SCRIPT_NUM_MAX], hold[SCRIPT_NUM_MAX];
    chains_keys(s, k_list, k_lease);
    const char *argv[] = {k_list,           k_lease,
                          body ? body : "", script_num(now, wall_ms()),
                          holder,           script_num(hold, hold_ms)};
    const size_t lens[] = {strlen(k_list), strlen(k_lease), body ? len : 0,
                           strlen(now),    strlen(holder),  strlen(hold)};
    struct chains_op *op = NULL;
    if (cb != NULL) {
        op = xcalloc(1, sizeof(*op));
        op->put_cb = cb;
        op->arg = arg;
    }
    if (store_eval(s, script(SC_CHAINS_PUT), cb != NULL ? on_chains_put : NULL, op, 2, 6, argv,
                   lens) != 0) {
        free(op);
        return -1;
    }
    return 0;
}
