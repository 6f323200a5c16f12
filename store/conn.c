/* conn.c - see conn.h. The state changes in set_state; the connection ends in gone() (once
 * per connection). runs on: core thread. */
#include "store/conn.h"
#include "store/command.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_MS 100       /* how often the timeouts are checked */
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000

struct conn {
    struct event_base *base;
    struct conn_opts o;
    char addr[300];          /* host:port or the socket path */
    redisAsyncContext *ac;   /* non-NULL from connect until on_disconnect / gone */
    enum conn_state state;
    struct conn_req *head, *tail; /* written, unanswered: replies come in this order */
    struct event *retry_ev, *watch_ev;
    int64_t backoff_ms, hs_t0; /* hs_t0: connect + handshake share one deadline */
    int failing;             /* a connect failure was logged; the next ones are debug */
    int closing;             /* conn_free runs: no events, no reconnects */
    int aof;                 /* CONFIG GET appendonly said yes */
    const char *fatal;
    struct conn_counts counts;
};

static const char fatal_allkeys[] =
    "redis maxmemory-policy allkeys-* would evict queues; use noeviction or volatile-*";

static void set_state(struct conn *c, enum conn_state st)
{
    c->state = st;
    if (st == CONN_UP) {
        c->backoff_ms = 0;
        c->failing = 0;
    }
}

/* The connection is over (it is freed, or hiredis frees it): tell the owner once. */
static void gone(struct conn *c)
{
    c->ac = NULL;
    set_state(c, CONN_DOWN);
    if (!c->closing)
        c->o.on_event(c->o.arg, c, 0);
}

/* ---- written requests and replies ----------------------------------------------------- */

static void fifo_push(struct conn *c, struct conn_req *r)
{
    r->_next = NULL;
    r->_sent = mono_ms();
    if (c->tail)
        c->tail->_next = r;
    else
        c->head = r;
    c->tail = r;
}

static void fifo_unlink(struct conn *c, struct conn_req *r)
{
    struct conn_req **pp = &c->head, *prev = NULL;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->_next;
    }
    if (*pp == NULL)
        return;
    *pp = r->_next;
    if (c->tail == r)
        c->tail = prev;
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata);

/* NOSCRIPT: the same argv with (EVALSHA sha) replaced by (EVAL source). */
static int write_eval(struct conn *c, struct conn_req *req)
{
    int n = req->_argc;
    const char **argv = xmalloc(sizeof(*argv) * (size_t)n);
    size_t *lens = xmalloc(sizeof(*lens) * (size_t)n);
    for (int i = 0; i < n; i++) {
        argv[i] = req->_argv[i];
        lens[i] = req->_lens ? req->_lens[i] : strlen(req->_argv[i]);
    }
    argv[0] = "EVAL", lens[0] = 4;
    argv[1] = req->script->src, lens[1] = req->script->len;
    int rc = redisAsyncCommandArgv(c->ac, on_reply, req, n, argv, lens);
    free(argv);
    free(lens);
    if (rc != REDIS_OK)
        return -1;
    fifo_push(c, req);
    return 0;
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct conn_req *req = privdata;
    struct conn *c = ac->data;
    redisReply *reply = r;
    fifo_unlink(c, req);
    if (reply == NULL) { /* the connection is going away: no more writes to it */
        if (c->state != CONN_DOWN)
            set_state(c, CONN_DOWN);
    } else if (reply->type == REDIS_REPLY_ERROR && req->script && req->_argc >= 2 &&
               !req->_evaled && c->state == CONN_UP && strncmp(reply->str, "NOSCRIPT", 8) == 0) {
        req->_evaled = 1; /* this master has not seen the script: EVAL loads it */
        if (write_eval(c, req) == 0)
            return;
    }
    req->cb(req, reply);
}

