/* table.c - see table.h: the sessions of the dashboard hub and their subscriptions.
 * runs on: core thread. */
#include "relay/dash/table.h"
#include "relay/common/idmap.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/dash/frames.h"
#include "relay/dash/limits.h"
#include "relay/edge/dash_filter.h"
#include "relay/ingest/anon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dash_table_init(struct hub *h)
{
    h->tab_size = 64;
    h->tab = xcalloc(h->tab_size, sizeof(*h->tab));
    h->live_ids = idmap_new();
    h->sess_ids = idmap_new();
}

void dash_table_cleanup(struct hub *h)
{
    idmap_free(h->live_ids);
    idmap_free(h->sess_ids);
    free(h->waiters);
    free(h->holds);
    free(h->tab);
}

/* ---- sessions -------------------------------------------------------------------------- */

static size_t slot(const struct hub *h, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 32) & (h->tab_size - 1);
}

struct hsess *dash_sess_find(const struct hub *h, uint64_t id)
{
    for (struct hsess *x = h->tab[slot(h, id)]; x != NULL; x = x->hnext)
        if (x->id == id)
            return x;
    return NULL;
}

static void sess_insert(struct hub *h, struct hsess *x)
{
    if (h->count + 1 > h->tab_size) {
        size_t old_size = h->tab_size;
        struct hsess **old = h->tab;
        h->tab_size *= 2;
        h->tab = xcalloc(h->tab_size, sizeof(*h->tab));
        for (size_t i = 0; i < old_size; i++)
            for (struct hsess *y = old[i], *next; y != NULL; y = next) {
                next = y->hnext;
                size_t k = slot(h, y->id);
                y->hnext = h->tab[k];
                h->tab[k] = y;
            }
        free(old);
    }
    size_t k = slot(h, x->id);
    x->hnext = h->tab[k];
    h->tab[k] = x;
    h->count++;
}

struct hsess *dash_sess_add(struct hub *h, uint64_t id, const char *addr)
{
    struct hsess *x = xcalloc(1, sizeof(*x));
    x->id = id;
    snprintf(x->addr, sizeof(x->addr), "%s", addr);
    sess_insert(h, x);
    return x;
}

void dash_sess_remove(struct hub *h, struct hsess *x)
{
    while (x->subs != NULL)
        dash_sub_remove(h, x, x->subs, 0);
    for (struct hsess **pp = &h->tab[slot(h, x->id)]; *pp != NULL; pp = &(*pp)->hnext)
        if (*pp == x) {
            *pp = x->hnext;
            h->count--;
            break;
        }
    free(x);
}

void dash_sess_remove_all(struct hub *h)
{
    for (size_t i = 0; i < h->tab_size; i++)
        for (struct hsess *x = h->tab[i], *next; x != NULL; x = next) {
            next = x->hnext;
            while (x->subs != NULL)
                dash_sub_remove(h, x, x->subs, 0);
            free(x);
        }
    memset(h->tab, 0, h->tab_size * sizeof(*h->tab));
    h->count = 0;
}

/* ---- subscriptions ---------------------------------------------------------------------- */

static void sess_key(char *buf, size_t n, uint64_t sess, const char *id)
{
    snprintf(buf, n, "%llu|%s", (unsigned long long)sess, id);
}

struct hsub *dash_sub_find(const struct hsess *x, uint32_t no)
{
    for (struct hsub *u = x->subs; u != NULL; u = u->next)
        if (u->no == no)
            return u;
    return NULL;
}

struct hsub *dash_sub_of_id(const struct hub *h, const struct hsess *x, const char *id)
{
    char k[PROTO_MAX_ID + 32];
    uint32_t no = 0;
    sess_key(k, sizeof(k), x->id, id);
    return idmap_get(h->sess_ids, k, &no) ? dash_sub_find(x, no) : NULL;
}

struct hsub *dash_sub_new(struct hub *h, struct hsess *x, enum sub_kind kind, const char *id,
                          int anon, int counted)
{
    struct hsub *u = xcalloc(1, sizeof(*u));
    u->no = ++x->next_no;
    u->kind = kind;
    u->state = SS_REPLAY;
    u->next = x->subs;
    x->subs = u;
    if (kind != SUB_STATS) {
        x->nsubs++;
    } else {
        x->stats++;
        h->nstats++;
    }
    if (kind == SUB_ID) {
        char k[PROTO_MAX_ID + 32];
        u->anon = anon;
        u->counted = counted;
        if (anon)
            anon_hold(h->c->anon, id);
        u->id = xstrdup(id);
        sess_key(k, sizeof(k), x->id, id);
        idmap_put(h->sess_ids, k, u->no);
    }
    return u;
}

