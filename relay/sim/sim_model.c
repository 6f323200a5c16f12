/* sim_model.c - see sim_model.h. runs on: the simulator's lws thread.
 *
 * Timers: one lws sul for the whole model, armed for the earliest due request of a binary
 * min-heap. (lws keeps its own timers in a sorted list with linear insertion; tens of
 * thousands of requests in load mode each with its own sul would make every insert O(n).) */
#include "relay/sim/sim_model.h"
#include "relay/sim/sim_json.h"
#include "relay/sim/sim_lifecycle.h"
#include "relay/sim/sim_map.h"
#include "relay/sim/sim_rand.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <libwebsockets.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FAM_GEN = 1, FAM_CTL = 2, FAM_SOCK = 3 };

static const char *const referrers[] = {"relay.link", "example-app", "wallet-x", NULL, NULL};

/* ---- model ------------------------------------------------------------------------------ */

struct sim_model {
    uint64_t seed;
    int64_t retain;
    sim_change_cb cb;
    void *cb_arg;
    struct lws_context *ctx;
    lws_sorted_usec_list_t sul;
    int sul_armed;
    int64_t sul_due_ms;
    struct sim_map *by_id;
    struct sim_map *interned;
    struct sim_map *early;   /* id -> struct early_counts, for ids not created yet */
    struct sim_req *oldest, *newest;
    size_t count, active;
    uint64_t seq, gen_n, ctl_n, sock_n, evicted;
    struct sim_req **heap;
    size_t heap_len, heap_cap;
    int mix_weight[SIM_NTMPL];
    int mix_total;
};

/* Counters for an id that has no request (yet). */
struct early_counts {
    char *id; /* heap; the map's key */
    struct sim_counts c;
};

/* The interned copy of s (valid until sim_model_free). */
static const char *sim_model_intern(struct sim_model *m, const char *s)
{
    if (s == NULL)
        return NULL;
    const char *v = sim_map_get(m->interned, s);
    if (v != NULL)
        return v;
    char *c = xstrdup(s);
    sim_map_put(m->interned, c, c);
    return c;
}

struct sim_model *sim_model_new(uint64_t seed, int64_t retain, sim_change_cb cb, void *arg)
{
    struct sim_model *m = xcalloc(1, sizeof(*m));
    m->seed = seed;
    m->retain = retain;
    m->cb = cb;
    m->cb_arg = arg;
    m->by_id = sim_map_new();
    m->interned = sim_map_new();
    m->early = sim_map_new();
    char err[128];
    if (sim_model_set_mix(m, "success:1", err, sizeof(err)) != 0)
        abort();
    return m;
}

void sim_model_attach(struct sim_model *m, struct lws_context *ctx)
{
    m->ctx = ctx;
}

static void req_free(struct sim_req *r)
{
    for (int i = 0; i < r->nin; i++)
        free(r->in[i].hash);
    for (int i = 0; i < r->nout; i++)
        free(r->out[i].hash);
    free(r->in);
    free(r->out);
    if (r->dep != NULL)
        free(r->dep->tx_hash);
    free(r->dep);
    free(r->reorg);
    free(r->steps);
    free(r->hist);
    free(r);
}

static void free_interned(void *arg, const char *key, void *val)
{
    free(val);
}

static void free_early(void *arg, const char *key, void *val)
{
    struct early_counts *e = val;
    free(e->id);
    free(e);
}

void sim_model_free(struct sim_model *m, int detached)
{
    if (m == NULL)
        return;
    if (!detached && m->ctx != NULL)
        lws_sul_cancel(&m->sul);
    for (struct sim_req *r = m->oldest, *n; r != NULL; r = n) {
        n = r->next;
        req_free(r);
    }
    sim_map_free(m->by_id);
    sim_map_each(m->interned, free_interned, NULL);
    sim_map_free(m->interned);
    sim_map_each(m->early, free_early, NULL);
    sim_map_free(m->early);
    free(m->heap);
    free(m);
}

