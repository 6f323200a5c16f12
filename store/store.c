/* store.c - see store.h. runs on: core thread. */
#include "store/store.h"
#include "store/cluster.h"
#include "store/cluster_slot.h"
#include "store/keys.h"
#include "store/redis_url.h"
#include "relay/common/embedded.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char store_err_disconnected[] = "redis_disconnected";
const char store_err_server[] = "redis_error";

enum store_state { ST_DOWN = 0, ST_CONNECTING, ST_HANDSHAKE, ST_READY, ST_CLOSING };

struct listener {
    store_state_cb *cb;
    void *arg;
    struct listener *next;
};

/* One accepted command. Replies arrive in order, so the FIFO head is the oldest. */
struct pending {
    struct pending *next;
    struct store *s;
    store_cb *cb;
    void *arg;
    int64_t t0;
    /* for EVALSHA: the argv to resend as EVAL on NOSCRIPT */
    const struct store_script *script;
    int argc;
    char **argv;
    size_t *lens;
};

struct store {
    struct event_base *base;
    redisAsyncContext *ac;
    enum store_state state;
    struct redis_url url; /* host or unix_path, user, password, port, db */
    char tag[KEY_TAG_MAX];
    unsigned nparts;
    char (*ptags)[KEY_TAG_MAX]; /* nparts tags (ptags[0] = tag when nparts = 1) */
    char (*wtags)[2 * KEY_TAG_MAX]; /* store_wh_tag */
    struct event *check_ev;     /* cluster: the partition check again after a failure */
    char fatal_buf[200];
    int64_t cmd_timeout_ms;
    int fatal_checks;
    int aof;
    const char *fatal;
    struct listener *listeners;
    struct pending *head, *tail;
    struct event *retry_ev, *watchdog_ev;
    int64_t backoff_ms;
    struct store_stats stats;
    char refused[160];    /* last write refusal (OOM / READONLY / MISCONF), "" when none */
    int64_t refused_at;   /* mono ms of it */
    struct cluster *cluster; /* redis-cluster:// URL: every command goes through it */
};

static void connect_now(struct store *s);
static void set_state(struct store *s, enum store_state st);
static void check_partitions(struct store *s);
static void notify(struct store *s, int up);

/* ---- write refusals: Redis answers but will not write (readiness) --------------------- */

/* Errors saying that no write will succeed for now, whatever the command: out of memory
 * under noeviction (OOM), a replica (READONLY), a failed RDB save with
 * stop-writes-on-bgsave-error (MISCONF). Scripts report them inside their own error text. */
static void note_refusal(struct store *s, const char *msg)
{
    static const char *const kinds[] = {"OOM ", "READONLY ", "MISCONF "};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        const char *hit = strstr(msg, kinds[i]);
        if (hit != NULL && (hit == msg || hit[-1] == '-' || hit[-1] == ' ')) {
            snprintf(s->refused, sizeof(s->refused), "%.*s", (int)strcspn(hit, "\r\n"), hit);
            s->refused_at = mono_ms();
            return;
        }
    }
}

const char *store_write_refused(const struct store *s)
{
    if (s->refused[0] == '\0' || mono_ms() - s->refused_at > STORE_REFUSAL_MEMORY_MS)
        return NULL;
    return s->refused;
}

void store_write_ok(struct store *s)
{
    s->refused[0] = '\0';
}

/* ---- pending FIFO and completion ----------------------------------------------------- */

static void pending_free(struct pending *p)
{
    if (p->argv) {
        for (int i = 0; i < p->argc; i++)
            free(p->argv[i]);
        free(p->argv);
        free(p->lens);
    }
    free(p);
}

static void unlink_pending(struct store *s, struct pending *p)
{
    struct pending **pp = &s->head, *prev = NULL;
    while (*pp && *pp != p) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp == NULL)
        return;
    *pp = p->next;
    if (s->tail == p)
        s->tail = prev;
    s->stats.pending--;
}

static int send_pending(struct store *s, struct pending *p, int argc, const char **argv,
                        const size_t *lens);