int conn_send(struct conn *c, struct conn_req *req, int argc, const char *const *argv,
              const size_t *lens)
{
    if (c->state != CONN_UP || c->ac == NULL)
        return -1;
    if (redisAsyncCommandArgv(c->ac, on_reply, req, argc, (const char **)argv, lens) != REDIS_OK)
        return -1;
    req->_argc = argc;
    req->_argv = argv;
    req->_lens = lens;
    req->_evaled = 0;
    fifo_push(c, req);
    return 0;
}

int conn_vsendf(struct conn *c, struct conn_req *req, const char *fmt, va_list ap)
{
    if (c->state != CONN_UP || c->ac == NULL)
        return -1;
    if (redisvAsyncCommand(c->ac, on_reply, req, fmt, ap) != REDIS_OK)
        return -1;
    req->_argc = 0; /* no argv kept: never resent as EVAL */
    fifo_push(c, req);
    return 0;
}

int conn_sendf(struct conn *c, struct conn_req *req, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = conn_vsendf(c, req, fmt, ap);
    va_end(ap);
    return r;
}

int conn_asking(struct conn *c)
{
    if (c->state != CONN_UP || c->ac == NULL)
        return -1;
    return redisAsyncCommand(c->ac, NULL, NULL, "ASKING") == REDIS_OK ? 0 : -1;
}

/* ---- the handshake: AUTH, SELECT, checks, PING ---------------------------------------- */

void conn_fail(struct conn *c, const char *why)
{
    log_err("redis handshake failed", "node=%s reason=\"%s\"", c->addr, why);
    set_state(c, CONN_DOWN); /* no more writes; gone() follows the close */
    c->hs_t0 = mono_ms();     /* the close gets a command timeout too (on_watch) */
    if (c->ac)
        redisAsyncDisconnect(c->ac);
}

/* A handshake reply still matters: the connection is in its handshake. */
static struct conn *hs_conn(void *privdata, redisReply *r)
{
    struct conn *c = privdata;
    return r != NULL && c->state == CONN_HANDSHAKE ? c : NULL;
}

static void on_auth_or_select(redisAsyncContext *ac, void *r, void *privdata)
{
    struct conn *c = hs_conn(privdata, r);
    redisReply *reply = r;
    if (c != NULL && reply->type == REDIS_REPLY_ERROR)
        conn_fail(c, reply->str);
}

static void on_policy(redisAsyncContext *ac, void *r, void *privdata)
{
    struct conn *c = hs_conn(privdata, r);
    redisReply *reply = r;
    if (c == NULL)
        return;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        reply->element[1]->type != REDIS_REPLY_STRING) {
        log_warn("redis CONFIG GET refused; eviction policy not checked", "node=%s", c->addr);
        return;
    }
    const char *policy = reply->element[1]->str;
    if (strncmp(policy, "allkeys-", 8) == 0) {
        c->fatal = fatal_allkeys;
        log_err("refusing redis with an allkeys eviction policy", "node=%s policy=%s", c->addr,
                policy);
        if (c->o.fatal_checks)
            conn_fail(c, c->fatal); /* on_event(0) with conn_fatal set: the owner stops */
    }
}

static void on_aof(redisAsyncContext *ac, void *r, void *privdata)
{
    struct conn *c = hs_conn(privdata, r);
    redisReply *reply = r;
    if (c != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements >= 2 &&
        reply->element[1]->type == REDIS_REPLY_STRING)
        c->aof = strcmp(reply->element[1]->str, "yes") == 0;
}

/* Persistence: AOF off and no RDB save points means a Redis restart loses everything. */
static void on_save(redisAsyncContext *ac, void *r, void *privdata)
{
    struct conn *c = hs_conn(privdata, r);
    redisReply *reply = r;
    if (c == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        reply->element[1]->type != REDIS_REPLY_STRING || c->aof)
        return;
    if (reply->element[1]->str[0] == '\0')
        log_warn("redis runs WITHOUT persistence (appendonly no, save \"\"): a Redis restart "
                 "loses every event and delivery; set appendonly yes",
                 "node=%s", c->addr);
    else
        log_warn("redis has no AOF (appendonly no): a crash loses writes since the last RDB "
                 "snapshot; set appendonly yes",
                 "node=%s", c->addr);
}

