/* endpoints.c - see endpoints.h. runs on: core thread.
 *
 * Ownership: the set (struct webhooks) owns the sorted endpoint array (one reference per
 * endpoint); each reload sets new values into the surviving structs in place, except for
 * an endpoint whose stored hash is byte-identical to the one its values were built from
 * (webhook_values_same): that one keeps its parsed values untouched. Redis replies are
 * copied out in their callbacks. */
#include "relay/delivery/endpoints.h"
#include "protocol/addr.h"
#include "relay/core.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "store/deliveries.h"
#include "store/store.h"

#include <event2/dns.h>
#include <event2/util.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reload_waiter {
    webhooks_done_cb *cb;
    void *arg;
    struct reload_waiter *next;
};

struct webhooks {
    struct core *c;
    int closing;
    int pending; /* store commands in flight with w as arg (w outlives them) */
    struct webhook **v; /* sorted by id; one reference each */
    size_t n;
    char version[24];
    char *view; /* the endpoint view of this set (wh_view.c), NULL until built; a load drops it */
    int loading, again;
    struct reload_waiter *waiting, *running; /* for the next load / the one in flight */
    struct evdns_base *dns;
};

static void service_free(struct webhooks *w);

/* ---- the endpoint set ------------------------------------------------------------------ */

static int cmp_id(const void *a, const void *b)
{
    const struct webhook *x = *(struct webhook *const *)a, *y = *(struct webhook *const *)b;
    return strcmp(x->id, y->id);
}