/* A command was handed to hiredis: its reply comes after every earlier one. */
static void fifo_append(struct store *s, struct pending *p)
{
    if (s->tail)
        s->tail->next = p;
    else
        s->head = p;
    s->tail = p;
    s->stats.pending++;
    s->stats.commands++;
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct pending *p = privdata;
    struct store *s = p->s;
    redisReply *reply = r;
    unlink_pending(s, p);
    const char *err = NULL;
    if (reply == NULL)
        err = store_err_disconnected;
    else if (reply->type == REDIS_REPLY_ERROR) {
        err = store_err_server;
        s->stats.errors++;
        note_refusal(s, reply->str);
        if (p->script && strncmp(reply->str, "NOSCRIPT", 8) == 0 && s->state == ST_READY) {
            /* resend as EVAL: replace argv[0..1] (EVALSHA sha) with (EVAL src) */
            const char *argv[p->argc];
            size_t lens[p->argc];
            for (int i = 0; i < p->argc; i++)
                argv[i] = p->argv[i], lens[i] = p->lens[i];
            argv[0] = "EVAL", lens[0] = 4;
            argv[1] = p->script->src, lens[1] = p->script->len;
            p->script = NULL; /* once */
            p->next = NULL;
            if (send_pending(s, p, p->argc, argv, lens) == 0)
                return;
        }
    } else {
        int64_t dt = mono_ms() - p->t0;
        s->stats.latency_ms_sum += (uint64_t)dt;
        s->stats.latency_n++;
    }
    if (p->cb)
        p->cb(p->arg, err, reply);
    pending_free(p);
}

static int send_pending(struct store *s, struct pending *p, int argc, const char **argv,
                        const size_t *lens)
{
    if (s->ac == NULL)
        return -1;
    p->s = s;
    p->t0 = mono_ms();
    if (redisAsyncCommandArgv(s->ac, on_reply, p, argc, argv, lens) != REDIS_OK)
        return -1;
    fifo_append(s, p);
    return 0;
}

static int raw_cmdargv(struct store *s, store_cb *cb, void *arg, int argc, const char **argv,
                       const size_t *lens)
{
    struct pending *p = xcalloc(1, sizeof(*p));
    p->cb = cb;
    p->arg = arg;
    if (send_pending(s, p, argc, argv, lens) != 0) {
        free(p);
        return -1;
    }
    return 0;
}

static int raw_cmd(struct store *s, store_cb *cb, void *arg, const char *fmt, va_list ap)
{
    if (s->ac == NULL)
        return -1;
    struct pending *p = xcalloc(1, sizeof(*p));
    p->s = s;
    p->cb = cb;
    p->arg = arg;
    p->t0 = mono_ms();
    if (redisvAsyncCommand(s->ac, on_reply, p, fmt, ap) != REDIS_OK) {
        free(p);
        return -1;
    }
    fifo_append(s, p);
    return 0;
}

