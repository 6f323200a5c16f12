/* cluster.c - see cluster.h. The pure parts (slots, routing key, map, URL) are in
 * cluster_slot.c; each node's connection (connect, handshake, backoff, timeouts, NOSCRIPT)
 * is a store/conn.c conn. This file routes: slot map, redirects, waiting commands.
 * runs on: core thread. */
#include "store/command.h"
#include "store/cluster.h"
#include "store/cluster_slot.h"
#include "store/conn.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOPS 5        /* redirects and retries of one command */
#define RETRY_PAUSE_MS 100 /* before resending after TRYAGAIN / CLUSTERDOWN */
#define TICK_MS 100
#define DOWN_REFRESH_MS 500 /* map re-read period while a master is missing */

/* One accepted command: owned by the cluster from cluster_send until its callback ran. */
struct ccmd {
    struct conn_req req; /* req.data = this; req.script: an EVALSHA (conn.c resends as EVAL) */
    struct ccmd *next;   /* on a wait or later queue */
    struct cnode *node; /* the node it was written to, or is forced to (MOVED/ASK target) */
    store_cb *cb;
    void *arg;
    int argc;
    char **argv;
    size_t *lens;
    int64_t t0, not_before;
    int hops;
    int asking;
};

struct cmdq {
    struct ccmd *head, *tail;
};

struct cnode {
    struct cluster *cl;
    struct cluster_addr addr;
    struct conn *conn; /* ours */
    struct cmdq wait;  /* accepted for this node, not yet written */
};

struct cluster {
    struct event_base *base;
    struct cluster_url url;
    int64_t cmd_timeout_ms;
    int fatal_checks;
    const char *fatal;
    cluster_state_cb *on_state;
    void (*on_error)(void *arg, const char *msg);
    void *arg;
    struct cnode *nodes[CLUSTER_MAX_NODES];
    int nnodes;
    struct cluster_map map; /* the last map read; route[] follows it and MOVED answers */
    uint16_t route[CLUSTER_SLOTS];
    int have_map, up, closing, stopped;
    int refresh_wanted;
    struct cnode *refreshing; /* CLUSTER SLOTS asked of this node */
    struct conn_req slots_req; /* that command (data = the node) */
    int64_t refresh_t0;
    struct cmdq later; /* waiting out a TRYAGAIN-like pause, or a slot without owner */
    struct event *tick_ev;
    struct store_stats stats;
};

static void dispatch(struct cluster *cl, struct ccmd *c);
static void node_connect(struct cnode *n);
static void try_refresh(struct cluster *cl);
static void on_node_event(void *arg, struct conn *conn, int up);

/* ---- small helpers ------------------------------------------------------------------- */

static void q_push(struct cmdq *q, struct ccmd *c)
{
    c->next = NULL;
    if (q->tail)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
}

static struct ccmd *q_take_all(struct cmdq *q)
{
    struct ccmd *h = q->head;
    q->head = q->tail = NULL;
    return h;
}

static void q_remove(struct cmdq *q, struct ccmd *c)
{
    struct ccmd **pp = &q->head, *prev = NULL;
    while (*pp && *pp != c) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp == NULL)
        return;
    *pp = c->next;
    if (q->tail == c)
        q->tail = prev;
}

static void ccmd_free(struct ccmd *c)
{
    for (int i = 0; i < c->argc; i++)
        free(c->argv[i]);
    free(c->argv);
    free(c->lens);
    free(c);
}

/* Run the callback once and free. */
static void complete(struct cluster *cl, struct ccmd *c, const char *err, redisReply *r)
{
    cl->stats.pending--;
    if (c->cb)
        c->cb(c->arg, err, r);
    ccmd_free(c);
}

static int in_route(const struct cluster *cl, const struct cnode *n)
{
    for (int i = 0; i < cl->map.nmasters; i++)
        if (cl->have_map && n->addr.port == cl->map.masters[i].port &&
            strcmp(n->addr.host, cl->map.masters[i].host) == 0)
            return 1;
    return 0;
}

