/* delivery_log.c - see delivery_log.h: the endpoint's delivery listing through store_gather
 * (wh_list.lua per partition), the records copied out of the replies, merged and cut here.
 * The script is registered on first use (file-scope, one per process).
 * runs on: core thread. */
#include "store/delivery_log.h"
#include "relay/common/util.h"
#include "store/gather.h"
#include "store/keys.h"
#include "store/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct store_script list_sc;

/* The record fields wh_list.lua returns (besides the attempts a1..a<nlog>). */
enum { F_ID, F_EV, F_WH, F_RID, F_SEQ, F_ST, F_STATE, F_NEXT, F_CT, F_ET, F_DONE, F_RP,
       F_NLOG, F_OFF, F_N };
static const char *const field_names[F_N] = {"id", "ev",   "wh", "rid",  "seq",  "st", "state",
                                             "next", "ct", "et", "done", "rp", "nlog", "off"};

struct store_dl_cursor {
    unsigned np;
    long off[KEY_MAX_PARTITIONS];
};

struct store_dl_cursor *store_dl_cursor_parse(const struct store *s, const char *text)
{
    struct store_dl_cursor *c = xcalloc(1, sizeof(*c));
    c->np = store_partitions(s);
    const char *p = text != NULL && text[0] != '\0' ? text : NULL;
    for (unsigned k = 0; p != NULL && k < c->np; k++) {
        char *end;
        c->off[k] = strtol(p, &end, 10);
        int last = k + 1 == c->np;
        if (p[0] < '0' || p[0] > '9' || c->off[k] < 0 || (last ? *end != '\0' : *end != ',')) {
            free(c);
            return NULL;
        }
        p = end + 1;
    }
    return c;
}

void store_dl_cursor_free(struct store_dl_cursor *c)
{
    free(c);
}

/* One listed record, copied out of its reply. */
struct item {
    long long ct;
    unsigned part;
    long off;           /* the offset just after it in its partition's list */
    char *f[F_N];       /* owned, NULL when absent */
    char **att;         /* owned: natt attempt texts */
    size_t natt;
};

struct dl_page {
    store_dl_page_cb *cb;
    void *arg;
    int limit;
    struct store_dl_cursor pos; /* the offsets asked from, then the next page's */
    long next[KEY_MAX_PARTITIONS]; /* per partition: the script's next offset (-1: no more) */
    size_t n, cap;
    struct item *e;
};

/* The value of field k in a flat {field, value, ...} array: the first one, NULL if none. */
static const char *hfield(const redisReply *h, const char *k)
{
    for (size_t i = 0; i + 1 < h->elements; i += 2)
        if (h->element[i]->str && strcmp(h->element[i]->str, k) == 0)
            return h->element[i + 1]->str;
    return NULL;
}

static void item_fill(struct item *it, const redisReply *h, unsigned part)
{
    memset(it, 0, sizeof(*it));
    it->part = part;
    for (int f = 0; f < F_N; f++) {
        const char *v = hfield(h, field_names[f]);
        it->f[f] = v != NULL ? xstrdup(v) : NULL;
    }
    it->ct = it->f[F_CT] != NULL ? strtoll(it->f[F_CT], NULL, 10) : 0;
    it->off = it->f[F_OFF] != NULL ? strtol(it->f[F_OFF], NULL, 10) : 0;
    long n = it->f[F_NLOG] != NULL ? strtol(it->f[F_NLOG], NULL, 10) : 0;
    if (n > (long)(h->elements / 2)) /* no more attempts than fields */
        n = (long)(h->elements / 2);
    it->att = n > 0 ? xcalloc((size_t)n, sizeof(*it->att)) : NULL;
    for (long i = 1; i <= n; i++) {
        char k[24];
        snprintf(k, sizeof(k), "a%ld", i);
        const char *t = hfield(h, k);
        if (t != NULL)
            it->att[it->natt++] = xstrdup(t);
    }
}

static void item_clean(struct item *it)
{
    for (int f = 0; f < F_N; f++)
        free(it->f[f]);
    for (size_t i = 0; i < it->natt; i++)
        free(it->att[i]);
    free(it->att);
}

/* wh_list.lua: {next offset or -1, {field, value, ...}, ...}. */
static int on_list_part(void *arg, unsigned p, const char *err, redisReply *r)
{
    struct dl_page *pg = arg;
    if (err != NULL)
        return 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
        return -1;
    pg->next[p] = (long)r->element[0]->integer;
    for (size_t i = 1; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_ARRAY)
            continue;
        if (pg->n == pg->cap) {
            pg->cap = pg->cap ? 2 * pg->cap : 64;
            pg->e = xrealloc(pg->e, pg->cap * sizeof(*pg->e));
        }
        item_fill(&pg->e[pg->n++], r->element[i], p);
    }
    return 0;
}