static int internal_cmd(struct store *s, store_cb *cb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = raw_cmd(s, cb, s, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- Redis Cluster: the same calls through store/cluster.c ----------------------------- */

/* argv copied into malloc'd strings (cluster_send takes them). */
static int cluster_cmdargv(struct store *s, store_cb *cb, void *arg,
                           const struct store_script *sc, int argc, const char **argv,
                           const size_t *lens)
{
    char **av = xmalloc(sizeof(char *) * (size_t)argc);
    size_t *al = xmalloc(sizeof(size_t) * (size_t)argc);
    for (int i = 0; i < argc; i++) {
        al[i] = lens ? lens[i] : strlen(argv[i]);
        av[i] = xstrndup(argv[i], al[i]);
    }
    return cluster_send(s->cluster, cb, arg, sc, argc, av, al);
}

static int cluster_cmd(struct store *s, store_cb *cb, void *arg, const char *fmt, va_list ap)
{
    char *buf = NULL, **av;
    size_t *al;
    int len = redisvFormatCommand(&buf, fmt, ap);
    int argc = len > 0 ? cluster_resp_split(buf, (size_t)len, &av, &al) : -1;
    if (buf)
        redisFreeCommand(buf);
    if (argc < 0)
        return -1;
    return cluster_send(s->cluster, cb, arg, NULL, argc, av, al);
}

static void on_cluster_error(void *arg, const char *msg)
{
    note_refusal(arg, msg); /* OOM / READONLY / MISCONF on a master: readiness, as above */
}

static void on_cluster_state(void *arg, int up)
{
    struct store *s = arg;
    if (!up && s->state != ST_READY) {
        s->state = ST_DOWN;
        if (s->fatal == NULL && cluster_fatal(s->cluster) != NULL) {
            s->fatal = cluster_fatal(s->cluster);
            notify(s, 0); /* a fatal check failed: the owner stops */
        }
        return;
    }
    s->fatal = cluster_fatal(s->cluster);
    if (up)
        check_partitions(s); /* ready once the partition count is checked */
    else
        set_state(s, ST_DOWN);
}

int store_cmd(struct store *s, store_cb *cb, void *arg, const char *fmt, ...)
{
    if (s->state != ST_READY)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int r = s->cluster ? cluster_cmd(s, cb, arg, fmt, ap) : raw_cmd(s, cb, arg, fmt, ap);
    va_end(ap);
    return r;
}

int store_cmdargv(struct store *s, store_cb *cb, void *arg, int argc, const char **argv,
                  const size_t *lens)
{
    if (s->state != ST_READY)
        return -1;
    if (s->cluster)
        return cluster_cmdargv(s, cb, arg, NULL, argc, argv, lens);
    return raw_cmdargv(s, cb, arg, argc, argv, lens);
}

void store_script_init(struct store_script *sc, const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "store/%s.lua", name);
    const struct embedded_file *f = embedded_find(path);
    if (f == NULL) {
        log_err("embedded script missing", "script=%s", path);
        abort();
    }
    sc->name = name;
    sc->src = (const char *)f->data;
    sc->len = f->len;
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA1(f->data, f->len, md);
    for (int i = 0; i < SHA_DIGEST_LENGTH; i++)
        snprintf(sc->sha + 2 * i, 3, "%02x", md[i]);
}

int store_eval(struct store *s, const struct store_script *sc, store_cb *cb, void *arg,
               int nkeys, int argc, const char **argv, const size_t *lens)
{
    if (s->state != ST_READY)
        return -1;
    int n = argc + 3;
    struct pending *p = xcalloc(1, sizeof(*p));
    p->cb = cb;
    p->arg = arg;
    p->script = sc;
    p->argc = n;
    p->argv = xmalloc(sizeof(char *) * (size_t)n);
    p->lens = xmalloc(sizeof(size_t) * (size_t)n);
    char nk[16];
    int nkl = snprintf(nk, sizeof(nk), "%d", nkeys);
    p->argv[0] = xstrdup("EVALSHA"), p->lens[0] = 7;
    p->argv[1] = xstrndup(sc->sha, 40), p->lens[1] = 40;
    p->argv[2] = xstrndup(nk, (size_t)nkl), p->lens[2] = (size_t)nkl;
    for (int i = 0; i < argc; i++) {
        size_t l = lens ? lens[i] : strlen(argv[i]);
        p->argv[i + 3] = xstrndup(argv[i], l);
        p->lens[i + 3] = l;
    }
    if (s->cluster) { /* the cluster takes the argv */
        int r = cluster_send(s->cluster, cb, arg, sc, n, p->argv, p->lens);
        free(p);
        return r;
    }
    if (send_pending(s, p, n, (const char **)p->argv, p->lens) != 0) {
        pending_free(p);
        return -1;
    }
    return 0;
}

/* ---- connection lifecycle ------------------------------------------------------------ */

static void notify(struct store *s, int up)
{
    for (struct listener *l = s->listeners; l; l = l->next)
        l->cb(l->arg, up);
}

static void set_state(struct store *s, enum store_state st)
{
    enum store_state old = s->state;
    s->state = st;
    if (st == ST_READY && old != ST_READY) {
        s->backoff_ms = 0;
        log_info("redis ready", "db=%d", s->url.db);
        notify(s, 1);
    } else if (old == ST_READY && st != ST_READY) {
        notify(s, 0);
    }
}

static void schedule_retry(struct store *s)
{
    if (s->state == ST_CLOSING)
        return;
    s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : 100;
    if (s->backoff_ms > 5000)
        s->backoff_ms = 5000;
    int64_t d = s->backoff_ms / 2 + (int64_t)jitter_rand((uint64_t)s->backoff_ms / 2 + 1);
    struct timeval tv = {d / 1000, (d % 1000) * 1000};
    evtimer_add(s->retry_ev, &tv);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    connect_now(arg);
}

static void fail_handshake(struct store *s, const char *why)
{
    log_err("redis handshake failed", "reason=\"%s\"", why);
    if (s->ac)
        redisAsyncDisconnect(s->ac);
}

/* ---- the recorded partition count (store/partitions.lua, docs/partitions.md) ---------- */

static void on_check_retry(evutil_socket_t fd, short what, void *arg)
{
    struct store *s = arg;
    if (s->cluster && s->state != ST_READY && s->state != ST_CLOSING)
        check_partitions(s);
}

static void on_partitions(void *arg, const char *err, redisReply *r)
{
    struct store *s = arg;
    if (err == store_err_disconnected || s->state == ST_CLOSING)
        return; /* the next connection checks again */
    if (err != NULL || r->type != REDIS_REPLY_STRING) {
        const char *why = err != NULL ? r->str : "unexpected reply";
        log_err("redis partition check failed", "reason=\"%s\"", why);
        if (s->cluster == NULL) {
            fail_handshake(s, why); /* reconnect and try again */
            return;
        }
        struct timeval tv = {1, 0};
        evtimer_add(s->check_ev, &tv);
        return;
    }
    char *end;
    unsigned long rec = strtoul(r->str, &end, 10);
    if (*end != '\0' || rec != s->nparts) {
        snprintf(s->fatal_buf, sizeof(s->fatal_buf),
                 "STATUSRELAY_PARTITIONS=%u but this deployment's Redis has %.20s partition(s) "
                 "(the count is fixed for a deployment: docs/partitions.md)",
                 s->nparts, r->str);
        log_err("refusing redis: partition count differs from the deployment's",
                "partitions=%u recorded=%.20s", s->nparts, r->str);
        s->fatal = s->fatal_buf;
        if (s->cluster == NULL) {
            fail_handshake(s, s->fatal); /* on_disconnect tells the owner, who stops */
        } else {
            s->state = ST_DOWN;
            notify(s, 0);
        }
        return;
    }
    set_state(s, ST_READY);
}

/* EVAL store/partitions.lua on the deployment tag's node, before anything else runs. */
static void check_partitions(struct store *s)
{
    static struct store_script sc;
    if (sc.name == NULL)
        store_script_init(&sc, "partitions");
    static const char *const one[] = {"all", "events", "due", "dead", "skipped", "inflight",
                                      "watch"};
    enum { NONE = sizeof(one) / sizeof(one[0]) };
    char keys[1 + NONE][KEY_MAX], n[16];
    const char *argv[3 + 1 + NONE + 1];
    int argc = 0;
    snprintf(n, sizeof(n), "%u", s->nparts);
    argv[argc++] = "EVAL";
    argv[argc++] = sc.src;
    char nk[8];
    snprintf(nk, sizeof(nk), "%d", 1 + NONE);
    argv[argc++] = nk;
    key_build(keys[0], KEY_MAX, s->tag, "config", NULL, NULL);
    argv[argc++] = keys[0];
    for (int i = 0; i < NONE; i++) {
        key_build(keys[1 + i], KEY_MAX, s->tag, one[i], NULL, NULL);
        argv[argc++] = keys[1 + i];
    }
    argv[argc++] = n;
    size_t lens[sizeof(argv) / sizeof(argv[0])];
    for (int i = 0; i < argc; i++)
        lens[i] = i == 1 ? sc.len : strlen(argv[i]);
    int r = s->cluster ? cluster_cmdargv(s, on_partitions, s, NULL, argc, argv, lens)
                       : raw_cmdargv(s, on_partitions, s, argc, argv, lens);
    if (r != 0 && s->cluster == NULL)
        fail_handshake(s, "partition check not sent");
    else if (r != 0) {
        struct timeval tv = {1, 0};
        evtimer_add(s->check_ev, &tv);
    }
}

static void on_checks_done(void *arg, const char *err, redisReply *r)
{
    struct store *s = arg;
    if (err == store_err_disconnected)
        return;
    check_partitions(s);
}

/* Persistence: AOF off and no RDB save points means a Redis restart loses everything. */
static void on_save(void *arg, const char *err, redisReply *r)
{
    struct store *s = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2)
        return;
    if (!s->aof && r->element[1]->str[0] == '\0')
        log_warn("redis runs WITHOUT persistence (appendonly no, save \"\"): a Redis restart "
                 "loses every event and delivery; set appendonly yes",
                 "");
    else if (!s->aof)
        log_warn("redis has no AOF (appendonly no): a crash loses writes since the last RDB "
                 "snapshot; set appendonly yes",
                 "");
}

