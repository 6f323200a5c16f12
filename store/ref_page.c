/* ref_page.c - see ref_page.h. runs on: core thread. */
#include "store/ref_page.h"
#include "relay/common/util.h"
#include "store/command.h"

#include <stdlib.h>
#include <string.h>

struct ref_page {
    store_req_page_cb *cb;
    void *arg;
    int limit;
    size_t n, cap;
    struct page_ent {
        char *id, *score; /* owned */
        long long sc;
    } *e;
};

/* One partition's answer (requests_page.lua, search_page.lua): {id, score, id, score, ...}. */
int ref_page_part(void *arg, unsigned i, const char *err, redisReply *r)
{
    struct ref_page *pg = arg;
    if (err != NULL)
        return 0;
    if (r->type != REDIS_REPLY_ARRAY)
        return -1;
    for (size_t k = 0; k + 1 < r->elements; k += 2) {
        const redisReply *id = r->element[k], *sc = r->element[k + 1];
        if (id->type != REDIS_REPLY_STRING || sc->type != REDIS_REPLY_STRING)
            continue;
        if (pg->n == pg->cap) {
            pg->cap = pg->cap ? 2 * pg->cap : 64;
            pg->e = xrealloc(pg->e, pg->cap * sizeof(*pg->e));
        }
        pg->e[pg->n++] = (struct page_ent){xstrndup(id->str, id->len),
                                           xstrndup(sc->str, sc->len),
                                           strtoll(sc->str, NULL, 10)};
    }
    return 0;
}

/* The order of one zset, which is the order across partitions too: score, then id bytes. */
static int page_cmp(const void *a, const void *b)
{
    const struct page_ent *x = a, *y = b;
    if (x->sc != y->sc)
        return x->sc < y->sc ? -1 : 1;
    return strcmp(x->id, y->id);
}

void ref_page_done(void *arg, const char *err)
{
    struct ref_page *pg = arg;
    size_t take = 0;
    int more = 0;
    struct store_req_ref *refs = NULL;
    if (err == NULL) {
        if (pg->n > 1)
            qsort(pg->e, pg->n, sizeof(*pg->e), page_cmp);
        more = pg->n > (size_t)pg->limit;
        take = more ? (size_t)pg->limit : pg->n;
        refs = xcalloc(take + 1, sizeof(*refs));
        for (size_t i = 0; i < take; i++)
            refs[i] = (struct store_req_ref){pg->e[i].id, pg->e[i].score};
    }
    pg->cb(pg->arg, err, refs, take, more);
    free(refs);
    for (size_t i = 0; i < pg->n; i++) {
        free(pg->e[i].id);
        free(pg->e[i].score);
    }
    free(pg->e);
    free(pg);
}

struct ref_page *ref_page_new(int limit, store_req_page_cb *cb, void *arg)
{
    struct ref_page *pg = xcalloc(1, sizeof(*pg));
    *pg = (struct ref_page){.cb = cb, .arg = arg, .limit = limit > 0 ? limit : 1};
    return pg;
}

int ref_page_limit(const struct ref_page *pg)
{
    return pg->limit;
}
