/* httpc.c - outbound HTTP on libcurl multi, driven by the core event_base (see httpc.h).
 *
 * The hiperfifo pattern: curl tells us which sockets to watch (on_curl_socket: one struct
 * event per socket, embedded in a pooled struct sockev) and when to wake it (on_curl_timer:
 * one timer event); libevent tells curl what became ready (curl_multi_socket_action); after
 * every action, reap() moves finished transfers from curl_multi_info_read to the done list
 * and dispatch() calls their callbacks, outside any curl callback. Each request also has its
 * own deadline event, because curl 7.88 does not time out a transfer still waiting for a
 * connection slot (max_total_conns / max_host_conns).
 *
 * A transfer (struct xfer) is IDLE (in the pool), WAITING (for a connection slot of its
 * host, on its hostq's wait list), RUNNING (in the multi, on h->running),
 * DONE (removed from the multi, on h->done, result known) or CALLING (its callback runs; on
 * no list). The transitions: httpc_request (IDLE -> RUNNING, or IDLE -> WAITING -> RUNNING
 * by pump_waiting when a slot frees), xfer_finish (WAITING or RUNNING -> DONE: curl finished
 * it, its deadline fired, or shutdown), complete (DONE -> CALLING -> IDLE via
 * xfer_put). httpc_free moves RUNNING transfers to DONE with "shutdown" and completes them
 * all; called from inside a callback it leaves the final free to dispatch().
 *
 * Throughput notes: with keep-alive, curl drops a socket from its watch list when a transfer
 * ends and watches it again for the next one; an event_base created with
 * EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST folds those epoll_ctl pairs (about +60% requests/s
 * in httpc_probe). curl 7.88 looks up a reusable connection linearly among the connections
 * to that host, so thousands of parallel requests to one host get slow: cap per-host
 * concurrency (max_host_conns, or the caller's own per-endpoint limit) in the hundreds.
 * curl 7.88 also keeps a transfer that finds no connection slot on a pending list that every
 * curl_multi_remove_handle walks, and such a transfer looks for a connection again each time
 * one frees: with 100 endpoints on one host (1,600 transfers over 64 connections) libcurl
 * was 43% of the daemon's CPU. So curl gets only what it can start at once; the rest waits
 * here ("per-host slots" below; state WAITING), with the same deadline.
 * The curl callbacks that fill a transfer are in httpc_cb.c (httpc_internal.h).
 * runs on: core thread only. */
#include "relay/common/httpc.h"
#include "relay/common/httpc_internal.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if LIBCURL_VERSION_NUM < 0x075000
#error "httpc needs libcurl >= 7.80 (CURLOPT_PREREQFUNCTION)"
#endif

const char httpc_err_timeout[] = "timeout";
const char httpc_err_connect[] = "connect";
const char httpc_err_resolve[] = "resolve";
const char httpc_err_forbidden[] = "forbidden_target";
const char httpc_err_tls[] = "tls";
const char httpc_err_too_large[] = "too_large";
const char httpc_err_closed[] = "closed";
const char httpc_err_protocol[] = "protocol";
const char httpc_err_bad_url[] = "bad_url";
const char httpc_err_shutdown[] = "shutdown";
const char httpc_err_internal[] = "internal";
const char httpc_err_local[] = "local_resource";

static const char *const outcome_err[HTTPC_OUTCOME_COUNT] = {
    [HTTPC_OK] = NULL,
    [HTTPC_E_TIMEOUT] = httpc_err_timeout,
    [HTTPC_E_CONNECT] = httpc_err_connect,
    [HTTPC_E_RESOLVE] = httpc_err_resolve,
    [HTTPC_E_FORBIDDEN] = httpc_err_forbidden,
    [HTTPC_E_TLS] = httpc_err_tls,
    [HTTPC_E_TOO_LARGE] = httpc_err_too_large,
    [HTTPC_E_CLOSED] = httpc_err_closed,
    [HTTPC_E_PROTOCOL] = httpc_err_protocol,
    [HTTPC_E_BAD_URL] = httpc_err_bad_url,
    [HTTPC_E_SHUTDOWN] = httpc_err_shutdown,
    [HTTPC_E_INTERNAL] = httpc_err_internal,
    [HTTPC_E_LOCAL] = httpc_err_local,
};

const char *httpc_outcome_name(int outcome)
{
    if (outcome == HTTPC_OK)
        return "ok";
    if (outcome < 0 || outcome >= HTTPC_OUTCOME_COUNT)
        return "unknown";
    return outcome_err[outcome];
}

/* ---- lists ---------------------------------------------------------------------------- */

static void xlist_push(struct xlist *l, struct xfer *x)
{
    x->next = NULL;
    x->prev = l->tail;
    if (l->tail != NULL)
        l->tail->next = x;
    else
        l->head = x;
    l->tail = x;
}

static void xlist_unlink(struct xlist *l, struct xfer *x)
{
    if (x->prev != NULL)
        x->prev->next = x->next;
    else
        l->head = x->next;
    if (x->next != NULL)
        x->next->prev = x->prev;
    else
        l->tail = x->prev;
    x->next = x->prev = NULL;
}

static struct xfer *xlist_pop(struct xlist *l)
{
    struct xfer *x = l->head;
    if (x != NULL)
        xlist_unlink(l, x);
    return x;
}