static void on_aof(void *arg, const char *err, redisReply *r)
{
    struct store *s = arg;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2)
        return;
    s->aof = strcmp(r->element[1]->str, "yes") == 0;
}

static void on_policy(void *arg, const char *err, redisReply *r)
{
    struct store *s = arg;
    if (err == store_err_disconnected)
        return;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 2) {
        log_warn("redis CONFIG GET refused; eviction policy not checked", "");
        return;
    }
    const char *policy = r->element[1]->str;
    if (strncmp(policy, "allkeys-", 8) == 0) {
        s->fatal = "redis maxmemory-policy allkeys-* would evict queues; use noeviction or "
                   "volatile-*";
        log_err("refusing redis with an allkeys eviction policy", "policy=%s", policy);
        if (s->fatal_checks)
            fail_handshake(s, s->fatal);
    }
}

static void on_auth_or_select(void *arg, const char *err, redisReply *r)
{
    struct store *s = arg;
    if (err == store_err_server)
        fail_handshake(s, r->str);
}

static void start_handshake(struct store *s)
{
    s->state = ST_HANDSHAKE;
    if (s->url.password && s->url.user) /* Redis 6 ACL user */
        internal_cmd(s, on_auth_or_select, "AUTH %s %s", s->url.user, s->url.password);
    else if (s->url.password)
        internal_cmd(s, on_auth_or_select, "AUTH %s", s->url.password);
    if (s->url.db)
        internal_cmd(s, on_auth_or_select, "SELECT %d", s->url.db);
    internal_cmd(s, on_policy, "CONFIG GET maxmemory-policy");
    internal_cmd(s, on_aof, "CONFIG GET appendonly");
    internal_cmd(s, on_save, "CONFIG GET save");
    internal_cmd(s, on_checks_done, "PING");
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    struct store *s = ac->data;
    if (status != REDIS_OK) {
        log_warn("redis connect failed", "err=\"%s\"", ac->errstr);
        s->ac = NULL; /* hiredis frees the context after a failed connect */
        s->state = ST_DOWN;
        schedule_retry(s);
        return;
    }
    log_info("redis connected", "%s%s", s->url.unix_path ? "path=" : "host=",
             s->url.unix_path ? s->url.unix_path : s->url.host);
    start_handshake(s);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    struct store *s = ac->data;
    s->ac = NULL;
    if (s->state == ST_CLOSING)
        return;
    if (s->fatal && s->fatal_checks) {
        s->state = ST_DOWN;
        notify(s, 0); /* the owner stops: no reconnect */
        return;
    }
    log_warn("redis disconnected", "err=\"%s\"", status == REDIS_OK ? "closed" : ac->errstr);
    s->stats.reconnects++;
    set_state(s, ST_DOWN);
    schedule_retry(s);
}