/* u leaves the live indexes (and the ws thread's filters when notify). */
static void leave_live(struct hub *h, struct hsess *x, struct hsub *u, int notify)
{
    if (u->kind == SUB_ID) {
        uint32_t n = 0;
        idmap_get(h->live_ids, u->id, &n);
        if (n <= 1)
            idmap_del(h->live_ids, u->id);
        else
            idmap_put(h->live_ids, u->id, n - 1);
        if (notify)
            dash_filter_op(h, x->id, DASH_OP_DEL_ID, u->id, 0, NULL);
    } else if (u->kind == SUB_BROAD) {
        h->broad_live--;
        if (notify)
            dash_filter_op(h, x->id, DASH_OP_DEL_BROAD, NULL, u->no, NULL);
    }
}

void dash_sub_remove(struct hub *h, struct hsess *x, struct hsub *u, int notify)
{
    for (struct hsub **pp = &x->subs; *pp != NULL; pp = &(*pp)->next)
        if (*pp == u) {
            *pp = u->next;
            break;
        }
    if (u->kind == SUB_ID) {
        char k[PROTO_MAX_ID + 32];
        sess_key(k, sizeof(k), x->id, u->id);
        idmap_del(h->sess_ids, k);
        x->nsubs--;
        if (u->anon)
            anon_release(h->c->anon, u->id);
        if (u->counted)
            anon_addr_put(h->c->anon, x->addr);
    } else if (u->kind == SUB_BROAD) {
        x->nsubs--;
    } else {
        x->stats--;
        h->nstats--;
    }
    if (u->state == SS_WAIT)
        dash_waiter_del(h, x->id, u->no);
    if (u->state == SS_HOLD)
        dash_hold_del(h, x->id, u->no);
    if (u->state == SS_LIVE)
        leave_live(h, x, u, notify);
    free(u->id);
    free(u->from);
    free(u->cursor);
    free(u->live_at);
    dash_broad_cleanup(&u->f);
    free(u);
}

void dash_sub_go_live(struct hub *h, struct hsess *x, struct hsub *u)
{
    u->state = SS_LIVE;
    dash_str_set(&u->live_at, h->cursor);
    if (u->kind == SUB_ID) {
        uint32_t n = 0;
        idmap_get(h->live_ids, u->id, &n);
        idmap_put(h->live_ids, u->id, n + 1);
        dash_filter_op(h, x->id, DASH_OP_ADD_ID, u->id, 0, NULL);
    } else if (u->kind == SUB_BROAD) {
        h->broad_live++;
        json_t *j = dash_broad_to_json(&u->f);
        char *t = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        dash_filter_op(h, x->id, DASH_OP_ADD_BROAD, NULL, u->no, t);
        free(t);
    }
}

/* ---- waiters ------------------------------------------------------------------------------ */

void dash_waiter_add(struct hub *h, struct hsess *x, struct hsub *u)
{
    u->state = SS_WAIT;
    h->waiters = xrealloc(h->waiters, (h->nwaiters + 1) * sizeof(*h->waiters));
    struct waiter *w = &h->waiters[h->nwaiters++];
    w->sess = x->id;
    w->no = u->no;
    w->missed = 0;
}

void dash_waiter_del(struct hub *h, uint64_t sess, uint32_t no)
{
    for (size_t i = 0; i < h->nwaiters; i++)
        if (h->waiters[i].sess == sess && h->waiters[i].no == no) {
            h->waiters[i] = h->waiters[--h->nwaiters];
            return;
        }
}

/* ---- holders ------------------------------------------------------------------------------ */

struct holder *dash_hold_add(struct hub *h, struct hsess *x, struct hsub *u, int limit,
                             uint64_t need, int64_t deadline_ms)
{
    if (h->nholds >= HUB_HOLD_MAX)
        return NULL;
    if (h->holds == NULL)
        h->holds = xcalloc(HUB_HOLD_MAX, sizeof(*h->holds)); /* fixed: HUB_HOLD_MAX */
    u->state = SS_HOLD;
    struct holder *w = &h->holds[h->nholds++];
    w->sess = x->id;
    w->no = u->no;
    w->limit = limit;
    w->need = need;
    w->deadline_ms = deadline_ms;
    return w;
}

void dash_hold_del_at(struct hub *h, size_t i)
{
    h->holds[i] = h->holds[--h->nholds];
}

void dash_hold_del(struct hub *h, uint64_t sess, uint32_t no)
{
    for (size_t i = 0; i < h->nholds; i++)
        if (h->holds[i].sess == sess && h->holds[i].no == no) {
            dash_hold_del_at(h, i);
            return;
        }
}
