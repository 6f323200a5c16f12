/* store.c - see store.h. One Redis is one store/conn.c connection; a redis-cluster:// URL
 * goes through store/cluster.c (one conn per master). This file owns what both share: the
 * state the callers see, the partition check, pending counts and refusals, the tags.
 * runs on: core thread. */
#include "store/command.h"
#include "store/cluster.h"
#include "store/cluster_slot.h"
#include "store/conn.h"
#include "store/keys.h"
#include "store/redis_url.h"
#include "relay/common/embedded.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <event2/event.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char store_err_disconnected[] = "redis_disconnected";
const char store_err_server[] = "redis_error";

/* DOWN: no ready connection; CHECKING: connected (conn up / cluster up), the partition count
 * being checked; READY: store_cmd* accepted. */
enum store_state { ST_DOWN = 0, ST_CHECKING, ST_READY, ST_CLOSING };

struct listener {
    store_state_cb *cb;
    void *arg;
    struct listener *next;
};

/* One accepted command on the single connection: freed after its callback. */
struct pending {
    struct conn_req req; /* req.data = this */
    struct store *s;
    store_cb *cb;
    void *arg;
    int64_t t0;
    /* store_eval: the EVALSHA argv, kept for conn.c's NOSCRIPT resend (malloc'd) */
    int argc;
    char **argv;
    size_t *lens;
};

struct store {
    struct event_base *base;
    enum store_state state;
    struct redis_url url; /* host or unix_path, user, password, port, db */
    char tag[KEY_TAG_MAX];
    char *prefix; /* STATUSRELAY_REDIS_PREFIX (malloc'd): the tags are made after the check */
    unsigned nparts;
    int tags;     /* enum key_tags of ptags, -1 until the first check decided it */
    char (*ptags)[KEY_TAG_MAX]; /* nparts tags (ptags[0] = tag when nparts = 1) */
    char (*wtags)[2 * KEY_TAG_MAX]; /* store_wh_tag */
    struct event *check_ev;     /* the partition check again after a failure */
    char fatal_buf[200];
    int64_t cmd_timeout_ms;
    int fatal_checks;
    const char *fatal;
    struct listener *listeners;
    struct store_stats stats;
    char refused[160];    /* last write refusal (OOM / READONLY / MISCONF), "" when none */
    int64_t refused_at;   /* mono ms of it */
    struct conn *conn;       /* a single Redis */
    struct cluster *cluster; /* or a redis-cluster:// URL: every command goes through it */
};

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

/* ---- commands on the single connection ------------------------------------------- */

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

static void on_reply(struct conn_req *req, redisReply *reply)
{
    struct pending *p = req->data;
    struct store *s = p->s;
    const char *err = NULL;
    s->stats.pending--;
    if (reply == NULL)
        err = store_err_disconnected;
    else if (reply->type == REDIS_REPLY_ERROR) {
        err = store_err_server;
        s->stats.errors++;
        note_refusal(s, reply->str);
    } else {
        int64_t dt = mono_ms() - p->t0;
        s->stats.latency_ms_sum += (uint64_t)(dt > 0 ? dt : 0);
        s->stats.latency_n++;
    }
    if (p->cb)
        p->cb(p->arg, err, reply);
    pending_free(p);
}

static struct pending *pending_new(struct store *s, store_cb *cb, void *arg)
{
    struct pending *p = xcalloc(1, sizeof(*p));
    p->req.cb = on_reply;
    p->req.data = p;
    p->s = s;
    p->cb = cb;
    p->arg = arg;
    p->t0 = mono_ms();
    return p;
}

/* A command was written: its callback is owed. */
static void sent(struct store *s)
{
    s->stats.pending++;
    s->stats.commands++;
}

/* Takes p (freed when not sent). argv is p's own with p->req.script, else borrowed. */
static int raw_send(struct store *s, struct pending *p, int argc, const char *const *argv,
                    const size_t *lens)
{
    if (conn_send(s->conn, &p->req, argc, argv, lens) != 0) {
        pending_free(p);
        return -1;
    }
    sent(s);
    return 0;
}

static int raw_cmd(struct store *s, store_cb *cb, void *arg, const char *fmt, va_list ap)
{
    struct pending *p = pending_new(s, cb, arg);
    if (conn_vsendf(s->conn, &p->req, fmt, ap) != 0) {
        pending_free(p);
        return -1;
    }
    sent(s);
    return 0;
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
    return raw_send(s, pending_new(s, cb, arg), argc, argv, lens);
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
    struct pending *p = pending_new(s, cb, arg);
    p->req.script = sc;
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
    return raw_send(s, p, n, (const char *const *)p->argv, p->lens);
}

