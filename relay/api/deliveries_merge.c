/* deliveries_merge.c - see deliveries_merge.h. runs on: core thread. */
#include "relay/api/deliveries_merge.h"
#include "relay/common/util.h"
#include "store/keys.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *hfield(const redisReply *h, const char *k)
{
    for (size_t i = 0; i + 1 < h->elements; i += 2)
        if (h->element[i]->str && strcmp(h->element[i]->str, k) == 0)
            return h->element[i + 1]->str;
    return NULL;
}

struct dl_merge {
    long *offsets; /* the caller's: in, then out */
    int limit;
    dlm_json_fn *to_json;
    dlm_done_cb *cb;
    void *arg;
    unsigned np, pending;
    int failed;
    long *next;  /* per partition: the script's next offset (-1: nothing more) */
    size_t n, cap;
    struct dl_item {
        long long ct;
        char id[160];
        unsigned part;
        long off;
        json_t *obj;
    } *e;
};

static int dm_cmp(const void *a, const void *b)
{
    const struct dl_item *x = a, *y = b;
    if (x->ct != y->ct)
        return x->ct > y->ct ? -1 : 1;
    return -strcmp(x->id, y->id);
}

static void dm_done(struct dl_merge *m)
{
    if (--m->pending > 0)
        return;
    if (m->failed) {
        m->cb(m->arg, NULL);
    } else {
        if (m->n > 1)
            qsort(m->e, m->n, sizeof(*m->e), dm_cmp);
        size_t take = m->n < (size_t)m->limit ? m->n : (size_t)m->limit;
        json_t *arr = json_array();
        size_t *taken = xcalloc(m->np, sizeof(*taken)), *got = xcalloc(m->np, sizeof(*got));
        for (size_t i = 0; i < m->n; i++)
            got[m->e[i].part]++;
        for (size_t i = 0; i < take; i++) {
            json_array_append(arr, m->e[i].obj);
            m->offsets[m->e[i].part] = m->e[i].off;
            taken[m->e[i].part]++;
        }
        int more = 0; /* a partition with entries not shown, or not scanned to its end */
        for (unsigned p = 0; p < m->np; p++) {
            if (taken[p] < got[p])
                more = 1;
            else if (m->next[p] >= 0) /* all shown, more to scan from the script's offset */
                more = 1, m->offsets[p] = m->next[p];
        }
        free(taken);
        free(got);
        json_t *o = json_object();
        json_object_set_new(o, "deliveries", arr);
        if (more) {
            size_t cap = (size_t)m->np * 24 + 1, len = 0;
            char *s = xmalloc(cap);
            s[0] = '\0';
            for (unsigned p = 0; p < m->np; p++)
                len += (size_t)snprintf(s + len, cap - len, "%s%ld", p ? "," : "",
                                        m->offsets[p]);
            json_object_set_new(o, "cursor", json_string(s));
            free(s);
        } else {
            json_object_set_new(o, "cursor", json_null());
        }
        m->cb(m->arg, o);
    }
    for (size_t i = 0; i < m->n; i++)
        json_decref(m->e[i].obj);
    free(m->e);
    free(m->next);
    free(m);
}

struct dm_read {
    struct dl_merge *m;
    unsigned part;
};

static void on_dm_list(void *arg, const char *err, redisReply *r)
{
    struct dm_read *rd = arg;
    struct dl_merge *m = rd->m;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1) {
        m->failed = 1;
    } else {
        m->next[rd->part] = (long)r->element[0]->integer;
        for (size_t i = 1; i < r->elements; i++) {
            const redisReply *h = r->element[i];
            if (h->type != REDIS_REPLY_ARRAY)
                continue;
            if (m->n == m->cap) {
                m->cap = m->cap ? 2 * m->cap : 64;
                m->e = xrealloc(m->e, m->cap * sizeof(*m->e));
            }
            struct dl_item *it = &m->e[m->n++];
            const char *s;
            it->ct = (s = hfield(h, "ct")) ? strtoll(s, NULL, 10) : 0;
            snprintf(it->id, sizeof(it->id), "%s", (s = hfield(h, "id")) ? s : "");
            it->part = rd->part;
            it->off = (s = hfield(h, "off")) ? strtol(s, NULL, 10) : 0;
            it->obj = m->to_json(h);
        }
    }
    free(rd);
    dm_done(m);
}

void dlm_start(struct store *s, const struct store_script *list_sc, const char *whid,
               const char *state, long *offsets, int limit, dlm_json_fn *to_json,
               dlm_done_cb *cb, void *arg)
{
    struct dl_merge *m = xcalloc(1, sizeof(*m));
    *m = (struct dl_merge){.offsets = offsets, .limit = limit, .to_json = to_json, .cb = cb,
                           .arg = arg, .np = store_partitions(s)};
    m->next = xcalloc(m->np, sizeof(*m->next));
    m->pending = 1; /* this loop's own share */
    char k[KEY_MAX], off[24], lim[24];
    snprintf(lim, sizeof(lim), "%d", limit);
    for (unsigned p = 0; p < m->np; p++) {
        const char *tag = store_part_tag(s, p);
        key_build(k, sizeof(k), tag, "dls", whid, NULL);
        snprintf(off, sizeof(off), "%ld", offsets[p]);
        const char *argv[] = {k, tag, state, off, lim};
        struct dm_read *rd = xcalloc(1, sizeof(*rd));
        rd->m = m;
        rd->part = p;
        m->pending++;
        if (store_eval(s, list_sc, on_dm_list, rd, 1, 5, argv, NULL) != 0) {
            m->pending--;
            m->failed = 1;
            free(rd);
        }
    }
    dm_done(m);
}