/* ---- keyed tables ----------------------------------------------------------------------
 * The URL cache and the per-host slots find their entries by text: a chained table of
 * knodes (httpc_internal.h), each the first member of its entry. */

static uint32_t key_hash(const char *k)
{
    uint32_t v = 2166136261u; /* FNV-1a: keys are operators' endpoint URLs and hosts */
    for (; *k; k++)
        v = (v ^ (unsigned char)*k) * 16777619u;
    return v;
}

/* The entry of key (hash hv), or NULL. */
static struct knode *ktab_find(const struct ktab *t, uint32_t hv, const char *key)
{
    if (t->tab == NULL)
        return NULL;
    for (struct knode *n = t->tab[hv & (t->cap - 1)]; n != NULL; n = n->next)
        if (n->hash == hv && strcmp(n->key, key) == 0)
            return n;
    return NULL;
}

/* Insert n (hash and key set, not in the table), growing the table first when full. */
static void ktab_add(struct ktab *t, struct knode *n)
{
    if (t->n >= t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        struct knode **tab = xcalloc(cap, sizeof(*tab));
        for (size_t i = 0; i < t->cap; i++)
            for (struct knode *e = t->tab[i], *next; e != NULL; e = next) {
                next = e->next;
                e->next = tab[e->hash & (cap - 1)];
                tab[e->hash & (cap - 1)] = e;
            }
        free(t->tab);
        t->tab = tab;
        t->cap = cap;
    }
    n->next = t->tab[n->hash & (t->cap - 1)];
    t->tab[n->hash & (t->cap - 1)] = n;
    t->n++;
}

/* Take n out of the table (it is in it). */
static void ktab_del(struct ktab *t, struct knode *n)
{
    for (struct knode **pp = &t->tab[n->hash & (t->cap - 1)]; *pp != NULL; pp = &(*pp)->next)
        if (*pp == n) {
            *pp = n->next;
            t->n--;
            return;
        }
}

/* ---- the URL cache -------------------------------------------------------------------
 * Endpoints' URLs parsed once (curl_url_set: ~6,000 instructions) for every pooled transfer:
 * with 100 endpoints the transfer taken from the pool has mostly last gone to another one.
 * An entry lives while a transfer holds it; unheld ones stay while there are at most
 * URLC_KEEP entries. */

#define URLC_KEEP 1024

/* x's hold on its URL ends (NULL is fine). */
static void urlc_release(struct httpc *h, struct urlc *u)
{
    if (u == NULL || --u->refs > 0 || h->urls.n <= URLC_KEEP)
        return;
    ktab_del(&h->urls, &u->kn);
    curl_url_cleanup(u->h);
    free(u);
}

/* url parsed (as curl itself would: guessed scheme, any scheme), one hold taken; NULL when
 * curl refuses it (curl then parses it itself and reports the error). */
static struct urlc *urlc_get(struct httpc *h, const char *url)
{
    uint32_t hv = key_hash(url);
    struct knode *found = ktab_find(&h->urls, hv, url);
    if (found != NULL) {
        struct urlc *u = (struct urlc *)found; /* kn is its first member */
        u->refs++;
        return u;
    }
    CURLU *cu = curl_url();
    if (cu == NULL)
        return NULL;
    if (curl_url_set(cu, CURLUPART_URL, url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) !=
        CURLUE_OK) {
        curl_url_cleanup(cu);
        return NULL;
    }
    size_t len = strlen(url);
    struct urlc *u = xmalloc(sizeof(*u) + len + 1);
    memcpy(u->text, url, len + 1);
    u->h = cu;
    u->refs = 1;
    u->kn.hash = hv;
    u->kn.key = u->text;
    ktab_add(&h->urls, &u->kn);
    return u;
}

/* ---- transfers ------------------------------------------------------------------------ */

static void on_deadline(evutil_socket_t fd, short what, void *arg);

static struct xfer *xfer_get(struct httpc *h)
{
    struct xfer *x = h->idle;
    if (x != NULL) {
        h->idle = x->next;
        h->n_idle--;
        x->next = NULL;
        return x;
    }
    CURL *easy = curl_easy_init();
    if (easy == NULL)
        return NULL;
    x = xcalloc(1, sizeof(*x));
    x->h = h;
    x->easy = easy;
    evtimer_assign(&x->deadline, h->base, on_deadline, x);
    return x;
}

static void xfer_destroy(struct xfer *x)
{
    curl_easy_cleanup(x->easy);
    urlc_release(x->h, x->uc);
    free(x->hnode);
    free(x->htext);
    free(x->buf);
    free(x->hbuf);
    free(x);
}

/* Back to the pool (or freed): the transfer is on no list and not in the multi. */
static void xfer_put(struct httpc *h, struct xfer *x)
{
    evtimer_del(&x->deadline); /* armed again only by pump_waiting's failure path */
    x->hdrs = NULL; /* its nodes and text stay with x for the next request */
    x->cb = NULL;
    x->cb_arg = NULL;
    x->state = X_IDLE;
    if (h->closing || h->n_idle >= h->max_idle) {
        xfer_destroy(x);
        return;
    }
    if (x->cap > BUF_POOL_MAX) {
        free(x->buf);
        x->buf = NULL;
        x->cap = 0;
    }
    if (x->htext_cap > BUF_POOL_MAX) {
        free(x->htext);
        x->htext = NULL;
        x->htext_cap = 0;
    }
    if (x->hcap > BUF_POOL_MAX) {
        free(x->hbuf);
        x->hbuf = NULL;
        x->hcap = 0;
    }
    /* the options stay for the next request of the same shape (httpc_request); the multi
     * keeps connections and DNS either way */
    x->next = h->idle;
    h->idle = x;
    h->n_idle++;
}