static void connect_now(struct store *s)
{
    if (s->state == ST_CLOSING || s->ac != NULL)
        return;
    redisAsyncContext *ac = s->url.unix_path ? redisAsyncConnectUnix(s->url.unix_path)
                                             : redisAsyncConnect(s->url.host, s->url.port);
    if (ac == NULL || ac->err) {
        log_warn("redis connect failed", "err=\"%s\"", ac ? ac->errstr : "oom");
        if (ac)
            redisAsyncFree(ac);
        schedule_retry(s);
        return;
    }
    ac->data = s;
    s->ac = ac;
    s->state = ST_CONNECTING;
    redisLibeventAttach(ac, s->base);
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
}

/* A command unanswered past the timeout: drop the connection so every callback completes. */
static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    struct store *s = arg;
    if (s->head && s->ac && mono_ms() - s->head->t0 > s->cmd_timeout_ms) {
        log_warn("redis command timed out, reconnecting", "timeout_ms=%lld",
                 (long long)s->cmd_timeout_ms);
        s->stats.timeouts++;
        /* redisAsyncFree, not redisAsyncDisconnect: that one waits for the pending replies,
         * which a hung Redis (SIGSTOP, a stalled host) never sends, so the store stayed "up"
         * with every command stuck. Free completes them now with NULL replies
         * (store_err_disconnected) and, on a connected context, runs on_disconnect. */
        redisAsyncContext *ac = s->ac;
        int connected = (ac->c.flags & REDIS_CONNECTED) != 0;
        redisAsyncFree(ac);
        if (!connected && s->ac == ac) { /* no on_disconnect for a connect still pending */
            s->ac = NULL;
            set_state(s, ST_DOWN);
            schedule_retry(s);
        }
    }
}