/* Newest first: creation time, then id. */
static int item_cmp(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    if (x->ct != y->ct)
        return x->ct > y->ct ? -1 : 1;
    return -strcmp(x->f[F_ID] ? x->f[F_ID] : "", y->f[F_ID] ? y->f[F_ID] : "");
}

/* The offsets after the first take entries into pg->pos; 1 when anything is left (a
 * partition with entries not shown, or not scanned to its end). */
static int advance(struct dl_page *pg, size_t take)
{
    size_t taken[KEY_MAX_PARTITIONS] = {0}, got[KEY_MAX_PARTITIONS] = {0};
    for (size_t i = 0; i < pg->n; i++)
        got[pg->e[i].part]++;
    for (size_t i = 0; i < take; i++) {
        pg->pos.off[pg->e[i].part] = pg->e[i].off;
        taken[pg->e[i].part]++;
    }
    int more = 0;
    for (unsigned p = 0; p < pg->pos.np; p++) {
        if (taken[p] < got[p])
            more = 1;
        else if (pg->next[p] >= 0) /* all shown, more to scan from the script's offset */
            more = 1, pg->pos.off[p] = pg->next[p];
    }
    return more;
}

static struct store_dl_listed listed(const struct item *it)
{
    return (struct store_dl_listed){
        .id = it->f[F_ID], .event_id = it->f[F_EV], .webhook_id = it->f[F_WH],
        .request_id = it->f[F_RID], .seq = it->f[F_SEQ], .status = it->f[F_ST],
        .state = it->f[F_STATE], .next = it->f[F_NEXT], .created = it->f[F_CT],
        .event_created = it->f[F_ET], .done = it->f[F_DONE], .replay = it->f[F_RP],
        .attempts = (const char *const *)it->att, .nattempts = it->natt};
}

static void on_listed(void *arg, const char *err)
{
    struct dl_page *pg = arg;
    if (err != NULL) {
        pg->cb(pg->arg, err, NULL, 0, NULL);
    } else {
        if (pg->n > 1)
            qsort(pg->e, pg->n, sizeof(*pg->e), item_cmp);
        size_t take = pg->n < (size_t)pg->limit ? pg->n : (size_t)pg->limit;
        char cur[KEY_MAX_PARTITIONS * 24 + 1];
        size_t len = 0;
        cur[0] = '\0';
        if (advance(pg, take))
            for (unsigned p = 0; p < pg->pos.np; p++)
                len += (size_t)snprintf(cur + len, sizeof(cur) - len, "%s%ld", p ? "," : "",
                                        pg->pos.off[p]);
        struct store_dl_listed *out = xcalloc(take + 1, sizeof(*out));
        for (size_t i = 0; i < take; i++)
            out[i] = listed(&pg->e[i]);
        pg->cb(pg->arg, NULL, out, take, len > 0 ? cur : NULL);
        free(out);
    }
    for (size_t i = 0; i < pg->n; i++)
        item_clean(&pg->e[i]);
    free(pg->e);
    free(pg);
}

void store_dl_list(struct store *s, const char *whid, const char *state,
                   const struct store_dl_cursor *from, int limit, store_dl_page_cb *cb,
                   void *arg)
{
    if (list_sc.name == NULL)
        store_script_init(&list_sc, "wh_list");
    struct dl_page *pg = xcalloc(1, sizeof(*pg));
    pg->cb = cb;
    pg->arg = arg;
    pg->limit = limit > 0 ? limit : 1;
    pg->pos = *from;
    struct store_gather *g = store_gather_new(s, on_list_part, on_listed, pg);
    char k[KEY_MAX], off[24], lim[24];
    snprintf(lim, sizeof(lim), "%d", pg->limit);
    for (unsigned p = 0; p < pg->pos.np; p++) {
        const char *tag = store_part_tag(s, p);
        key_build(k, sizeof(k), tag, "dls", whid, NULL);
        snprintf(off, sizeof(off), "%ld", pg->pos.off[p]);
        const char *argv[] = {k, tag, state, off, lim};
        store_gather_eval(g, p, &list_sc, 1, 5, argv, NULL);
    }
    store_gather_end(g);
}