static int node_index(struct cluster *cl, const struct cluster_addr *a)
{
    for (int i = 0; i < cl->nnodes; i++)
        if (cl->nodes[i]->addr.port == a->port && strcmp(cl->nodes[i]->addr.host, a->host) == 0)
            return i;
    if (cl->nnodes == CLUSTER_MAX_NODES)
        return -1;
    struct cnode *n = xcalloc(1, sizeof(*n));
    n->cl = cl;
    n->addr = *a;
    struct conn_opts co = {.host = n->addr.host, .port = n->addr.port, .user = cl->url.user,
                           .password = cl->url.password, .cmd_timeout_ms = cl->cmd_timeout_ms,
                           .fatal_checks = cl->fatal_checks, .what = "redis cluster node",
                           .on_event = on_node_event, .arg = n};
    n->conn = conn_new(cl->base, &co);
    cl->nodes[cl->nnodes] = n;
    return cl->nnodes++;
}

/* up = a map, and every master in it connected and past its handshake. Once up, a master
 * that is new to the map and still connecting (a promoted replica) keeps it up: commands wait
 * on that node's queue; a master whose connection is down makes it down. */
static void update_up(struct cluster *cl)
{
    if (cl->closing || cl->stopped)
        return;
    int up = cl->have_map;
    for (int i = 0; up && i < cl->nnodes; i++) {
        enum conn_state st = conn_state(cl->nodes[i]->conn);
        if (in_route(cl, cl->nodes[i]) && st != CONN_UP && (!cl->up || st == CONN_DOWN))
            up = 0;
    }
    if (up == cl->up)
        return;
    cl->up = up;
    if (up)
        log_info("redis cluster ready", "masters=%d", cl->map.nmasters);
    else
        log_warn("redis cluster not ready, waiting for its masters", "");
    cl->on_state(cl->arg, up);
}

/* ---- sending ------------------------------------------------------------------------- */

static int write_cmd(struct cnode *n, struct ccmd *c)
{
    if (conn_state(n->conn) != CONN_UP || (c->asking && conn_asking(n->conn) != 0))
        return -1;
    if (conn_send(n->conn, &c->req, c->argc, (const char *const *)c->argv, c->lens) != 0)
        return -1;
    c->node = n;
    n->cl->stats.commands++;
    return 0;
}

/* Route and write, or park: on the node's wait queue (sent once it is ready), or on the
 * cluster's later queue (no owner for the slot yet, or a pause was asked for). */
static void dispatch(struct cluster *cl, struct ccmd *c)
{
    if (cl->closing) {
        complete(cl, c, store_err_disconnected, NULL);
        return;
    }
    struct cnode *n = c->node;
    if (n == NULL) {
        size_t kl = 0;
        const char *key = cluster_cmd_key(c->argc, (const char *const *)c->argv, c->lens, &kl);
        if (key != NULL) {
            uint16_t idx = cl->route[cluster_key_slot(key, kl)];
            n = idx == CLUSTER_NO_NODE ? NULL : cl->nodes[idx];
        } else {
            for (int i = 0; i < cl->nnodes && n == NULL; i++)
                if (conn_state(cl->nodes[i]->conn) == CONN_UP && in_route(cl, cl->nodes[i]))
                    n = cl->nodes[i];
        }
    }
    if (n == NULL) {
        c->not_before = mono_ms() + RETRY_PAUSE_MS;
        q_push(&cl->later, c);
        cl->refresh_wanted = 1;
        try_refresh(cl);
        return;
    }
    if (write_cmd(n, c) == 0)
        return;
    c->node = n;
    q_push(&n->wait, c);
    node_connect(n); /* unless connecting, connected or waiting out its backoff */
}

/* Point one slot at addr now (a MOVED answer), before the re-read map confirms it. */
static struct cnode *moved_to(struct cluster *cl, unsigned slot, const struct cluster_addr *a)
{
    int idx = node_index(cl, a);
    if (idx < 0)
        return NULL;
    cl->route[slot] = (uint16_t)idx;
    return cl->nodes[idx];
}

static int is_err(const redisReply *r, const char *prefix)
{
    size_t l = strlen(prefix);
    return r->len >= l && strncmp(r->str, prefix, l) == 0;
}