struct store *store_new(struct event_base *base, const struct store_opts *o)
{
    struct store *s = xcalloc(1, sizeof(*s));
    s->base = base;
    s->cmd_timeout_ms = o->cmd_timeout_ms > 0 ? o->cmd_timeout_ms : 5000;
    s->fatal_checks = o->fatal_checks;
    snprintf(s->tag, sizeof(s->tag), "{%s}", o->prefix);
    s->nparts = o->partitions > 1 ? (unsigned)o->partitions : 1;
    if (s->nparts > KEY_MAX_PARTITIONS)
        s->nparts = KEY_MAX_PARTITIONS; /* config refuses more */
    s->ptags = xcalloc(s->nparts, sizeof(*s->ptags));
    s->wtags = xcalloc(s->nparts, sizeof(*s->wtags));
    for (unsigned k = 0; k < s->nparts; k++) {
        key_part_tag(s->ptags[k], sizeof(s->ptags[k]), o->prefix, k, s->nparts);
        if (s->nparts > 1)
            snprintf(s->wtags[k], sizeof(s->wtags[k]), "%s %s", s->ptags[k], s->tag);
        else
            snprintf(s->wtags[k], sizeof(s->wtags[k]), "%s", s->tag);
    }
    s->check_ev = evtimer_new(base, on_check_retry, s);
    if (strncmp(o->url, "redis-cluster://", 16) == 0) {
        struct cluster_opts co = {.url = o->url, .cmd_timeout_ms = s->cmd_timeout_ms,
                                  .fatal_checks = o->fatal_checks, .on_state = on_cluster_state,
                                  .on_error = on_cluster_error, .arg = s};
        if ((s->cluster = cluster_new(base, &co)) == NULL) {
            store_free(s);
            return NULL;
        }
        return s;
    }
    const char *why = NULL;
    if (redis_url_parse(o->url, &s->url, &why) != 0) {
        char red[512];
        redis_url_redact(o->url, red, sizeof(red));
        log_err("bad redis url", "url=%s reason=\"%s\"", red, why);
        store_free(s);
        return NULL;
    }
    s->retry_ev = evtimer_new(base, on_retry, s);
    s->watchdog_ev = event_new(base, -1, EV_PERSIST, on_watchdog, s);
    struct timeval tv = {0, 500 * 1000};
    evtimer_add(s->watchdog_ev, &tv);
    return s;
}

void store_free(struct store *s)
{
    if (s == NULL)
        return;
    s->state = ST_CLOSING;
    cluster_free(s->cluster);
    if (s->ac) {
        redisAsyncContext *ac = s->ac;
        s->ac = NULL;
        redisAsyncFree(ac); /* completes pending callbacks with NULL replies */
    }
    if (s->retry_ev)
        event_free(s->retry_ev);
    if (s->watchdog_ev)
        event_free(s->watchdog_ev);
    if (s->check_ev)
        event_free(s->check_ev);
    free(s->ptags);
    free(s->wtags);
    for (struct listener *l = s->listeners, *n; l; l = n) {
        n = l->next;
        free(l);
    }
    redis_url_cleanup(&s->url);
    free(s);
}

void store_on_state(struct store *s, store_state_cb *cb, void *arg)
{
    struct listener *l = xcalloc(1, sizeof(*l));
    l->cb = cb;
    l->arg = arg;
    l->next = s->listeners;
    s->listeners = l;
}

int store_start(struct store *s)
{
    if (s->cluster) {
        cluster_start(s->cluster);
        return 0;
    }
    connect_now(s);
    return 0;
}

const char *store_fatal(const struct store *s)
{
    return s->fatal;
}

int store_ready(const struct store *s)
{
    return s->state == ST_READY;
}

const char *store_tag(const struct store *s)
{
    return s->tag;
}

unsigned store_partitions(const struct store *s)
{
    return s->nparts;
}

const char *store_part_tag(const struct store *s, unsigned k)
{
    return s->ptags[k < s->nparts ? k : 0];
}

const char *store_wh_tag(const struct store *s, unsigned k)
{
    return s->wtags[k < s->nparts ? k : 0];
}

int store_tag_where(const struct store *s, const char *tag, char *node, size_t n)
{
    if (s->cluster == NULL) {
        if (s->url.unix_path)
            snprintf(node, n, "%s", s->url.unix_path);
        else
            snprintf(node, n, "%s:%d", s->url.host, s->url.port);
        return -1;
    }
    unsigned slot = cluster_key_slot(tag, strlen(tag));
    if (cluster_slot_node(s->cluster, slot, node, n) != 0)
        node[0] = '\0';
    return (int)slot;
}

const char *store_tag_of(const struct store *s, const char *id)
{
    return s->ptags[key_partition(id, strlen(id), s->nparts)];
}

void store_stats_get(const struct store *s, struct store_stats *out)
{
    if (s->cluster) {
        cluster_stats_get(s->cluster, out);
        return;
    }
    *out = s->stats;
}