/* Memory: a request's hash holds its record and facts (several hundred bytes each); with
 * Redis's default hash-max-listpack-value (64) it is a hashtable while the request is watched,
 * about 1 KB more than the compact encoding (once its watch has ended the record pass packs it,
 * store/rec.h; docs/operations.md "Redis memory"). Said once per connection,
 * only when the value is readable and lower; nothing changes on its account. */
#define LISTPACK_ADVICE 2048

static void on_listpack(redisAsyncContext *ac, void *r, void *privdata)
{
    struct conn *c = hs_conn(privdata, r);
    redisReply *reply = r;
    if (c == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        reply->element[1]->type != REDIS_REPLY_STRING)
        return;
    long v = strtol(reply->element[1]->str, NULL, 10);
    if (v > 0 && v < LISTPACK_ADVICE)
        log_info("redis hash-max-listpack-value is low: the hashes of watched requests are not "
                 "compact; 2048 saves about 1 KB per watched request (ended ones are packed "
                 "either way: docs/operations.md \"Redis memory\")",
                 "node=%s value=%ld", c->addr, v);
}

static void on_ping(redisAsyncContext *ac, void *r, void *privdata)
{
    struct conn *c = hs_conn(privdata, r);
    redisReply *reply = r;
    if (c == NULL)
        return;
    if (reply->type == REDIS_REPLY_ERROR) {
        conn_fail(c, reply->str);
        return;
    }
    set_state(c, CONN_UP);
    c->o.on_event(c->o.arg, c, 1);
}

static void start_handshake(struct conn *c)
{
    redisAsyncContext *ac = c->ac;
    set_state(c, CONN_HANDSHAKE);
    if (c->o.password && c->o.user) /* Redis 6 ACL user */
        redisAsyncCommand(ac, on_auth_or_select, c, "AUTH %s %s", c->o.user, c->o.password);
    else if (c->o.password)
        redisAsyncCommand(ac, on_auth_or_select, c, "AUTH %s", c->o.password);
    if (c->o.db > 0)
        redisAsyncCommand(ac, on_auth_or_select, c, "SELECT %d", c->o.db);
    redisAsyncCommand(ac, on_policy, c, "CONFIG GET maxmemory-policy");
    if (c->o.check_persistence) {
        redisAsyncCommand(ac, on_aof, c, "CONFIG GET appendonly");
        redisAsyncCommand(ac, on_save, c, "CONFIG GET save");
        redisAsyncCommand(ac, on_listpack, c, "CONFIG GET hash-max-listpack-value");
    }
    redisAsyncCommand(ac, on_ping, c, "PING");
}

/* ---- connecting, reconnecting, timeouts ----------------------------------------------- */

/* One warning per run of failed connects (until a connection comes up); the rest are debug. */
static void log_connect_failed(struct conn *c, const char *err)
{
    char msg[64];
    snprintf(msg, sizeof(msg), "%s connect failed", c->o.what);
    if (!c->failing)
        log_warn(msg, "node=%s err=\"%s\"", c->addr, err);
    else
        log_debug(msg, "node=%s err=\"%s\"", c->addr, err);
    c->failing = 1;
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    struct conn *c = ac->data;
    char msg[64];
    if (status != REDIS_OK) { /* hiredis frees the context after a failed connect */
        log_connect_failed(c, ac->errstr);
        gone(c);
        return;
    }
    snprintf(msg, sizeof(msg), "%s connected", c->o.what);
    log_info(msg, "node=%s", c->addr);
    start_handshake(c);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    struct conn *c = ac->data;
    if (c->closing) {
        c->ac = NULL;
        return;
    }
    if (!(c->fatal && c->o.fatal_checks)) { /* a refused policy was logged already */
        char msg[64];
        snprintf(msg, sizeof(msg), "%s disconnected", c->o.what);
        log_warn(msg, "node=%s err=\"%s\"", c->addr, status == REDIS_OK ? "closed" : ac->errstr);
        c->counts.reconnects++;
    }
    gone(c);
}