static void on_cmd_reply(struct conn_req *req, redisReply *reply)
{
    struct ccmd *c = req->data;
    struct cluster *cl = c->node->cl;
    if (reply == NULL) { /* the connection is going away (conn.c takes no more writes) */
        complete(cl, c, store_err_disconnected, NULL);
        return;
    }
    if (reply->type != REDIS_REPLY_ERROR) {
        int64_t dt = mono_ms() - c->t0;
        cl->stats.latency_ms_sum += (uint64_t)(dt > 0 ? dt : 0);
        cl->stats.latency_n++;
        complete(cl, c, NULL, reply);
        return;
    }
    unsigned slot;
    struct cluster_addr a;
    int kind = cl->closing ? 0 : cluster_redirect_parse(reply->str, reply->len, &slot, &a);
    if (kind != 0 && c->hops < MAX_HOPS) {
        struct cnode *to = kind == 1 ? moved_to(cl, slot, &a) : NULL;
        if (kind == 2) {
            int idx = node_index(cl, &a);
            to = idx < 0 ? NULL : cl->nodes[idx];
        }
        if (to != NULL) {
            log_debug("redis cluster redirect", "kind=%s slot=%u to=%s:%d",
                      kind == 1 ? "moved" : "ask", slot, a.host, a.port);
            c->hops++;
            c->node = to;
            c->asking = kind == 2;
            if (kind == 1) {
                cl->refresh_wanted = 1;
                try_refresh(cl);
            }
            dispatch(cl, c);
            return;
        }
    }
    if (!cl->closing && c->hops < MAX_HOPS &&
        (is_err(reply, "TRYAGAIN") || is_err(reply, "CLUSTERDOWN") || is_err(reply, "LOADING") ||
         is_err(reply, "MASTERDOWN")) &&
        mono_ms() - c->t0 < cl->cmd_timeout_ms) {
        c->hops++;
        c->node = NULL; /* route again: the owner may change meanwhile */
        c->asking = 0;
        c->not_before = mono_ms() + RETRY_PAUSE_MS;
        q_push(&cl->later, c);
        cl->refresh_wanted = 1;
        return;
    }
    cl->stats.errors++;
    if (cl->on_error)
        cl->on_error(cl->arg, reply->str);
    complete(cl, c, store_err_server, reply);
}

int cluster_send(struct cluster *cl, store_cb *cb, void *arg, const struct store_script *sc,
                 int argc, char **argv, size_t *lens)
{
    if (!cl->up || cl->closing) {
        for (int i = 0; i < argc; i++)
            free(argv[i]);
        free(argv);
        free(lens);
        return -1;
    }
    struct ccmd *c = xcalloc(1, sizeof(*c));
    c->req.cb = on_cmd_reply;
    c->req.data = c;
    c->req.script = sc;
    c->cb = cb;
    c->arg = arg;
    c->argc = argc;
    c->argv = argv;
    c->lens = lens;
    c->t0 = mono_ms();
    cl->stats.pending++;
    dispatch(cl, c);
    return 0;
}

/* ---- the slot map -------------------------------------------------------------------- */

static void apply_map(struct cluster *cl, const struct cluster_map *m)
{
    int changed = !cl->have_map || m->nmasters != cl->map.nmasters ||
                  memcmp(m->owner, cl->map.owner, sizeof(m->owner)) != 0;
    for (int i = 0; !changed && i < m->nmasters; i++)
        changed = m->masters[i].port != cl->map.masters[i].port ||
                  strcmp(m->masters[i].host, cl->map.masters[i].host) != 0;
    int idx[CLUSTER_MAX_NODES];
    for (int i = 0; i < m->nmasters; i++)
        if ((idx[i] = node_index(cl, &m->masters[i])) < 0) {
            log_warn("redis cluster map has too many nodes; keeping the old one", "max=%d",
                     CLUSTER_MAX_NODES);
            return;
        }
    cl->map = *m;
    cl->have_map = 1;
    for (int s = 0; s < CLUSTER_SLOTS; s++)
        cl->route[s] = m->owner[s] == CLUSTER_NO_NODE ? CLUSTER_NO_NODE
                                                      : (uint16_t)idx[m->owner[s]];
    if (changed) {
        char list[512] = "";
        size_t off = 0;
        for (int i = 0; i < m->nmasters && off < sizeof(list) - 1; i++)
            off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s:%d", i ? "," : "",
                                    m->masters[i].host, m->masters[i].port);
        log_info("redis cluster map", "masters=%s", list);
    }
    for (int i = 0; i < cl->nnodes; i++) {
        struct cnode *n = cl->nodes[i];
        if (in_route(cl, n))
            node_connect(n);
        /* commands parked on a node that lost its slots go to the new owner */
        if (conn_state(n->conn) != CONN_UP) {
            for (struct ccmd *c = q_take_all(&n->wait), *next; c; c = next) {
                next = c->next;
                if (!c->asking)
                    c->node = NULL;
                dispatch(cl, c);
            }
        }
    }
    update_up(cl);
}