int sim_model_set_mix(struct sim_model *m, const char *mix, char *err, size_t errn)
{
    int w[SIM_NTMPL] = {0}, total = 0;
    if (sim_tmpl_mix_parse(mix, w, &total, err, errn) != 0)
        return -1;
    memcpy(m->mix_weight, w, sizeof(w));
    m->mix_total = total;
    return 0;
}

/* ---- timers ----------------------------------------------------------------------------- */

static void heap_swap(struct sim_model *m, size_t a, size_t b)
{
    struct sim_req *t = m->heap[a];
    m->heap[a] = m->heap[b];
    m->heap[b] = t;
    m->heap[a]->heap_idx = (int)a;
    m->heap[b]->heap_idx = (int)b;
}

static void heap_up(struct sim_model *m, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (m->heap[p]->due_ms <= m->heap[i]->due_ms)
            break;
        heap_swap(m, p, i);
        i = p;
    }
}

static void heap_down(struct sim_model *m, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < m->heap_len && m->heap[l]->due_ms < m->heap[s]->due_ms)
            s = l;
        if (r < m->heap_len && m->heap[r]->due_ms < m->heap[s]->due_ms)
            s = r;
        if (s == i)
            break;
        heap_swap(m, s, i);
        i = s;
    }
}

static void heap_remove(struct sim_model *m, struct sim_req *r)
{
    if (r->heap_idx < 0)
        return;
    size_t i = (size_t)r->heap_idx, last = m->heap_len - 1;
    if (i != last) {
        heap_swap(m, i, last);
        m->heap_len--;
        heap_down(m, i);
        heap_up(m, i);
    } else {
        m->heap_len--;
    }
    r->heap_idx = -1;
}

static void on_timer(lws_sorted_usec_list_t *sul);

/* Arm the lws timer for the earliest due request (if it changed). */
static void rearm(struct sim_model *m)
{
    if (m->ctx == NULL)
        return;
    if (m->heap_len == 0) {
        if (m->sul_armed)
            lws_sul_cancel(&m->sul);
        m->sul_armed = 0;
        return;
    }
    int64_t due = m->heap[0]->due_ms;
    if (m->sul_armed && m->sul_due_ms == due)
        return;
    int64_t delay = due - mono_ms();
    if (delay < 0)
        delay = 0;
    lws_sul_schedule(m->ctx, 0, &m->sul, on_timer, delay * LWS_US_PER_MS);
    m->sul_armed = 1;
    m->sul_due_ms = due;
}

static void schedule(struct sim_model *m, struct sim_req *r, int64_t delay_ms)
{
    heap_remove(m, r);
    r->due_ms = mono_ms() + delay_ms;
    if (m->heap_len == m->heap_cap) {
        m->heap_cap = m->heap_cap ? m->heap_cap * 2 : 256;
        m->heap = xrealloc(m->heap, m->heap_cap * sizeof(*m->heap));
    }
    r->heap_idx = (int)m->heap_len;
    m->heap[m->heap_len++] = r;
    heap_up(m, (size_t)r->heap_idx);
    rearm(m);
}

static void on_timer(lws_sorted_usec_list_t *sul)
{
    struct sim_model *m = lws_container_of(sul, struct sim_model, sul);
    m->sul_armed = 0;
    int64_t now = mono_ms();
    /* Bounded per tick so a huge backlog cannot starve the network side of the loop. */
    for (int n = 0; n < 20000 && m->heap_len > 0 && m->heap[0]->due_ms <= now; n++) {
        struct sim_req *r = m->heap[0];
        heap_remove(m, r);
        sim_model_advance(m, r);
    }
    rearm(m);
}

/* ---- state changes ---------------------------------------------------------------------- */

static int is_status(const char *s, const char *want)
{
    return s != NULL && strcmp(s, want) == 0;
}