void conn_connect(struct conn *c)
{
    if (c->closing || c->ac != NULL || evtimer_pending(c->retry_ev, NULL))
        return;
    redisAsyncContext *ac = c->o.unix_path ? redisAsyncConnectUnix(c->o.unix_path)
                                           : redisAsyncConnect(c->o.host, c->o.port);
    if (ac == NULL || ac->err) {
        log_connect_failed(c, ac ? ac->errstr : "oom");
        if (ac)
            redisAsyncFree(ac);
        conn_retry(c);
        return;
    }
    ac->data = c;
    c->ac = ac;
    c->fatal = NULL;
    c->aof = 0;
    c->hs_t0 = mono_ms();
    set_state(c, CONN_CONNECTING);
    redisLibeventAttach(ac, c->base);
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    conn_connect(arg);
}

void conn_retry(struct conn *c)
{
    if (c->closing || c->ac != NULL || evtimer_pending(c->retry_ev, NULL))
        return;
    c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : BACKOFF_FIRST_MS;
    if (c->backoff_ms > BACKOFF_MAX_MS)
        c->backoff_ms = BACKOFF_MAX_MS;
    int64_t d = c->backoff_ms / 2 + (int64_t)jitter_rand((uint64_t)c->backoff_ms / 2 + 1);
    struct timeval tv = {d / 1000, (d % 1000) * 1000};
    evtimer_add(c->retry_ev, &tv);
}

/* A command unanswered past the timeout, or a connect + handshake taking longer: drop the
 * connection so every callback completes. */
static void on_watch(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    int64_t now = mono_ms(), limit = c->o.cmd_timeout_ms;
    redisAsyncContext *ac = c->ac;
    if (ac == NULL || !((c->head && now - c->head->_sent > limit) ||
                        (c->state != CONN_UP && now - c->hs_t0 > limit)))
        return;
    log_warn("redis command timed out, reconnecting", "node=%s timeout_ms=%lld", c->addr,
             (long long)limit);
    c->counts.timeouts++;
    set_state(c, CONN_DOWN);
    /* redisAsyncFree, not redisAsyncDisconnect: that one waits for the pending replies,
     * which a hung Redis (SIGSTOP, a stalled host) never sends. Free completes them now with
     * NULL replies and, on a connected context, runs on_disconnect. */
    redisAsyncFree(ac);
    if (c->ac == ac) /* no on_disconnect for a connect still pending */
        gone(c);
}

/* ---- lifecycle ------------------------------------------------------------------------ */

struct conn *conn_new(struct event_base *base, const struct conn_opts *o)
{
    struct conn *c = xcalloc(1, sizeof(*c));
    c->base = base;
    c->o = *o;
    if (o->unix_path)
        snprintf(c->addr, sizeof(c->addr), "%s", o->unix_path);
    else
        snprintf(c->addr, sizeof(c->addr), "%s:%d", o->host, o->port);
    c->retry_ev = evtimer_new(base, on_retry, c);
    c->watch_ev = event_new(base, -1, EV_PERSIST, on_watch, c);
    struct timeval tv = {0, WATCH_MS * 1000};
    evtimer_add(c->watch_ev, &tv);
    return c;
}

void conn_free(struct conn *c)
{
    if (c == NULL)
        return;
    c->closing = 1;
    set_state(c, CONN_DOWN);
    if (c->ac) {
        redisAsyncContext *ac = c->ac;
        c->ac = NULL;
        redisAsyncFree(ac); /* completes written requests with NULL replies */
    }
    event_free(c->retry_ev);
    event_free(c->watch_ev);
    free(c);
}

enum conn_state conn_state(const struct conn *c)
{
    return c->state;
}

const char *conn_fatal(const struct conn *c)
{
    return c->fatal;
}

const char *conn_addr(const struct conn *c)
{
    return c->addr;
}

void conn_counts_add(const struct conn *c, struct conn_counts *sum)
{
    sum->reconnects += c->counts.reconnects;
    sum->timeouts += c->counts.timeouts;
}