/* ---- per-host slots --------------------------------------------------------------------
 * With max_host_conns or max_total_conns set, a transfer enters curl only when its host
 * (scheme's default port filled in, host in lower case: curl's own grouping of connections)
 * has fewer than max_host_conns transfers in curl and all hosts together fewer than
 * max_total_conns; otherwise it waits on its host's FIFO, deadline running, and hosts with
 * waiters take turns (the ready FIFO) as slots free. HTTP/1.1 uses one connection per
 * transfer, so curl then always finds a connection it may use or open. A host whose answers
 * came over HTTP/2 (mux) is not held: curl multiplexes its transfers. Hosts are forgotten
 * when nothing of theirs is running or waiting. */

#define HOST_KEY_MAX 300

/* "host:port" of url (lower case; the scheme's port when none is given) into out; 0 when
 * url is not an http(s) URL with a host (such a request is not held here). */
static size_t host_key(const char *url, char *out, size_t size)
{
    const char *p = strstr(url, "://");
    if (p == NULL)
        return 0;
    size_t slen = (size_t)(p - url);
    const char *dport;
    if (slen == 4 && strncasecmp(url, "http", 4) == 0)
        dport = "80";
    else if (slen == 5 && strncasecmp(url, "https", 5) == 0)
        dport = "443";
    else
        return 0;
    const char *a = p + 3;
    size_t alen = strcspn(a, "/?#");
    for (size_t i = alen; i > 0; i--) /* user:password@ */
        if (a[i - 1] == '@') {
            a += i;
            alen -= i;
            break;
        }
    size_t hlen = alen;
    const char *port = NULL;
    size_t plen = 0;
    if (alen > 0 && a[0] == '[') { /* [v6]:port */
        const char *rb = memchr(a, ']', alen);
        if (rb == NULL)
            return 0;
        hlen = (size_t)(rb - a) + 1;
    } else {
        const char *c = memchr(a, ':', alen);
        if (c != NULL)
            hlen = (size_t)(c - a);
    }
    if (hlen < alen && a[hlen] == ':') {
        port = a + hlen + 1;
        plen = alen - hlen - 1;
    }
    if (plen == 0) {
        port = dport;
        plen = strlen(dport);
    }
    if (hlen == 0 || hlen + plen + 2 > size)
        return 0;
    for (size_t i = 0; i < hlen; i++)
        out[i] = (char)((a[i] >= 'A' && a[i] <= 'Z') ? a[i] + 32 : a[i]);
    out[hlen] = ':';
    memcpy(out + hlen + 1, port, plen);
    out[hlen + 1 + plen] = '\0';
    return hlen + 1 + plen;
}

/* The slots of url's host, created on first use; NULL when url has no host key. */
static struct hostq *hq_get(struct httpc *h, const char *url)
{
    char key[HOST_KEY_MAX];
    size_t klen = host_key(url, key, sizeof(key));
    if (klen == 0)
        return NULL;
    uint32_t hv = key_hash(key);
    struct knode *found = ktab_find(&h->hosts, hv, key);
    if (found != NULL)
        return (struct hostq *)found; /* kn is its first member */
    struct hostq *q = xcalloc(1, sizeof(*q) + klen + 1);
    memcpy(q->key, key, klen + 1);
    q->kn.hash = hv;
    q->kn.key = q->key;
    ktab_add(&h->hosts, &q->kn);
    return q;
}

/* Forget q when nothing of it runs or waits (and it is not on the ready FIFO). */
static void hq_maybe_free(struct httpc *h, struct hostq *q)
{
    if (q->running > 0 || q->wait.head != NULL || q->in_ready)
        return;
    ktab_del(&h->hosts, &q->kn);
    free(q);
}

static int host_room(const struct httpc *h, const struct hostq *q)
{
    return q->mux || h->max_host == 0 || q->running < h->max_host;
}

static int total_room(const struct httpc *h)
{
    return h->max_total == 0 || h->counted < h->max_total;
}

static void ready_push(struct httpc *h, struct hostq *q)
{
    if (q->in_ready)
        return;
    q->in_ready = 1;
    q->rnext = NULL;
    if (h->ready_tail != NULL)
        h->ready_tail->rnext = q;
    else
        h->ready_head = q;
    h->ready_tail = q;
}

/* Into the multi: WAITING or new -> RUNNING. -1 when curl refuses it (x is on no list). */
static int xfer_add(struct httpc *h, struct xfer *x)
{
    x->state = X_RUNNING;
    xlist_push(&h->running, x);
    CURLMcode mc = curl_multi_add_handle(h->multi, x->easy);
    if (mc != CURLM_OK) {
        xlist_unlink(&h->running, x);
        log_warn("curl_multi_add_handle failed", "err=\"%s\"", curl_multi_strerror(mc));
        return -1;
    }
    x->added = 1;
    if (++h->in_curl > h->st.peak_curl)
        h->st.peak_curl = h->in_curl;
    if (x->hq != NULL) {
        x->hq->running++;
        x->counted = !x->hq->mux;
        h->counted += (unsigned long)x->counted;
    }
    return 0;
}