static struct sim_tx *add_tx(struct sim_req *r, int out, const char *hash, int64_t chain,
                             enum sim_tx_kind kind)
{
    int *n = out ? &r->nout : &r->nin;
    struct sim_tx **arr = out ? &r->out : &r->in;
    if (*n >= SIM_MAX_TXS)
        return NULL;
    *arr = xrealloc(*arr, (size_t)(*n + 1) * sizeof(**arr));
    struct sim_tx *t = &(*arr)[(*n)++];
    memset(t, 0, sizeof(*t));
    t->hash = xstrdup(hash);
    t->chain_id = chain;
    t->at_ms = wall_ms();
    t->block = sim_rand_block(&r->rng, chain);
    t->fee = 20000000000LL + (int64_t)sim_rng_below(&r->rng, 900000000000LL);
    t->kind = kind;
    return t;
}

static int has_out_kind(const struct sim_req *r, enum sim_tx_kind kind)
{
    for (int i = 0; i < r->nout; i++)
        if (r->out[i].kind == kind)
            return 1;
    return 0;
}

/* The tx hashes a status implies: the deposit is seen from depositing/pending on, the fill
 * appears with submitted, the refund with refund. */
static void implied_hashes(struct sim_req *r)
{
    const char *s = r->status;
    char h[160];
    int deposit_seen = is_status(s, "depositing") || is_status(s, "pending") ||
                       is_status(s, "delayed") || is_status(s, "submitted") ||
                       is_status(s, "success") || is_status(s, "refund") ||
                       is_status(s, "failure");
    if (deposit_seen && r->dep != NULL && r->dep->tx_hash == NULL) {
        sim_rand_hash(&r->rng, r->origin, h);
        r->dep->tx_hash = xstrdup(h);
        snprintf(r->dep->depositor, sizeof(r->dep->depositor), "%s", r->user);
    }
    if (deposit_seen && r->nin == 0) {
        sim_rand_hash(&r->rng, r->origin, h); /* for deposit addresses: the sweep */
        add_tx(r, 0, h, r->origin, SIM_TX_DEPOSIT);
    }
    if ((is_status(s, "submitted") || is_status(s, "success")) && !has_out_kind(r, SIM_TX_FILL)) {
        sim_rand_hash(&r->rng, r->dest, h);
        add_tx(r, 1, h, r->dest, SIM_TX_FILL);
    }
    if (is_status(s, "refund") && !has_out_kind(r, SIM_TX_REFUND)) {
        sim_rand_hash(&r->rng, r->origin, h);
        add_tx(r, 1, h, r->origin, SIM_TX_REFUND);
    }
}

static void hist_add(struct sim_req *r)
{
    if (r->nhist == 64) { /* keep the last 64 */
        memmove(r->hist, r->hist + 1, 63 * sizeof(*r->hist));
        r->nhist--;
    }
    if (r->nhist == r->hist_cap) {
        r->hist_cap = r->hist_cap ? r->hist_cap * 2 : 6;
        r->hist = xrealloc(r->hist, (size_t)r->hist_cap * sizeof(*r->hist));
    }
    r->hist[r->nhist].status = r->status;
    r->hist[r->nhist].updated_ms = r->updated_ms;
    r->nhist++;
}

/* The deposit's block was reorganised away: its inTx (the first deposit one, else the first
 * one) fails, and metadata.reorg records the block. Called once updated_ms is set. */