/* ---- state ------------------------------------------------------------------------ */

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
        log_info("redis ready", "db=%d", s->url.db);
        notify(s, 1);
    } else if (old == ST_READY && st != ST_READY) {
        notify(s, 0);
    }
}

/* A setting we refuse to run with (store_fatal): down, and the owner stops. */
static void refuse(struct store *s, const char *fatal)
{
    s->fatal = fatal;
    s->state = ST_DOWN;
    notify(s, 0);
}

/* ---- the recorded partition count (store/partitions.lua, docs/partitions.md) ---------- */

static void on_check_retry(evutil_socket_t fd, short what, void *arg)
{
    struct store *s = arg;
    if (s->state == ST_CHECKING)
        check_partitions(s);
}

/* The partition tags (and the delivery scripts' tag arguments) of the decided scheme.
 * Written once, before the store is first ready: callers only use tags while it is. */
static void make_tags(struct store *s)
{
    for (unsigned k = 0; k < s->nparts; k++) {
        key_tag_of_scheme(s->ptags[k], sizeof(s->ptags[k]), (enum key_tags)s->tags, s->prefix,
                          k, s->nparts);
        if (s->nparts > 1)
            snprintf(s->wtags[k], sizeof(s->wtags[k]), "%s %s", s->ptags[k], s->tag);
        else
            snprintf(s->wtags[k], sizeof(s->wtags[k]), "%s", s->tag);
    }
}

static void on_partitions(void *arg, const char *err, redisReply *r)
{
    struct store *s = arg;
    if (err == store_err_disconnected || s->state != ST_CHECKING)
        return; /* the next connection checks again */
    if (err != NULL || r->type != REDIS_REPLY_STRING) {
        log_err("redis partition check failed", "reason=\"%s\"",
                err != NULL ? r->str : "unexpected reply");
        struct timeval tv = {1, 0};
        evtimer_add(s->check_ev, &tv);
        return;
    }
    char *end;
    unsigned long rec = strtoul(r->str, &end, 10);
    int tags = strcmp(end, "/spread") == 0 ? KEY_TAGS_SPREAD : KEY_TAGS_PLAIN;
    int valid = end != r->str && (*end == '\0' || tags == KEY_TAGS_SPREAD);
    if (!valid || rec != s->nparts) {
        char got[24]; /* the recorded count ("3" of "3/spread"), or what is there */
        if (valid)
            snprintf(got, sizeof(got), "%lu", rec);
        else
            snprintf(got, sizeof(got), "%.20s", r->str);
        snprintf(s->fatal_buf, sizeof(s->fatal_buf),
                 "STATUSRELAY_PARTITIONS=%u but this deployment's Redis has %s partition(s) "
                 "(the count is fixed for a deployment: docs/partitions.md)",
                 s->nparts, got);
        log_err("refusing redis: partition count differs from the deployment's",
                "partitions=%u recorded=%s", s->nparts, got);
        refuse(s, s->fatal_buf);
        return;
    }
    if (s->nparts > 1 && s->tags >= 0 && tags != s->tags) { /* the record was replaced */
        snprintf(s->fatal_buf, sizeof(s->fatal_buf),
                 "this deployment's Redis records another partition tag scheme (%.20s) than "
                 "the one this process started with (docs/partitions.md)", r->str);
        log_err("refusing redis: partition tag scheme changed", "recorded=%.20s", r->str);
        refuse(s, s->fatal_buf);
        return;
    }
    if (s->tags < 0) {
        s->tags = s->nparts > 1 ? tags : KEY_TAGS_PLAIN;
        make_tags(s);
        if (s->nparts > 1)
            log_info("redis partitions", "partitions=%u tags=%s", s->nparts,
                     store_tag_scheme(s));
    }
    set_state(s, ST_READY);
}

/* store/partitions.lua's handle: the same for every store of the process (a script handle
 * holds only its name and source); registered on first use, on the core thread only. */
static struct store_script partitions_sc;

/* EVAL store/partitions.lua on the deployment tag's node, before anything else runs. Not
 * sent: the connection went down meanwhile, and the next "up" checks again. */
