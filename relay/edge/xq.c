/* xq.c - see xq.h. runs on: any thread. */
#include "relay/edge/xq.h"
#include "relay/common/util.h"

#include <libwebsockets.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(XQ_PRE == LWS_PRE, "XQ_PRE must equal LWS_PRE");

struct xq {
    pthread_mutex_t mu;
    struct xmsg *head, *tail;
    xq_wake_cb *wake;
    void *arg;
};

struct xbuf *xbuf_new(const void *data, size_t len)
{
    struct xbuf *b = xmalloc(sizeof(*b) + XQ_PRE + len + 1);
    atomic_init((_Atomic int *)&b->refs, 1);
    b->len = len;
    b->data = b->mem + XQ_PRE;
    if (len)
        memcpy(b->data, data, len);
    b->data[len] = '\0';
    return b;
}

struct xbuf *xbuf_ref(struct xbuf *b)
{
    atomic_fetch_add((_Atomic int *)&b->refs, 1);
    return b;
}

void xbuf_unref(struct xbuf *b)
{
    if (b != NULL && atomic_fetch_sub((_Atomic int *)&b->refs, 1) == 1)
        free(b);
}

struct xmsg *xmsg_new(enum xmsg_type type, uint64_t session, const void *data, size_t len)
{
    struct xmsg *m = xcalloc(1, sizeof(*m) + XQ_PRE + len + 1);
    m->type = type;
    m->session = session;
    m->len = len;
    m->data = m->buf + XQ_PRE;
    if (len)
        memcpy(m->data, data, len);
    m->data[len] = '\0';
    return m;
}

void xmsg_free(struct xmsg *m)
{
    if (m == NULL)
        return;
    xbuf_unref(m->shared);
    free(m);
}

struct xq *xq_new(xq_wake_cb *wake, void *arg)
{
    struct xq *q = xcalloc(1, sizeof(*q));
    pthread_mutex_init(&q->mu, NULL);
    q->wake = wake;
    q->arg = arg;
    return q;
}

void xq_free(struct xq *q)
{
    if (q == NULL)
        return;
    for (struct xmsg *m = q->head, *next; m != NULL; m = next) {
        next = m->next;
        xmsg_free(m);
    }
    pthread_mutex_destroy(&q->mu);
    free(q);
}

void xq_set_wake(struct xq *q, xq_wake_cb *wake, void *arg)
{
    pthread_mutex_lock(&q->mu);
    q->wake = wake;
    q->arg = arg;
    pthread_mutex_unlock(&q->mu);
}

void xq_push(struct xq *q, struct xmsg *m)
{
    m->next = NULL;
    pthread_mutex_lock(&q->mu);
    int was_empty = q->head == NULL;
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    xq_wake_cb *wake = q->wake;
    void *arg = q->arg;
    pthread_mutex_unlock(&q->mu);
    if (was_empty && wake)
        wake(arg);
}

struct xmsg *xq_take_all(struct xq *q)
{
    pthread_mutex_lock(&q->mu);
    struct xmsg *m = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    return m;
}