static void mark_reorg(struct sim_req *r)
{
    struct sim_tx *t = NULL;
    for (int i = 0; i < r->nin && t == NULL; i++)
        if (r->in[i].kind == SIM_TX_DEPOSIT)
            t = &r->in[i];
    if (t == NULL && r->nin > 0)
        t = &r->in[0];
    if (r->reorg == NULL)
        r->reorg = xcalloc(1, sizeof(*r->reorg));
    struct sim_reorg *g = r->reorg;
    if (t != NULL) {
        t->failed = 1;
        g->block = t->block;
    } else { /* no deposit seen (autoHashes off): a block of the origin chain */
        g->block = sim_rand_block(&r->rng, r->origin);
    }
    g->block_hash[0] = '0';
    g->block_hash[1] = 'x';
    sim_rand_hex(&r->rng, g->block_hash + 2, 64);
    g->detected_ms = r->updated_ms;
    g->fail_reason = r->kept_fail_reason ? r->kept_fail_reason : SIM_REORG_REASON;
}

/* Enter a status. fail/refund_fail: explicit reported values (NULL = the usual rules:
 * failReason is the remembered reason on failure/fallback/refund, else "N/A"). reorg: the
 * deposit is reorged by this change (the remembered reason becomes DEPOSIT_REORGED unless
 * fail names one). */
static void enter(struct sim_model *m, struct sim_req *r, const char *status, const char *fail,
                  const char *refund_fail, const char *details, int auto_hashes,
                  int64_t updated_at, int reorg)
{
    r->status = sim_model_intern(m, status);
    if (reorg)
        r->kept_fail_reason = SIM_REORG_REASON;
    if (fail != NULL && strcmp(fail, "N/A") != 0)
        r->kept_fail_reason = sim_model_intern(m, fail);
    if (refund_fail != NULL && strcmp(refund_fail, "N/A") != 0)
        r->kept_refund_reason = sim_model_intern(m, refund_fail);
    if (auto_hashes)
        implied_hashes(r);
    int failed = is_status(status, "failure") || is_status(status, "fallback") ||
                 is_status(status, "refund");
    if (fail != NULL)
        r->fail_reason = sim_model_intern(m, fail);
    else if (failed)
        r->fail_reason = r->kept_fail_reason ? r->kept_fail_reason : "UNKNOWN";
    else
        r->fail_reason = "N/A";
    if (refund_fail != NULL)
        r->refund_fail_reason = sim_model_intern(m, refund_fail);
    else
        r->refund_fail_reason = r->kept_refund_reason ? r->kept_refund_reason : "N/A";
    r->details = details != NULL ? sim_model_intern(m, details) : NULL;
    int64_t now = wall_ms();
    if (updated_at > 0)
        r->updated_ms = updated_at;
    else
        r->updated_ms = now > r->updated_ms ? now : r->updated_ms + 1;
    if (reorg)
        mark_reorg(r);
    hist_add(r);
    if (m->cb != NULL)
        m->cb(m->cb_arg, r);
}

static void set_terminal(struct sim_model *m, struct sim_req *r)
{
    if (!r->terminal) {
        r->terminal = 1;
        m->active--;
    }
}

/* After entering steps[pos]: schedule the next step, or mark the end of the path. */
static void plan_next(struct sim_model *m, struct sim_req *r)
{
    heap_remove(m, r);
    if (r->pos + 1 >= r->nsteps) {
        set_terminal(m, r);
        rearm(m);
        return;
    }
    int64_t d = r->steps[r->pos + 1].delay_ms;
    if (d >= 0)
        schedule(m, r, d);
    else
        rearm(m);
}

int sim_model_advance(struct sim_model *m, struct sim_req *r)
{
    if (r->pos + 1 >= r->nsteps)
        return -1;
    r->pos++;
    const struct sim_step *s = &r->steps[r->pos];
    /* Plan before calling out: the change callback must see a consistent request. */
    plan_next(m, r);
    enter(m, r, s->status, s->fail_reason, s->refund_fail_reason, s->details, r->auto_hashes,
          0, s->reorg);
    return 0;
}