static void check_partitions(struct store *s)
{
    struct store_script *sc = &partitions_sc;
    if (sc->name == NULL)
        store_script_init(sc, "partitions");
    static const char *const one[] = {"all", "events", "due", "dead", "skipped", "inflight",
                                      "watch", "ct"};
    enum { NONE = sizeof(one) / sizeof(one[0]) };
    char keys[1 + NONE][KEY_MAX], n[16];
    const char *argv[3 + 1 + NONE + 2];
    int argc = 0;
    snprintf(n, sizeof(n), "%u", s->nparts);
    argv[argc++] = "EVAL";
    argv[argc++] = sc->src;
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
    argv[argc++] = "/spread"; /* a new deployment's tags */
    size_t lens[sizeof(argv) / sizeof(argv[0])];
    for (int i = 0; i < argc; i++)
        lens[i] = i == 1 ? sc->len : strlen(argv[i]);
    if (s->cluster)
        cluster_cmdargv(s, on_partitions, s, NULL, argc, argv, lens);
    else
        raw_send(s, pending_new(s, on_partitions, s), argc, argv, lens);
}

/* ---- the connection (store/conn.c) or the cluster (store/cluster.c) going up and down - */

/* Connected and past the handshake: check the partition count, then ready. Down: callers
 * are told; a refused setting stops (the owner exits), anything else reconnects. */
static void on_conn_event(void *arg, struct conn *c, int up)
{
    struct store *s = arg;
    if (s->fatal == NULL)
        s->fatal = conn_fatal(c);
    if (up) {
        s->state = ST_CHECKING;
        check_partitions(s);
        return;
    }
    evtimer_del(s->check_ev);
    if (s->fatal && s->fatal_checks) {
        refuse(s, s->fatal);
        return;
    }
    set_state(s, ST_DOWN);
    conn_retry(c);
}

static void on_cluster_state(void *arg, int up)
{
    struct store *s = arg;
    const char *was = s->fatal;
    if (s->fatal == NULL)
        s->fatal = cluster_fatal(s->cluster);
    if (up) {
        s->state = ST_CHECKING;
        check_partitions(s); /* ready once the partition count is checked */
        return;
    }
    evtimer_del(s->check_ev);
    if (s->state != ST_READY && was == NULL && s->fatal != NULL)
        refuse(s, s->fatal); /* a fatal check failed: the owner stops */
    else
        set_state(s, ST_DOWN);
}

static void on_cluster_error(void *arg, const char *msg)
{
    note_refusal(arg, msg); /* OOM / READONLY / MISCONF on a master: readiness, as above */
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
    s->prefix = xstrdup(o->prefix);
    s->ptags = xcalloc(s->nparts, sizeof(*s->ptags));
    s->wtags = xcalloc(s->nparts, sizeof(*s->wtags));
    s->tags = -1; /* the check decides (on_partitions); one partition has the one tag {P} */
    if (s->nparts == 1) {
        s->tags = KEY_TAGS_PLAIN;
        make_tags(s);
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
    struct conn_opts co = {.host = s->url.host, .port = s->url.port,
                           .unix_path = s->url.unix_path, .user = s->url.user,
                           .password = s->url.password, .db = s->url.db,
                           .cmd_timeout_ms = s->cmd_timeout_ms, .fatal_checks = o->fatal_checks,
                           .check_persistence = 1, .what = "redis", .on_event = on_conn_event,
                           .arg = s};
    s->conn = conn_new(base, &co);
    return s;
}

void store_free(struct store *s)
{
    if (s == NULL)
        return;
    s->state = ST_CLOSING;
    cluster_free(s->cluster);
    conn_free(s->conn); /* completes pending callbacks with NULL replies */
    if (s->check_ev)
        event_free(s->check_ev);
    free(s->ptags);
    free(s->wtags);
    free(s->prefix);
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
    conn_connect(s->conn);
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

const char *store_tag_scheme(const struct store *s)
{
    if (s->tags < 0)
        return NULL;
    return s->tags == KEY_TAGS_SPREAD ? "spread" : "plain";
}

const char *store_wh_tag(const struct store *s, unsigned k)
{
    return s->wtags[k < s->nparts ? k : 0];
}

int store_tag_where(const struct store *s, const char *tag, char *node, size_t n)
{
    if (s->cluster == NULL) {
        snprintf(node, n, "%s", conn_addr(s->conn));
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
    struct conn_counts cc = {0, 0};
    conn_counts_add(s->conn, &cc);
    out->reconnects = cc.reconnects;
    out->timeouts = cc.timeouts;
}