static void on_slots(struct conn_req *req, redisReply *reply)
{
    struct cnode *n = req->data;
    struct cluster *cl = n->cl;
    if (cl->refreshing == n)
        cl->refreshing = NULL;
    if (cl->closing)
        return;
    struct cluster_map *m = xmalloc(sizeof(*m));
    int covered = reply ? cluster_map_parse(m, reply, n->addr.host) : -1;
    if (covered > 0) {
        if (covered < CLUSTER_SLOTS)
            log_warn("redis cluster does not cover every slot", "covered=%d", covered);
        apply_map(cl, m);
    } else {
        log_warn("redis cluster slot map unreadable", "node=%s:%d err=\"%s\"", n->addr.host,
                 n->addr.port, reply && reply->type == REDIS_REPLY_ERROR ? reply->str : "none");
        cl->refresh_wanted = 1; /* the tick asks again */
    }
    free(m);
    if (cl->refresh_wanted)
        try_refresh(cl);
}

/* Ask one ready node for CLUSTER SLOTS (masters of the map first); with none ready, connect
 * every known node (seeds included) and ask the first that comes up. */
static void try_refresh(struct cluster *cl)
{
    if (cl->closing || cl->stopped || cl->refreshing || !cl->refresh_wanted)
        return;
    struct cnode *pick = NULL;
    for (int i = 0; i < cl->nnodes && pick == NULL; i++)
        if (conn_state(cl->nodes[i]->conn) == CONN_UP && in_route(cl, cl->nodes[i]))
            pick = cl->nodes[i];
    for (int i = 0; i < cl->nnodes && pick == NULL; i++)
        if (conn_state(cl->nodes[i]->conn) == CONN_UP)
            pick = cl->nodes[i];
    if (pick == NULL) {
        for (int i = 0; i < cl->nnodes; i++)
            node_connect(cl->nodes[i]);
        return;
    }
    cl->slots_req.cb = on_slots;
    cl->slots_req.data = pick;
    cl->slots_req.script = NULL;
    if (conn_sendf(pick->conn, &cl->slots_req, "CLUSTER SLOTS") != 0)
        return;
    cl->refresh_wanted = 0;
    cl->refreshing = pick;
    cl->refresh_t0 = mono_ms();
}

/* ---- node connections (store/conn.c) ------------------------------------------------ */

/* A node we need: a master of the map, or any node while there is no map. */
static int wanted(const struct cluster *cl, const struct cnode *n)
{
    return !cl->have_map || in_route(cl, n) || n->wait.head != NULL;
}

static void node_connect(struct cnode *n)
{
    if (!n->cl->closing && !n->cl->stopped)
        conn_connect(n->conn); /* unless connecting, connected or waiting out its backoff */
}

/* Past its handshake: what waited for it is written, and the map may be read from it. */
static void node_up(struct cnode *n)
{
    struct cluster *cl = n->cl;
    for (struct ccmd *c = q_take_all(&n->wait), *next; c; c = next) {
        next = c->next;
        dispatch(cl, c);
    }
    if (!cl->have_map)
        cl->refresh_wanted = 1;
    try_refresh(cl);
    update_up(cl);
}

/* An allkeys-* policy on a master with fatal_checks: the cluster stops (the owner exits). */
static void node_down(struct cnode *n)
{
    struct cluster *cl = n->cl;
    if (cl->refreshing == n)
        cl->refreshing = NULL;
    if (cl->closing || cl->stopped)
        return;
    if (conn_fatal(n->conn) != NULL && cl->fatal_checks) {
        cl->stopped = 1;
        cl->up = 0;
        cl->on_state(cl->arg, 0);
        return;
    }
    if (wanted(cl, n))
        conn_retry(n->conn);
    cl->refresh_wanted = 1; /* a lost master may have been replaced */
    try_refresh(cl);
    update_up(cl);
}

static void on_node_event(void *arg, struct conn *conn, int up)
{
    struct cnode *n = arg;
    if (n->cl->fatal == NULL)
        n->cl->fatal = conn_fatal(conn); /* cluster_fatal: refused even without fatal_checks */
    if (up && !n->cl->closing && !n->cl->stopped)
        node_up(n);
    else if (!up)
        node_down(n);
}