void sim_model_set_status(struct sim_model *m, struct sim_req *r, const struct sim_set *set)
{
    for (int i = 0; i < set->nin; i++)
        add_tx(r, 0, set->in_hashes[i], r->origin, SIM_TX_DEPOSIT);
    for (int i = 0; i < set->nout; i++)
        add_tx(r, 1, set->out_hashes[i], r->dest, SIM_TX_OTHER);
    enter(m, r, set->status, set->fail_reason, set->refund_fail_reason,
          set->details_set ? set->details : NULL, r->auto_hashes && !set->no_auto_hashes,
          set->updated_at, set->reorg);
}

/* ---- creation --------------------------------------------------------------------------- */

static void evict(struct sim_model *m)
{
    if (m->retain <= 0 || (int64_t)m->count <= m->retain)
        return;
    struct sim_req *r = m->oldest;
    for (int i = 0; r != NULL && i < 64 && !r->terminal; i++)
        r = r->next;
    if (r == NULL || !r->terminal)
        return;
    heap_remove(m, r);
    sim_map_del(m->by_id, r->id);
    if (r->prev)
        r->prev->next = r->next;
    else
        m->oldest = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        m->newest = r->prev;
    m->count--;
    m->evicted++;
    req_free(r);
}

static int id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n >= SIM_ID_MAX)
        return 0;
    for (const char *p = id; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              *p == '_' || *p == ':' || *p == '.' || *p == '-'))
            return 0;
    return 1;
}

/* Why spec cannot make a request (a static string), or NULL; *ti is its named lifecycle's
 * template, -1 when it names none. */
static const char *spec_refusal(const struct sim_model *m, const struct sim_spec *spec, int *ti)
{
    *ti = -1;
    if (spec->lifecycle != NULL && (*ti = sim_tmpl_find(spec->lifecycle)) < 0)
        return "unknown lifecycle";
    if (spec->id != NULL) {
        if (!id_ok(spec->id))
            return "id must be 1..128 characters of [A-Za-z0-9_:.-]";
        if (sim_map_get(m->by_id, spec->id) != NULL)
            return "a request with this id exists";
    }
    if (spec->lifecycle == NULL && spec->nsteps == 0 && m->mix_total <= 0)
        return "no lifecycle";
    if (spec->nsteps > SIM_MAX_STEPS)
        return "path too long";
    return NULL;
}

/* A template drawn from the mix by weight (one draw from rng). */
static int pick_from_mix(const struct sim_model *m, uint64_t *rng)
{
    int ti;
    int64_t x = (int64_t)sim_rng_below(rng, (uint64_t)m->mix_total);
    for (ti = 0; ti < SIM_NTMPL; ti++) {
        x -= m->mix_weight[ti];
        if (x < 0)
            break;
    }
    return ti >= SIM_NTMPL ? 0 : ti;
}

/* Who and what of a new request: id, chains, user, recipient, referrer, amount, deposit
 * address; spec's values, else template ti's (-1: none), else random from r->rng. The draws
 * happen in this order, so one seed gives the same requests. */
