/* accept_guard.c - see accept_guard.h. runs on: the guarded listener's thread. */
#include "relay/common/accept_guard.h"
#include "relay/common/idmap.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One rate-limited log condition: the first occurrence is logged at once, later ones at most
 * every ACCEPT_GUARD_LOG_MS with the count of those not logged. */
struct quiet {
    int64_t last_ms; /* mono ms of the last line; 0 = never */
    uint64_t suppressed;
};

struct accept_guard {
    const char *name;
    int64_t cap, count;
    const struct accept_guard_ops *ops;
    void *arg;
    int paused;        /* the listener is not watched (by ops->pause) */
    int fd_wait;       /* paused for descriptors: a timer is armed */
    int64_t backoff_ms;
    struct quiet q_fd, q_cap, q_other, q_addr;
    int64_t per_address;  /* 0: no limit */
    struct idmap *addrs;  /* address key -> connections (entries > 0 only) */
};

static int quiet_due(struct quiet *q, uint64_t *folded)
{
    int64_t now = mono_ms();
    if (q->last_ms != 0 && now - q->last_ms < ACCEPT_GUARD_LOG_MS) {
        q->suppressed++;
        return 0;
    }
    *folded = q->suppressed;
    q->suppressed = 0;
    q->last_ms = now;
    return 1;
}

static const char *errno_name(int err)
{
    switch (err) {
    case EMFILE:
        return "EMFILE";
    case ENFILE:
        return "ENFILE";
    case ENOBUFS:
        return "ENOBUFS";
    case ENOMEM:
        return "ENOMEM";
    default:
        return "other";
    }
}

/* Watch the socket or not, as the state says (one place changes it). */
static void apply(struct accept_guard *g)
{
    int want = g->fd_wait || g->count >= g->cap;
    if (want == g->paused)
        return;
    g->paused = want;
    if (want)
        g->ops->pause(g->arg);
    else
        g->ops->resume(g->arg);
}

struct accept_guard *accept_guard_new(const char *name, int64_t cap,
                                      const struct accept_guard_ops *ops, void *arg)
{
    struct accept_guard *g = xcalloc(1, sizeof(*g));
    g->name = name;
    g->cap = cap < 1 ? 1 : cap;
    g->ops = ops;
    g->arg = arg;
    g->backoff_ms = ACCEPT_GUARD_BACKOFF_MIN_MS;
    g->addrs = idmap_new();
    return g;
}

void accept_guard_set_per_address(struct accept_guard *g, int64_t per_address)
{
    g->per_address = per_address > 0 ? per_address : 0;
}

int accept_guard_addr_take(struct accept_guard *g, const char *key)
{
    uint32_t n = 0;
    idmap_get(g->addrs, key, &n);
    if (g->per_address > 0 && (int64_t)n >= g->per_address) {
        uint64_t folded;
        if (quiet_due(&g->q_addr, &folded))
            log_warn("accept: per-address connection cap reached",
                     "listener=%s addr=%s cap=%lld suppressed=%llu", g->name, key,
                     (long long)g->per_address, (unsigned long long)folded);
        return -1;
    }
    idmap_put(g->addrs, key, n + 1);
    return 0;
}

void accept_guard_addr_put(struct accept_guard *g, const char *key)
{
    uint32_t n = 0;
    if (!idmap_get(g->addrs, key, &n))
        return;
    if (n <= 1)
        idmap_del(g->addrs, key);
    else
        idmap_put(g->addrs, key, n - 1);
}

int64_t accept_guard_addr_count(const struct accept_guard *g, const char *key)
{
    uint32_t n = 0;
    idmap_get(g->addrs, key, &n);
    return n;
}

int accept_guard_reserved_at(const struct accept_guard *g, int64_t n)
{
    int64_t r = g->cap < 2 ? 0 : g->cap / 8 < 1 ? 1 : g->cap / 8 > 64 ? 64 : g->cap / 8;
    return r > 0 && n > g->cap - r;
}

int accept_guard_reserved(const struct accept_guard *g)
{
    return accept_guard_reserved_at(g, g->count);
}

void accept_guard_free(struct accept_guard *g)
{
    if (g == NULL)
        return;
    idmap_free(g->addrs);
    free(g);
}

void accept_guard_opened(struct accept_guard *g)
{
    g->count++;
    g->backoff_ms = ACCEPT_GUARD_BACKOFF_MIN_MS; /* accept works again */
    if (g->count >= g->cap) {
        uint64_t n;
        if (quiet_due(&g->q_cap, &n))
            log_warn("accept: connection cap reached", "listener=%s cap=%lld suppressed=%llu",
                     g->name, (long long)g->cap, (unsigned long long)n);
    }
    apply(g);
}

void accept_guard_closed(struct accept_guard *g)
{
    if (g->count > 0)
        g->count--;
    g->fd_wait = 0; /* a descriptor was just freed: try at once (the timer may still fire) */
    apply(g);
}

int accept_guard_failed(struct accept_guard *g, int err)
{
    uint64_t n;
    if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM) {
        if (quiet_due(&g->q_other, &n))
            log_warn("accept failed", "listener=%s error=\"%s\" suppressed=%llu", g->name,
                     strerror(err), (unsigned long long)n);
        return 0;
    }
    if (quiet_due(&g->q_fd, &n))
        log_warn("accept: out of descriptors", "listener=%s errno=%s open=%lld retry_ms=%lld "
                 "suppressed=%llu",
                 g->name, errno_name(err), (long long)g->count, (long long)g->backoff_ms,
                 (unsigned long long)n);
    g->fd_wait = 1;
    g->ops->arm(g->arg, g->backoff_ms);
    g->backoff_ms = g->backoff_ms * 2 > ACCEPT_GUARD_BACKOFF_MAX_MS ? ACCEPT_GUARD_BACKOFF_MAX_MS
                                                                    : g->backoff_ms * 2;
    apply(g);
    return 1;
}

void accept_guard_on_timer(struct accept_guard *g)
{
    g->fd_wait = 0;
    apply(g);
}

int64_t accept_guard_count(const struct accept_guard *g)
{
    return g->count;
}

int accept_guard_paused(const struct accept_guard *g)
{
    return g->paused;
}