/* ---- the tick: waiting and paused commands ------------------------------------------ */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct cluster *cl = arg;
    int64_t now = mono_ms();
    for (int i = 0; i < cl->nnodes; i++) {
        struct cnode *n = cl->nodes[i];
        /* accepted but never written: give up after the command timeout, as if lost (a
         * written command or a handshake past it: conn.c drops that connection) */
        for (struct ccmd *c = n->wait.head, *next; c; c = next) {
            next = c->next;
            if (now - c->t0 > cl->cmd_timeout_ms) {
                q_remove(&n->wait, c);
                cl->stats.timeouts++;
                complete(cl, c, store_err_disconnected, NULL);
            }
        }
    }
    struct ccmd *keep = NULL, **kt = &keep;
    for (struct ccmd *c = q_take_all(&cl->later), *next; c; c = next) {
        next = c->next;
        c->next = NULL;
        if (now - c->t0 > cl->cmd_timeout_ms) {
            cl->stats.timeouts++;
            complete(cl, c, store_err_disconnected, NULL);
        } else if (now >= c->not_before && cl->have_map) {
            dispatch(cl, c);
        } else {
            *kt = c;
            kt = &c->next;
        }
    }
    for (struct ccmd *c = keep, *next; c; c = next) {
        next = c->next;
        q_push(&cl->later, c);
    }
    /* down (a master lost, its replica not promoted yet): re-read the map until it names a
     * master we can reach */
    if (!cl->up && cl->have_map && now - cl->refresh_t0 >= DOWN_REFRESH_MS)
        cl->refresh_wanted = 1;
    try_refresh(cl);
}

/* ---- lifecycle ----------------------------------------------------------------------- */

struct cluster *cluster_new(struct event_base *base, const struct cluster_opts *o)
{
    struct cluster *cl = xcalloc(1, sizeof(*cl));
    const char *why = NULL;
    if (cluster_url_parse(&cl->url, o->url, &why) != 0) {
        log_err("bad redis url", "setting=STATUSRELAY_REDIS_URL reason=\"%s\"", why);
        free(cl);
        return NULL;
    }
    cl->base = base;
    cl->cmd_timeout_ms = o->cmd_timeout_ms;
    cl->fatal_checks = o->fatal_checks;
    cl->on_state = o->on_state;
    cl->on_error = o->on_error;
    cl->arg = o->arg;
    for (int s = 0; s < CLUSTER_SLOTS; s++)
        cl->route[s] = CLUSTER_NO_NODE;
    for (int i = 0; i < cl->url.nseeds; i++)
        node_index(cl, &cl->url.seeds[i]);
    cl->tick_ev = event_new(base, -1, EV_PERSIST, on_tick, cl);
    return cl;
}

void cluster_start(struct cluster *cl)
{
    struct timeval tv = {0, TICK_MS * 1000};
    evtimer_add(cl->tick_ev, &tv);
    cl->refresh_wanted = 1;
    for (int i = 0; i < cl->nnodes; i++)
        node_connect(cl->nodes[i]);
}

void cluster_free(struct cluster *cl)
{
    if (cl == NULL)
        return;
    cl->closing = 1;
    cl->up = 0;
    for (int i = 0; i < cl->nnodes; i++) {
        struct cnode *n = cl->nodes[i];
        conn_free(n->conn); /* completes written commands with NULL replies */
        n->conn = NULL;
        for (struct ccmd *c = q_take_all(&n->wait), *next; c; c = next) {
            next = c->next;
            complete(cl, c, store_err_disconnected, NULL);
        }
    }
    for (struct ccmd *c = q_take_all(&cl->later), *next; c; c = next) {
        next = c->next;
        complete(cl, c, store_err_disconnected, NULL);
    }
    for (int i = 0; i < cl->nnodes; i++)
        free(cl->nodes[i]);
    if (cl->tick_ev)
        event_free(cl->tick_ev);
    cluster_url_cleanup(&cl->url);
    free(cl);
}

const char *cluster_fatal(const struct cluster *cl)
{
    return cl->fatal;
}

void cluster_stats_get(const struct cluster *cl, struct store_stats *out)
{
    *out = cl->stats;
    struct conn_counts cc = {0, 0};
    for (int i = 0; i < cl->nnodes; i++)
        conn_counts_add(cl->nodes[i]->conn, &cc);
    out->reconnects += cc.reconnects;
    out->timeouts += cc.timeouts;
}

int cluster_slot_node(const struct cluster *cl, unsigned slot, char *buf, size_t n)
{
    if (!cl->have_map || slot >= CLUSTER_SLOTS || cl->route[slot] == CLUSTER_NO_NODE)
        return -1;
    const struct cluster_addr *a = &cl->nodes[cl->route[slot]]->addr;
    snprintf(buf, n, "%s:%d", a->host, a->port);
    return 0;
}