static void fill_identity(struct sim_model *m, struct sim_req *r, const struct sim_spec *spec,
                          int ti)
{
    uint64_t *rng = &r->rng;
    if (spec->id != NULL) {
        snprintf(r->id, sizeof(r->id), "%s", spec->id);
    } else {
        r->id[0] = '0';
        r->id[1] = 'x';
        sim_rand_hex(rng, r->id + 2, 64);
        if (sim_map_get(m->by_id, r->id) != NULL) { /* same seed reused in one process */
            char suffix[9];
            sim_rand_hex(rng, suffix, 8);
            memcpy(r->id + 2, suffix, 8);
        }
    }
    int64_t t_origin = ti >= 0 ? sim_tmpl_origin(ti) : 0;
    /* a random origin is Bitcoin only for generated requests (load mode): a Bitcoin-origin
     * pending gets a /requests/v3 read that sets unconfirmedDeposit, one event more, so a
     * request made through the control API without originChainId keeps the plain path */
    r->origin = spec->origin    ? spec->origin
                : t_origin      ? t_origin
                : spec->generated ? sim_rand_chain(rng, 0)
                                  : sim_rand_chain(rng, SIM_BITCOIN_CHAIN);
    r->dest = spec->dest ? spec->dest : sim_rand_chain(rng, r->origin);
    sim_rand_address(rng, r->origin, r->user);
    if (spec->user != NULL)
        snprintf(r->user, sizeof(r->user), "%s", spec->user);
    if (sim_rng_below(rng, 4) == 0 && strcmp(sim_chain_vm(r->origin), sim_chain_vm(r->dest)) == 0)
        snprintf(r->recipient, sizeof(r->recipient), "%s", r->user);
    else
        sim_rand_address(rng, r->dest, r->recipient);
    r->referrer = spec->referrer ? sim_model_intern(m, spec->referrer)
                                 : referrers[sim_rng_below(rng, ARRAY_LEN(referrers))];
    r->amount_wei = 1000000000000000LL + (int64_t)sim_rng_below(rng, 4000000000000000000LL);
    r->auto_hashes = !spec->no_auto_hashes;

    int deposit = spec->deposit >= 0 ? spec->deposit : ti >= 0 ? sim_tmpl_deposit(ti) : 0;
    if (deposit) {
        r->dep = xcalloc(1, sizeof(*r->dep));
        sim_rand_address(rng, r->origin, r->dep->address);
        r->dep->type = spec->deposit_type ? sim_model_intern(m, spec->deposit_type)
                       : sim_rng_below(rng, 2)  ? "strict"
                                                : "open";
        snprintf(r->dep->recovery, sizeof(r->dep->recovery), "%s", r->user);
    }
}

/* The path: each step with its concrete delay, template ti's or spec's own steps. */
static void fill_path(struct sim_model *m, struct sim_req *r, const struct sim_spec *spec,
                      int ti)
{
    if (ti >= 0 && spec->nsteps == 0) {
        r->steps = sim_tmpl_path(ti, spec->step_ms, &r->rng, &r->nsteps);
        return;
    }
    r->nsteps = spec->nsteps;
    r->steps = xcalloc((size_t)r->nsteps, sizeof(*r->steps));
    for (int i = 0; i < spec->nsteps; i++) {
        const struct sim_step *in = &spec->steps[i];
        struct sim_step *s = &r->steps[i];
        s->status = sim_model_intern(m, in->status);
        s->fail_reason = sim_model_intern(m, in->fail_reason);
        s->refund_fail_reason = sim_model_intern(m, in->refund_fail_reason);
        s->details = sim_model_intern(m, in->details);
        s->reorg = in->reorg;
        s->delay_ms = in->delay_ms >= 0 ? in->delay_ms : spec->step_ms > 0 ? spec->step_ms : -1;
    }
}

/* Number and time the new request, take over counts made before it existed, and add it to
 * the id map and the newest end of the list. */
static void add_request(struct sim_model *m, struct sim_req *r)
{
    int64_t now = wall_ms();
    r->seq = ++m->seq;
    r->quote_created_ms = now - 2000 - (int64_t)sim_rng_below(&r->rng, 30000);
    r->created_ms = now;
    r->updated_ms = 0;
    struct early_counts *e = sim_map_del(m->early, r->id);
    if (e != NULL) { /* polled or subscribed before it existed */
        r->counts = e->c;
        free_early(NULL, NULL, e);
    }
    sim_map_put(m->by_id, r->id, r);
    r->prev = m->newest;
    if (m->newest)
        m->newest->next = r;
    else
        m->oldest = r;
    m->newest = r;
    m->count++;
    m->active++;
}