/* x left curl: its slot is free (and its host learns whether it multiplexes). */
static void slot_release(struct httpc *h, struct xfer *x)
{
    struct hostq *q = x->hq;
    if (q == NULL)
        return;
    if (!q->mux && (x->shape & 2u)) { /* https: HTTP/2 negotiated? */
        long v = 0;
        curl_easy_getinfo(x->easy, CURLINFO_HTTP_VERSION, &v);
        q->mux = v == CURL_HTTP_VERSION_2_0 || v == CURL_HTTP_VERSION_3;
    }
    q->running--;
    h->counted -= (unsigned long)x->counted;
    x->counted = 0;
    x->hq = NULL;
    if (q->wait.head != NULL && host_room(h, q))
        ready_push(h, q);
    hq_maybe_free(h, q);
}

static void xfer_finish(struct httpc *h, struct xfer *x, CURLcode result, const char *err);

/* Start waiting transfers while there is room, one host after the other. */
static void pump_waiting(struct httpc *h)
{
    while (!h->closing && h->ready_head != NULL && total_room(h)) {
        struct hostq *q = h->ready_head;
        h->ready_head = q->rnext;
        if (h->ready_head == NULL)
            h->ready_tail = NULL;
        q->in_ready = 0;
        q->rnext = NULL;
        struct xfer *x = NULL;
        if (q->wait.head != NULL && host_room(h, q)) {
            x = xlist_pop(&q->wait);
            if (xfer_add(h, x) != 0) {
                /* not an attempt (nothing sent); called back from its deadline event */
                x->hq = NULL;
                x->state = X_RUNNING; /* finished as a curl failure */
                xlist_push(&h->running, x);
                xfer_finish(h, x, CURLE_OUT_OF_MEMORY, NULL);
                struct timeval now = {0, 0};
                evtimer_add(&x->deadline, &now);
            }
            if (q->wait.head != NULL && host_room(h, q))
                ready_push(h, q);
        }
        hq_maybe_free(h, q);
    }
}

/* WAITING or RUNNING -> DONE: out of the multi (or its host's wait list), onto the done list.
 * err (ours) may be NULL. */
static void xfer_finish(struct httpc *h, struct xfer *x, CURLcode result, const char *err)
{
    if (x->state == X_WAITING) {
        struct hostq *q = x->hq;
        xlist_unlink(&q->wait, x);
        x->hq = NULL;
        hq_maybe_free(h, q);
    } else {
        curl_multi_remove_handle(h->multi, x->easy);
        xlist_unlink(&h->running, x);
        if (x->added) {
            x->added = 0;
            h->in_curl--;
        }
        slot_release(h, x);
    }
    evtimer_del(&x->deadline);
    x->result = result;
    if (err != NULL && x->err == NULL)
        x->err = err;
    x->state = X_DONE;
    xlist_push(&h->done, x);
}

/* curl reports a response line or field over its own limit (100 KB in 7.88) as "out of
 * memory" (CURLE_TOO_LARGE from 8.6), before any of our callbacks sees that line. Once the
 * request went out or bytes came back, that is the server's answer being too big: a failed
 * exchange ("protocol", counted and retried like any other), not a local resource running
 * out (which would be rescheduled forever without counting). */
static int oversized_answer(const struct xfer *x)
{
    int big = x->result == CURLE_OUT_OF_MEMORY;
#if LIBCURL_VERSION_NUM >= 0x080600
    big = big || x->result == CURLE_TOO_LARGE;
#endif
    if (!big)
        return 0;
    long sent = 0;
    curl_easy_getinfo(x->easy, CURLINFO_REQUEST_SIZE, &sent);
    return x->head_bytes > 0 || x->total > 0 || sent > 0;
}

static int classify(const struct xfer *x)
{
    if (x->err == httpc_err_too_large)
        return HTTPC_E_TOO_LARGE;
    if (x->err == httpc_err_timeout)
        return HTTPC_E_TIMEOUT;
    if (x->err == httpc_err_shutdown)
        return HTTPC_E_SHUTDOWN;
    if (x->err == httpc_err_protocol)
        return HTTPC_E_PROTOCOL;
    if (oversized_answer(x))
        return HTTPC_E_PROTOCOL;
    if (x->result == CURLE_OUT_OF_MEMORY ||
        (x->local_errno != 0 && x->result != CURLE_OK && x->result != CURLE_OPERATION_TIMEDOUT))
        return HTTPC_E_LOCAL; /* nothing was sent: a local resource ran out */
    if (x->refused > 0 &&
        (x->result == CURLE_COULDNT_CONNECT || x->result == CURLE_ABORTED_BY_CALLBACK))
        return HTTPC_E_FORBIDDEN; /* refused addresses, and no other one connected */
    switch (x->result) {
    case CURLE_OK:
        return HTTPC_OK;
    case CURLE_OPERATION_TIMEDOUT:
        return HTTPC_E_TIMEOUT;
    case CURLE_COULDNT_CONNECT:
        return HTTPC_E_CONNECT;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return HTTPC_E_RESOLVE;
    case CURLE_FILESIZE_EXCEEDED:
        return HTTPC_E_TOO_LARGE;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
        return HTTPC_E_TLS;
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_HTTP2_STREAM:
        return HTTPC_E_CLOSED;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_BAD_CONTENT_ENCODING:
        return HTTPC_E_PROTOCOL;
    case CURLE_UNSUPPORTED_PROTOCOL: /* a scheme other than http/https */
    case CURLE_URL_MALFORMAT:
        return HTTPC_E_BAD_URL;
    default:
        return HTTPC_E_INTERNAL;
    }
}