struct webhook *webhooks_find(struct webhooks *w, const char *id)
{
    size_t lo = 0, hi = w->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = strcmp(w->v[mid]->id, id);
        if (r == 0)
            return w->v[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t webhooks_count(const struct webhooks *w)
{
    return w->n;
}

struct webhook *webhooks_at(struct webhooks *w, size_t i)
{
    return i < w->n ? w->v[i] : NULL;
}

const char *webhooks_version(const struct webhooks *w)
{
    return w->version;
}

const char *webhooks_view(const struct webhooks *w)
{
    return w->view;
}

void webhooks_view_keep(struct webhooks *w, char *view)
{
    free(w->view);
    w->view = view;
}

struct webhooks *webhooks_of(struct core *c)
{
    return c->webhooks;
}

static void load_start(struct webhooks *w);

static void on_load(void *arg, const char *err, const char *msg,
                    const struct dl_endpoints_res *res)
{
    struct webhooks *w = arg;
    struct reload_waiter *done = w->running;
    w->running = NULL;
    w->loading = 0;
    w->pending--;
    if (w->closing) {
        while (done) {
            struct reload_waiter *next = done->next;
            if (done->cb)
                done->cb(done->arg, store_err_disconnected);
            free(done);
            done = next;
        }
        if (w->pending == 0)
            service_free(w);
        return;
    }
    if (err == NULL) {
        snprintf(w->version, sizeof(w->version), "%s", res->version);
        size_t n = res->n;
        struct webhook **nv = xcalloc(n + 1, sizeof(*nv));
        size_t k = 0, reused = 0;
        for (size_t i = 0; i < n; i++) {
            const struct dl_endpoint_row *row = &res->v[i];
            struct webhook *wh = webhooks_find(w, row->id);
            if (wh) {
                webhook_ref(wh);
                if (webhook_values_same(wh, row->kv, row->nkv))
                    reused++; /* unchanged: keep its parsed filters, headers, keys */
                else {
                    webhook_values_clear(wh);
                    webhook_values_set(wh, row->kv, row->nkv);
                }
            } else {
                wh = webhook_new(row->id);
                webhook_values_set(wh, row->kv, row->nkv);
            }
            nv[k++] = wh;
        }
        qsort(nv, k, sizeof(*nv), cmp_id);
        /* drop the old set's references; endpoints not in the new set are deleted */
        for (size_t i = 0; i < w->n; i++) {
            struct webhook *old = w->v[i];
            if (old->refs == 1)
                old->deleted = 1;
            else {
                int found = 0;
                for (size_t j = 0; j < k && !found; j++)
                    found = nv[j] == old;
                old->deleted = !found;
            }
            webhook_unref(old);
        }
        free(w->v);
        w->v = nv;
        w->n = k;
        free(w->view);
        w->view = NULL;
        log_debug("webhook endpoints reloaded", "version=%s endpoints=%zu parsed=%zu kept=%zu",
                  w->version, k, k - reused, reused);
    } else if (err == dl_err_reply) {
        err = store_err_server;
    }
    if (err)
        log_warn("webhook endpoints reload failed", "err=%s", err);
    while (done) {
        struct reload_waiter *next = done->next;
        if (done->cb)
            done->cb(done->arg, err);
        free(done);
        done = next;
    }
    if (w->again && !w->closing)
        load_start(w);
}

static void load_start(struct webhooks *w)
{
    w->again = 0;
    w->running = w->waiting;
    w->waiting = NULL;
    w->loading = 1;
    w->pending++;
    if (dl_endpoints_load(w->c->store, on_load, w) != 0) {
        w->pending--;
        w->loading = 0;
        struct reload_waiter *done = w->running;
        w->running = NULL;
        while (done) {
            struct reload_waiter *next = done->next;
            if (done->cb)
                done->cb(done->arg, store_err_disconnected);
            free(done);
            done = next;
        }
    }
}

void webhooks_reload(struct webhooks *w, webhooks_done_cb *cb, void *arg)
{
    if (cb) {
        struct reload_waiter *rw = xcalloc(1, sizeof(*rw));
        rw->cb = cb;
        rw->arg = arg;
        rw->next = w->waiting;
        w->waiting = rw;
    }
    if (w->closing) {
        if (cb) {
            struct reload_waiter *rw = w->waiting;
            w->waiting = rw->next;
            free(rw);
            cb(arg, store_err_disconnected);
        }
        return;
    }
    if (w->loading) {
        w->again = 1;
        return;
    }
    load_start(w);
}

struct dns_req {
    webhooks_dns_cb *cb;
    void *arg;
    char host[PROTO_HOST_MAX + 1];
};

static void on_dns(int result, struct evutil_addrinfo *res, void *arg)
{
    struct dns_req *q = arg;
    const char *code = NULL;
    char msg[160] = "";
    for (struct evutil_addrinfo *ai = res; ai && code == NULL; ai = ai->ai_next) {
        int why = proto_addr_forbidden(ai->ai_addr, (socklen_t)ai->ai_addrlen);
        if (why) {
            code = "forbidden_target";
            snprintf(msg, sizeof(msg), "url host %.100s resolves to a %s address", q->host,
                     proto_addr_reason(why));
        }
    }
    if (res)
        evutil_freeaddrinfo(res);
    /* A name that does not resolve now is accepted: every connection is checked anyway. */
    q->cb(q->arg, code, msg);
    free(q);
}

void webhooks_check_host(struct webhooks *w, const char *host, webhooks_dns_cb *cb, void *arg)
{
    struct dns_req *q = xcalloc(1, sizeof(*q));
    q->cb = cb;
    q->arg = arg;
    snprintf(q->host, sizeof(q->host), "%s", host);
    if (w->dns == NULL) {
        w->dns = evdns_base_new(w->c->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                                EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (w->dns == NULL) /* no resolv.conf: hosts file only */
            w->dns = evdns_base_new(w->c->base, 0);
        if (w->dns)
            evdns_base_load_hosts(w->dns, NULL);
    }
    struct evutil_addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    if (w->dns == NULL) {
        cb(arg, NULL, "");
        free(q);
        return;
    }
    evdns_getaddrinfo(w->dns, host, NULL, &hints, on_dns, q); /* may call on_dns now */
}

/* ---- CRUD ------------------------------------------------------------------------------ */

struct put_op {
    struct webhooks *w;
    webhooks_put_cb *cb;
    void *arg;
    int found;
};

static void on_put_reloaded(void *arg, const char *err)
{
    struct put_op *op = arg;
    op->cb(op->arg, NULL, op->found);
    free(op);
}

static void on_put(void *arg, const char *err, const char *msg, long long found)
{
    struct put_op *op = arg;
    struct webhooks *w = op->w;
    w->pending--;
    if (w->closing) {
        op->cb(op->arg, store_err_disconnected, 0);
        free(op);
        if (w->pending == 0)
            service_free(w);
        return;
    }
    if (err != NULL) {
        op->cb(op->arg, err == dl_err_reply ? store_err_server : err, 0);
        free(op);
        return;
    }
    op->found = found != 0;
    if (!op->found) {
        op->cb(op->arg, NULL, 0);
        free(op);
        return;
    }
    webhooks_reload(op->w, on_put_reloaded, op);
}

int webhooks_put(struct webhooks *w, const char *id, int create, const char *const *fields,
                 int nfields, webhooks_put_cb *cb, void *arg)
{
    struct put_op *op = xcalloc(1, sizeof(*op));
    op->w = w, op->cb = cb, op->arg = arg;
    w->pending++;
    if (dl_endpoint_put(w->c->store, id, create, fields, nfields, wall_ms(), on_put, op) != 0) {
        w->pending--;
        free(op);
        return -1;
    }
    return 0;
}

int webhooks_delete(struct webhooks *w, const char *id, webhooks_put_cb *cb, void *arg)
{
    struct put_op *op = xcalloc(1, sizeof(*op));
    op->w = w, op->cb = cb, op->arg = arg;
    w->pending++;
    if (dl_endpoint_del(w->c->store, id, wall_ms(), on_put, op) != 0) {
        w->pending--;
        free(op);
        return -1;
    }
    return 0;
}


/* ---- service --------------------------------------------------------------------------- */

static void on_store_state(void *arg, int up)
{
    struct webhooks *w = arg;
    if (up)
        webhooks_reload(w, NULL, NULL);
}

struct webhooks *webhooks_new(struct core *c)
{
    struct webhooks *w = xcalloc(1, sizeof(*w));
    w->c = c;
    snprintf(w->version, sizeof(w->version), "-");
    c->webhooks = w;
    store_on_state(c->store, on_store_state, w);
    if (store_ready(c->store))
        webhooks_reload(w, NULL, NULL);
    return w;
}

static void service_free(struct webhooks *w)
{
    free(w);
}

void webhooks_detach(struct webhooks *w)
{
    if (w == NULL)
        return;
    w->closing = 1;
    if (w->c->webhooks == w)
        w->c->webhooks = NULL;
}

void webhooks_close(struct webhooks *w)
{
    if (w == NULL)
        return;
    webhooks_detach(w);
    if (w->dns)
        evdns_base_free(w->dns, 1); /* pending look-ups complete (cancelled) now */
    w->dns = NULL;
    for (size_t i = 0; i < w->n; i++) {
        w->v[i]->deleted = 1;
        webhook_unref(w->v[i]);
    }
    free(w->v);
    w->v = NULL;
    w->n = 0;
    free(w->view);
    w->view = NULL;
    for (struct reload_waiter *l = w->waiting, *n; l; l = n) {
        n = l->next;
        if (l->cb)
            l->cb(l->arg, store_err_disconnected);
        free(l);
    }
    w->waiting = NULL;
    if (w->pending == 0)
        service_free(w); /* else the last store callback frees it */
}