struct sim_req *sim_model_create(struct sim_model *m, const struct sim_spec *spec,
                                 const char **err)
{
    int ti;
    if ((*err = spec_refusal(m, spec, &ti)) != NULL)
        return NULL;

    evict(m); /* before, never after: the caller uses the request it gets back */
    struct sim_req *r = xcalloc(1, sizeof(*r));
    r->heap_idx = -1;
    r->rng = spec->generated ? sim_rand_stream(m->seed, FAM_GEN, m->gen_n++)
                             : sim_rand_stream(m->seed, FAM_CTL, m->ctl_n++);
    if (ti < 0 && spec->nsteps == 0)
        ti = pick_from_mix(m, &r->rng);
    r->lifecycle = ti >= 0 ? sim_tmpl_name(ti) : "scripted";
    fill_identity(m, r, spec, ti);
    fill_path(m, r, spec, ti);
    if (r->nsteps == 0) { /* unreachable: checked above; keep the invariant nsteps >= 1 */
        req_free(r);
        *err = "empty path";
        return NULL;
    }
    add_request(m, r);

    r->pos = 0;
    plan_next(m, r);
    const struct sim_step *s = &r->steps[0];
    enter(m, r, s->status, s->fail_reason, s->refund_fail_reason, s->details, r->auto_hashes, 0,
          s->reorg);
    return r;
}

void sim_model_backdate(struct sim_model *m, struct sim_req *r, int64_t by_ms)
{
    (void)m;
    r->created_ms -= by_ms;
    r->quote_created_ms -= by_ms;
    r->updated_ms -= by_ms;
    for (int i = 0; i < r->nhist; i++)
        r->hist[i].updated_ms -= by_ms;
    for (int i = 0; i < r->nin; i++)
        r->in[i].at_ms -= by_ms;
    for (int i = 0; i < r->nout; i++)
        r->out[i].at_ms -= by_ms;
    if (r->reorg != NULL)
        r->reorg->detected_ms -= by_ms;
}

struct sim_req *sim_model_find(const struct sim_model *m, const char *id)
{
    return sim_map_get(m->by_id, id);
}

struct sim_req *sim_model_oldest(const struct sim_model *m)
{
    return m->oldest;
}

struct sim_req *sim_model_newest(const struct sim_model *m)
{
    return m->newest;
}

size_t sim_model_count(const struct sim_model *m)
{
    return m->count;
}

size_t sim_model_active(const struct sim_model *m)
{
    return m->active;
}

uint64_t sim_model_evicted(const struct sim_model *m)
{
    return m->evicted;
}

void sim_model_count_call(struct sim_model *m, const char *id, enum sim_count_kind kind)
{
    if (id == NULL || *id == '\0')
        return;
    struct sim_counts *c;
    struct sim_req *r = sim_map_get(m->by_id, id);
    if (r != NULL) {
        c = &r->counts;
    } else {
        struct early_counts *e = sim_map_get(m->early, id);
        if (e == NULL) {
            if (sim_map_count(m->early) >= SIM_MAX_EARLY_COUNTS || strlen(id) >= SIM_ID_MAX)
                return;
            e = xcalloc(1, sizeof(*e));
            e->id = xstrdup(id);
            sim_map_put(m->early, e->id, e);
        }
        c = &e->c;
    }
    switch (kind) {
    case SIM_COUNT_STATUS_POLL:
        c->status_polls++;
        break;
    case SIM_COUNT_REQUESTS_READ:
        c->requests_reads++;
        break;
    case SIM_COUNT_SUBSCRIBE:
        c->subscribes++;
        break;
    }
}

void sim_model_reset_counts(struct sim_model *m)
{
    for (struct sim_req *r = m->oldest; r != NULL; r = r->next)
        memset(&r->counts, 0, sizeof(r->counts));
    sim_map_each(m->early, free_early, NULL);
    sim_map_free(m->early);
    m->early = sim_map_new();
}

void sim_model_socket_id(struct sim_model *m, char *out)
{
    static const char b36[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    uint64_t rng = sim_rand_stream(m->seed, FAM_SOCK, m->sock_n++);
    for (int i = 0; i < 11; i++)
        out[i] = b36[sim_rng_below(&rng, 36)];
    out[11] = '\0';
}