/* DONE -> CALLING -> IDLE: build the response, call back, recycle. */
static void complete(struct httpc *h, struct xfer *x)
{
    struct httpc_resp r;
    long status = 0, version = 0, connects = 0;
    char *ctype = NULL;
    int outcome = classify(x);
    if (outcome == HTTPC_E_CONNECT) {
        long oe = 0; /* connect() itself failing for a local reason: no buffers, no port */
        curl_easy_getinfo(x->easy, CURLINFO_OS_ERRNO, &oe);
        if (oe == ENOBUFS || oe == ENOMEM || oe == EADDRNOTAVAIL || oe == EMFILE ||
            oe == ENFILE)
            outcome = HTTPC_E_LOCAL;
    }

    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &ctype);
    curl_easy_getinfo(x->easy, CURLINFO_HTTP_VERSION, &version);
    curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &connects);
    memset(&r, 0, sizeof(r));
    r.err = outcome_err[outcome];
    r.detail = outcome == HTTPC_OK ? NULL
               : outcome == HTTPC_E_PROTOCOL && (x->err == httpc_err_protocol ||
                                                 oversized_answer(x))
                   ? "response head too large" /* not curl's "Out of memory" */
               : x->result != CURLE_OK ? curl_easy_strerror(x->result)
               : outcome == HTTPC_E_TIMEOUT ? "total deadline reached"
               : NULL;
    r.status = status;
    if (x->buf != NULL) {
        x->buf[x->len] = '\0';
        r.body = x->buf;
    } else {
        r.body = "";
    }
    r.body_len = x->len;
    r.truncated = x->truncated;
    r.retry_after_ms = x->retry_after_ms;
    r.latency_ms = mono_ms() - x->start_ms;
    r.content_type = ctype;
    if (x->keep_headers) {
        r.headers = x->hbuf != NULL && x->hlen > 0 ? x->hbuf : "";
        r.headers_len = x->hlen;
    }
    r.http_version = status == 0 ? 0
                     : version == CURL_HTTP_VERSION_1_0 ? 10
                     : version == CURL_HTTP_VERSION_1_1 ? 11
                     : version == CURL_HTTP_VERSION_2_0 ? 20
                     : version == CURL_HTTP_VERSION_3 ? 30 : 0;

    h->st.outcomes[outcome]++;
    h->st.completed++;
    h->st.in_flight--;
    h->st.connects += (uint64_t)(connects > 0 ? connects : 0);

    x->state = X_CALLING;
    x->cb(x->cb_arg, &r); /* may start requests, free the caller's objects, httpc_free */
    xfer_put(h, x);
}

static void destroy(struct httpc *h);

/* Call back every DONE transfer. Never nested; frees h if httpc_free ran meanwhile. */
static void dispatch(struct httpc *h)
{
    struct xfer *x;
    if (h->dispatching)
        return;
    h->dispatching = 1;
    while (!h->free_pending && (x = xlist_pop(&h->done)) != NULL)
        complete(h, x);
    h->dispatching = 0;
    if (h->free_pending)
        destroy(h);
}

/* Move what curl finished to the done list. */
static void collect(struct httpc *h)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(h->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct xfer *x = NULL;
        CURLcode rc = m->data.result; /* m dies with curl_multi_remove_handle */
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        if (x != NULL && x->state == X_RUNNING)
            xfer_finish(h, x, rc, NULL);
    }
    pump_waiting(h); /* slots freed: waiting transfers go into curl */
}

/* After a curl action: collect and call back. Does not touch h after (it may be freed). */
static void reap(struct httpc *h)
{
    collect(h);
    dispatch(h);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct xfer *x = arg;
    struct httpc *h = x->h;
    collect(h); /* curl may have finished it in this same loop pass: its result wins */
    if (x->state == X_RUNNING || x->state == X_WAITING)
        xfer_finish(h, x, CURLE_OK, httpc_err_timeout);
    pump_waiting(h);
    dispatch(h);
}

/* ---- libevent <-> curl ---------------------------------------------------------------- */

static void on_sock_ready(evutil_socket_t fd, short what, void *arg)
{
    struct httpc *h = arg;
    int running;
    int action = ((what & EV_READ) ? CURL_CSELECT_IN : 0) |
                 ((what & EV_WRITE) ? CURL_CSELECT_OUT : 0);
    curl_multi_socket_action(h->multi, fd, action, &running);
    reap(h);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct httpc *h = arg;
    int running;
    curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    reap(h);
}

static int on_curl_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    struct httpc *h = userp;
    struct sockev *se = socketp;

    if (what == CURL_POLL_REMOVE) {
        if (se != NULL) {
            event_del(&se->ev);
            if (se->prev != NULL)
                se->prev->next = se->next;
            else
                h->socks = se->next;
            if (se->next != NULL)
                se->next->prev = se->prev;
            if (h->n_free_socks < MAX_IDLE_SOCKEVS) {
                se->next = h->free_socks;
                h->free_socks = se;
                h->n_free_socks++;
            } else {
                free(se);
            }
        }
        return 0;
    }
    short kind = (short)(EV_PERSIST | ((what & CURL_POLL_IN) ? EV_READ : 0) |
                         ((what & CURL_POLL_OUT) ? EV_WRITE : 0));
    if (se == NULL) {
        if ((se = h->free_socks) != NULL) {
            h->free_socks = se->next;
            h->n_free_socks--;
        } else {
            se = xmalloc(sizeof(*se));
        }
        se->prev = NULL;
        se->next = h->socks;
        if (h->socks != NULL)
            h->socks->prev = se;
        h->socks = se;
        curl_multi_assign(h->multi, s, se);
    } else if (se->kind == kind) {
        return 0;
    } else {
        event_del(&se->ev);
    }
    se->kind = kind;
    event_assign(&se->ev, h->base, s, kind, on_sock_ready, h);
    event_add(&se->ev, NULL);
    return 0;
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    struct httpc *h = userp;
    if (timeout_ms < 0) {
        evtimer_del(&h->timer);
    } else {
        struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
        evtimer_add(&h->timer, &tv);
    }
    return 0;
}

/* ---- public --------------------------------------------------------------------------- */

/* Process-wide: curl_global_init ran. main() runs it before any thread starts; this covers
 * programs that create an httpc without main (tests/helpers/httpc_probe). Read and set only
 * by httpc_new, which runs on one thread (the creator of the event_base) before others. */
static int curl_global_done;

struct httpc *httpc_new(struct event_base *base, const struct httpc_opts *opts)
{
    if (!curl_global_done) {
        CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
        if (rc != CURLE_OK) {
            log_err("curl_global_init failed", "err=\"%s\"", curl_easy_strerror(rc));
            return NULL;
        }
        curl_global_done = 1;
    }
    struct httpc *h = xcalloc(1, sizeof(*h));
    h->base = base;
    h->multi = curl_multi_init();
    if (h->multi == NULL) {
        log_err("curl_multi_init failed", "%s", "");
        free(h);
        return NULL;
    }
    h->user_agent = xstrdup(opts != NULL && opts->user_agent != NULL ? opts->user_agent
                                                                     : "statusrelay");
    h->max_idle = opts != NULL && opts->max_idle > 0 ? opts->max_idle : DEFAULT_MAX_IDLE;
    evtimer_assign(&h->timer, base, on_timer, h);
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
    curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    /* The idle connection cache keeps curl's default size (4 x the transfers added), so
     * every connection of a burst stays reusable; idle ones close after 118 s. */
    if (opts != NULL && opts->max_total_conns > 0) {
        curl_multi_setopt(h->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, opts->max_total_conns);
        /* keep every allowed connection alive when idle: curl's default cache follows the
         * handles in flight and closed keep-alive connections between delivery bursts */
        curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, opts->max_total_conns);
    }
    if (opts != NULL && opts->max_host_conns > 0)
        curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, opts->max_host_conns);
    /* the same limits held here first ("per-host slots"): curl's stay as a safety net */
    h->max_host = opts != NULL && opts->max_host_conns > 0 ? (unsigned long)opts->max_host_conns : 0;
    h->max_total = opts != NULL && opts->max_total_conns > 0 ? (unsigned long)opts->max_total_conns : 0;
    return h;
}

static void destroy(struct httpc *h)
{
    struct xfer *x;
    struct sockev *se;

    /* No request is running any more, so curl should watch no socket (REMOVE came for
     * each); drop any left anyway, then stop curl from calling us while it closes the
     * cached connections. */
    while ((se = h->socks) != NULL) {
        h->socks = se->next;
        event_del(&se->ev);
        free(se);
    }
    curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, NULL);
    curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, NULL);
    curl_multi_cleanup(h->multi);
    evtimer_del(&h->timer);
    while ((x = h->idle) != NULL) {
        h->idle = x->next;
        xfer_destroy(x);
    }
    while ((se = h->free_socks) != NULL) {
        h->free_socks = se->next;
        free(se);
    }
    for (size_t i = 0; i < h->urls.cap; i++) /* every transfer is gone: unheld URLs */
        for (struct knode *n = h->urls.tab[i], *next; n != NULL; n = next) {
            next = n->next;
            curl_url_cleanup(((struct urlc *)n)->h);
            free(n);
        }
    free(h->urls.tab);
    for (size_t i = 0; i < h->hosts.cap; i++) /* every transfer is done: only empty hosts */
        for (struct knode *n = h->hosts.tab[i], *next; n != NULL; n = next) {
            next = n->next;
            free(n);
        }
    free(h->hosts.tab);
    free(h->user_agent);
    free(h);
}

void httpc_free(struct httpc *h)
{
    struct xfer *x;
    if (h == NULL || h->closing)
        return; /* a second call from a callback that the first one is running */
    h->closing = 1;
    for (size_t i = 0; i < h->hosts.cap; i++) /* the waiting ones; hosts stay until destroy */
        for (struct knode *n = h->hosts.tab[i]; n != NULL; n = n->next) {
            struct hostq *q = (struct hostq *)n;
            q->in_ready = 1; /* pinned: hq_maybe_free leaves it */
            while (q->wait.head != NULL)
                xfer_finish(h, q->wait.head, CURLE_OK, httpc_err_shutdown);
        }
    while ((x = h->running.head) != NULL)
        xfer_finish(h, x, CURLE_OK, httpc_err_shutdown);
    if (h->dispatching) {
        /* Inside a completion callback: complete the rest now; dispatch() frees h once
         * that callback returns. */
        h->free_pending = 1;
        while ((x = xlist_pop(&h->done)) != NULL)
            complete(h, x);
        return;
    }
    h->dispatching = 1;
    while ((x = xlist_pop(&h->done)) != NULL)
        complete(h, x);
    destroy(h);
}

static int method_ok(const char *m)
{
    size_t i;
    for (i = 0; m[i] != '\0'; i++)
        if (m[i] < 'A' || m[i] > 'Z' || i >= METHOD_MAX)
            return 0;
    return i > 0;
}

/* The method (req's, else GET) when req can be sent at all: a method of 1..METHOD_MAX
 * capital letters and header lines without CR or LF. NULL otherwise. */
static const char *req_method(const struct httpc_req *req)
{
    const char *method = req->method != NULL ? req->method : "GET";
    if (!method_ok(method))
        return NULL;
    if (req->headers != NULL)
        for (const char *const *hp = req->headers; *hp != NULL; hp++)
            if (strpbrk(*hp, "\r\n") != NULL)
                return NULL;
    return method;
}

/* Reset a pooled transfer's per-request state for req and copy its header lines into
 * x->hdrs (nodes and text owned by x, reused). Returns 0, or -1 out of memory. */
static int xfer_prepare(struct xfer *x, const struct httpc_req *req, httpc_done_cb *cb,
                        void *arg)
{
    x->cb = cb;
    x->cb_arg = arg;
    x->addr_check = req->addr_check;
    x->addr_check_arg = req->addr_check_arg;
    x->len = 0;
    x->keep = req->max_response > 0 ? req->max_response : DEFAULT_MAX_RESPONSE;
    if (x->keep > SIZE_MAX / 4)
        x->keep = SIZE_MAX / 4;
    x->limit = (uint64_t)x->keep + req->max_drain;
    x->total = 0;
    x->head_bytes = 0;
    x->retry_after_ms = -1;
    x->result = CURLE_OK;
    x->err = NULL;
    x->refused = 0;
    x->local_errno = 0;
    x->truncated = 0;
    x->hlen = 0;
    x->head_done = 0;
    x->keep_headers = req->keep_headers != 0;
    x->hdrs = NULL;
    if (req->headers != NULL && req->headers[0] != NULL) {
        size_t n = 0, text = 0;
        for (const char *const *hp = req->headers; *hp != NULL; hp++, n++)
            text += strlen(*hp) + 1;
        if (n > x->hnode_cap) {
            struct curl_slist *nodes = realloc(x->hnode, n * sizeof(*nodes));
            if (nodes == NULL)
                return -1;
            x->hnode = nodes;
            x->hnode_cap = n;
        }
        if (text > x->htext_cap) {
            char *t = realloc(x->htext, text);
            if (t == NULL)
                return -1;
            x->htext = t;
            x->htext_cap = text;
        }
        char *t = x->htext;
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(req->headers[i]) + 1;
            memcpy(t, req->headers[i], len);
            x->hnode[i].data = t;
            x->hnode[i].next = i + 1 < n ? &x->hnode[i + 1] : NULL;
            t += len;
        }
        x->hdrs = &x->hnode[0];
    }
    return 0;
}

/* The URL: its parsed copy from h's URL cache (parsed once, with the flags curl itself would
 * use), or curl's own parse when ours fails (so that curl reports the error, as before).
 * Returns 0, or -1 when curl refuses (out of memory). */
static int xfer_set_url(struct xfer *x, const char *url)
{
    CURL *e = x->easy;
    if (x->uc == NULL || strcmp(x->uc->text, url) != 0) {
        struct urlc *u = urlc_get(x->h, url);
        if (u == NULL) {
            curl_easy_setopt(e, CURLOPT_CURLU, NULL);
            urlc_release(x->h, x->uc); /* not set on the handle any more */
            x->uc = NULL;
            return curl_easy_setopt(e, CURLOPT_URL, url) == CURLE_OK ? 0 : -1;
        }
        if (curl_easy_setopt(e, CURLOPT_CURLU, u->h) != CURLE_OK) {
            urlc_release(x->h, u);
            return -1;
        }
        urlc_release(x->h, x->uc); /* the handle holds the new one now */
        x->uc = u;
        return 0;
    }
    return curl_easy_setopt(e, CURLOPT_CURLU, x->uc->h) == CURLE_OK ? 0 : -1;
}

/* The options every transfer gets: URL, protocols, timeouts, our callbacks, size limit, TLS,
 * the address check and header lines. Returns 0, or -1 when curl refuses the URL. */
static int xfer_set_options(struct httpc *h, struct xfer *x, const struct httpc_req *req,
                            int is_head, int64_t total_ms)
{
    CURL *e = x->easy;
    int64_t connect_ms = req->connect_timeout_ms > 0 ? req->connect_timeout_ms : DEFAULT_CONNECT_MS;
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    if (xfer_set_url(x, req->url) != 0)
        return -1;
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROXY, ""); /* ignore *_proxy env: addr_check sees the peer */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)total_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, h->user_agent);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, httpc_on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, httpc_on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    if (!is_head) /* a Content-Length over the limit fails before the body is read */
        curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE,
                         (curl_off_t)(x->limit > (uint64_t)INT64_MAX ? INT64_MAX : x->limit));
    if (req->tls_insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (strncasecmp(req->url, "https:", 6) == 0)
        curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L); /* wait for ALPN: h2 multiplexes */
    /* always: a socket() failing for lack of descriptors is told apart (local_errno) */
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, httpc_on_opensocket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x);
    if (req->addr_check != NULL) {
        curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, httpc_on_prereq);
        curl_easy_setopt(e, CURLOPT_PREREQDATA, x);
    }
    if (x->hdrs != NULL)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
    return 0;
}

/* The options that differ between two requests of the same shape (see struct xfer's shape):
 * the rest are still on the handle from the last one. Returns 0, or -1 when curl refuses. */
static int xfer_set_varying(struct xfer *x, const struct httpc_req *req, int is_head,
                            int64_t total_ms, int has_body)
{
    CURL *e = x->easy;
    int64_t connect_ms = req->connect_timeout_ms > 0 ? req->connect_timeout_ms : DEFAULT_CONNECT_MS;
    if (xfer_set_url(x, req->url) != 0)
        return -1;
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)total_ms);
    if (!is_head)
        curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE,
                         (curl_off_t)(x->limit > (uint64_t)INT64_MAX ? INT64_MAX : x->limit));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs); /* NULL: none */
    if (has_body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body != NULL ? req->body : "");
    }
    return 0;
}

/* A request's shape: what decides the options beyond xfer_set_varying's. */
static unsigned req_shape(const struct httpc_req *req)
{
    return (req->tls_insecure ? 1u : 0u) | (strncasecmp(req->url, "https:", 6) == 0 ? 2u : 0u) |
           (req->addr_check != NULL ? 4u : 0u) | (req->body != NULL ? 8u : 0u);
}

/* The method and the body: HEAD has none, POST/PUT/PATCH always one (empty when req has
 * none), other methods one when req has one. */
static void xfer_set_method(CURL *e, const struct httpc_req *req, const char *method)
{
    int is_post = strcmp(method, "POST") == 0;
    int has_body = req->body != NULL || is_post || strcmp(method, "PUT") == 0 ||
                   strcmp(method, "PATCH") == 0;
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    else if (!is_post && strcmp(method, "GET") != 0)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    else if (strcmp(method, "GET") == 0 && req->body != NULL)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method); /* GET with a body: keep GET */
    if (has_body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body != NULL ? req->body : "");
    }
}

int httpc_request(struct httpc *h, const struct httpc_req *req, httpc_done_cb *cb, void *arg)
{
    if (h == NULL || h->closing || req == NULL || req->url == NULL || cb == NULL)
        return -1;
    const char *method = req_method(req);
    if (method == NULL)
        return -1;

    struct xfer *x = xfer_get(h);
    if (x == NULL) {
        log_warn("curl_easy_init failed", "url_len=%zu", strlen(req->url));
        return -1;
    }
    int64_t total_ms = req->total_timeout_ms > 0 ? req->total_timeout_ms : DEFAULT_TOTAL_MS;
    int is_head = strcmp(method, "HEAD") == 0;
    unsigned shape = req_shape(req);
    int same = x->configured && x->shape == shape && strcmp(x->shape_method, method) == 0;
    if (x->configured && !same) {
        curl_easy_reset(x->easy); /* drops every option; the multi keeps connections, DNS */
        x->configured = 0;
    }
    if (xfer_prepare(x, req, cb, arg) != 0)
        goto fail;
    if (same) {
        int has_body = req->body != NULL || strcmp(method, "POST") == 0 ||
                       strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0;
        if (xfer_set_varying(x, req, is_head, total_ms, has_body) != 0)
            goto fail;
    } else {
        if (xfer_set_options(h, x, req, is_head, total_ms) != 0)
            goto fail;
        xfer_set_method(x->easy, req, method);
        x->configured = 1;
        x->shape = shape;
        memcpy(x->shape_method, method, strlen(method) + 1); /* method_ok: <= METHOD_MAX */
    }

    x->start_ms = mono_ms();
    x->hq = h->max_host || h->max_total ? hq_get(h, req->url) : NULL;
    if (x->hq != NULL && (x->hq->wait.head != NULL || !host_room(h, x->hq) ||
                          (!x->hq->mux && (!total_room(h) || h->ready_head != NULL)))) {
        /* no slot now (or others wait before it): waits here, its deadline running */
        x->state = X_WAITING;
        xlist_push(&x->hq->wait, x);
        h->st.waited++;
        if (host_room(h, x->hq))
            ready_push(h, x->hq);
    } else if (xfer_add(h, x) != 0) {
        if (x->hq != NULL) {
            struct hostq *q = x->hq;
            x->hq = NULL;
            hq_maybe_free(h, q);
        }
        goto fail;
    }
    struct timeval tv = { (time_t)(total_ms / 1000), (suseconds_t)((total_ms % 1000) * 1000) };
    evtimer_add(&x->deadline, &tv);
    h->st.started++;
    h->st.in_flight++;
    if (x->state == X_WAITING)
        pump_waiting(h); /* room may be free already (others' turn came first) */
    return 0;
fail:
    curl_easy_reset(x->easy); /* whatever was set: the next request starts from scratch */
    x->configured = 0;
    xfer_put(h, x);
    return -1;
}

void httpc_stats(const struct httpc *h, struct httpc_stats *out)
{
    *out = h->st;
}
