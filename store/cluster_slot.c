/* cluster_slot.c - see cluster_slot.h. runs on: any thread. */
#include "store/command.h"
#include "store/cluster_slot.h"
#include "store/redis_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

uint16_t cluster_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint8_t)buf[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned cluster_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1) /* "{}" is no tag: the whole key is hashed */
            return cluster_crc16(open + 1, (size_t)(close - open - 1)) & (CLUSTER_SLOTS - 1);
    }
    return cluster_crc16(key, len) & (CLUSTER_SLOTS - 1);
}

static int is(const char *a, size_t alen, const char *b)
{
    return alen == strlen(b) && strncasecmp(a, b, alen) == 0;
}

const char *cluster_cmd_key(int argc, const char *const *argv, const size_t *lens,
                            size_t *klen)
{
    static const char *const keyless[] = {"PING",   "INFO",  "CLUSTER", "CONFIG", "SCRIPT",
                                          "AUTH",   "HELLO", "ASKING",  "SELECT", "CLIENT",
                                          "READONLY", "TIME", "DBSIZE",  "ECHO",   "COMMAND"};
    if (argc < 1)
        return NULL;
    const char *c = argv[0];
    size_t cl = lens[0];
    int at = 1;
    for (size_t i = 0; i < sizeof(keyless) / sizeof(keyless[0]); i++)
        if (is(c, cl, keyless[i]))
            return NULL;
    if (is(c, cl, "EVAL") || is(c, cl, "EVALSHA") || is(c, cl, "EVAL_RO") ||
        is(c, cl, "EVALSHA_RO") || is(c, cl, "FCALL") || is(c, cl, "FCALL_RO")) {
        if (argc < 4 || lens[2] == 0 || (lens[2] == 1 && argv[2][0] == '0'))
            return NULL;
        at = 3;
    } else if (is(c, cl, "XREAD") || is(c, cl, "XREADGROUP")) {
        at = -1;
        for (int i = 1; i + 1 < argc; i++)
            if (is(argv[i], lens[i], "STREAMS")) {
                at = i + 1;
                break;
            }
    } else if (is(c, cl, "XINFO") || is(c, cl, "XGROUP") || is(c, cl, "OBJECT")) {
        at = 2;
    }
    if (at < 0 || at >= argc)
        return NULL;
    *klen = lens[at];
    return argv[at];
}

int cluster_map_parse(struct cluster_map *m, const redisReply *r, const char *asked_host)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return -1;
    m->nmasters = 0;
    for (int i = 0; i < CLUSTER_SLOTS; i++)
        m->owner[i] = CLUSTER_NO_NODE;
    int covered = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
            return -1;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        const redisReply *h = e->element[2]->element[0], *p = e->element[2]->element[1];
        if (lo < 0 || hi >= CLUSTER_SLOTS || lo > hi || h->type != REDIS_REPLY_STRING ||
            p->type != REDIS_REPLY_INTEGER || p->integer <= 0 || p->integer > 65535)
            return -1;
        const char *host = h->len == 0 ? asked_host : h->str;
        if (strcmp(host, "?") == 0) /* endpoint unknown to the answering node */
            continue;
        if (strlen(host) >= sizeof(m->masters[0].host))
            return -1;
        int idx = -1;
        for (int k = 0; k < m->nmasters; k++)
            if (m->masters[k].port == (int)p->integer && strcmp(m->masters[k].host, host) == 0)
                idx = k;
        if (idx < 0) {
            if (m->nmasters == CLUSTER_MAX_NODES)
                return -1;
            idx = m->nmasters++;
            snprintf(m->masters[idx].host, sizeof(m->masters[idx].host), "%s", host);
            m->masters[idx].port = (int)p->integer;
        }
        for (long long s = lo; s <= hi; s++) {
            if (m->owner[s] == CLUSTER_NO_NODE)
                covered++;
            m->owner[s] = (uint16_t)idx;
        }
    }
    return covered;
}

/* "host:port" or "[v6]:port" of len bytes into a. */
static int addr_parse(const char *s, size_t len, struct cluster_addr *a)
{
    char tmp[300];
    if (len == 0 || len >= sizeof(tmp))
        return -1;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    const char *colon = strrchr(tmp, ':');
    const char *h = tmp;
    size_t hl;
    if (tmp[0] == '[') {
        const char *rb = strchr(tmp, ']');
        if (rb == NULL || rb + 1 != colon)
            return -1;
        h = tmp + 1;
        hl = (size_t)(rb - h);
    } else {
        if (colon == NULL)
            return -1;
        hl = (size_t)(colon - tmp);
    }
    if (colon == NULL || hl == 0 || hl >= sizeof(a->host) || colon[1] == '\0')
        return -1;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port <= 0 || port > 65535)
        return -1;
    memcpy(a->host, h, hl);
    a->host[hl] = '\0';
    a->port = (int)port;
    return 0;
}

int cluster_redirect_parse(const char *err, size_t len, unsigned *slot,
                           struct cluster_addr *addr)
{
    int kind;
    size_t skip;
    if (len > 6 && strncmp(err, "MOVED ", 6) == 0)
        kind = 1, skip = 6;
    else if (len > 4 && strncmp(err, "ASK ", 4) == 0)
        kind = 2, skip = 4;
    else
        return 0;
    const char *p = err + skip, *end = err + len;
    unsigned long s = 0;
    const char *q = p;
    while (q < end && *q >= '0' && *q <= '9' && s < CLUSTER_SLOTS)
        s = s * 10 + (unsigned long)(*q++ - '0');
    if (q == p || q >= end || *q != ' ' || s >= CLUSTER_SLOTS)
        return 0;
    q++;
    if (addr_parse(q, (size_t)(end - q), addr) != 0)
        return 0;
    *slot = (unsigned)s;
    return kind;
}

void cluster_url_cleanup(struct cluster_url *u)
{
    free(u->user);
    free(u->password);
    u->user = u->password = NULL;
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

int cluster_url_parse(struct cluster_url *u, const char *url, const char **why)
{
    static const char scheme[] = "redis-cluster://";
    memset(u, 0, sizeof(*u));
    *why = "must be redis-cluster://[user:password@]host:port[,host:port...]";
    if (url == NULL || strncmp(url, scheme, sizeof(scheme) - 1) != 0)
        return -1;
    const char *p = url + sizeof(scheme) - 1;
    const char *slash = strchr(p, '/'), *q = strchr(p, '?');
    const char *end = slash ? slash : q ? q : p + strlen(p);
    if (strchr(end, '@') != NULL) { /* the path or ?options cannot hold '@': userinfo can */
        *why = "a '/' or '?' in the user or password must be percent-encoded (%2F, %3F)";
        return -1;
    }
    const char *at = memchr(p, '@', (size_t)(end - p));
    for (const char *x = at ? at + 1 : p; at && x < end; x++)
        if (*x == '@')
            at = x; /* the last '@' before the path: passwords may hold '@' */
    if (at) { /* user and password as redis:// has them (percent-decoding included) */
        size_t ul = (size_t)(at - p);
        char *tmp = malloc(ul + 16);
        struct redis_url ru;
        const char *rwhy = NULL;
        if (tmp == NULL)
            goto fail;
        memcpy(tmp, "redis://", 8);
        memcpy(tmp + 8, p, ul);
        memcpy(tmp + 8 + ul, "@x:1", 5);
        int bad = redis_url_parse(tmp, &ru, &rwhy);
        free(tmp);
        if (bad) {
            *why = rwhy ? rwhy : "bad user:password";
            goto fail;
        }
        u->user = ru.user, ru.user = NULL;
        u->password = ru.password, ru.password = NULL;
        redis_url_cleanup(&ru);
        p = at + 1;
    }
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        if (u->nseeds == (int)(sizeof(u->seeds) / sizeof(u->seeds[0]))) {
            *why = "at most 16 seed nodes";
            goto fail;
        }
        if (e == p || (comma != NULL && comma + 1 == end)) {
            *why = "an empty host:port in the node list (a leading, doubled or trailing comma)";
            goto fail;
        }
        if (addr_parse(p, (size_t)(e - p), &u->seeds[u->nseeds]) != 0) {
            *why = "each seed must be host:port";
            goto fail;
        }
        u->nseeds++;
        p = comma ? comma + 1 : end;
    }
    if (u->nseeds == 0) {
        *why = "needs at least one seed host:port";
        goto fail;
    }
    if (slash) {
        const char *db = slash + 1;
        size_t dl = q && q > slash ? (size_t)(q - db) : strlen(db);
        if (!(dl == 0 || (dl == 1 && db[0] == '0'))) {
            *why = "db must be 0 in Redis Cluster (it has no SELECT)";
            goto fail;
        }
    }
    if (q && q[1] != '\0') {
        *why = "takes no ?options";
        goto fail;
    }
    *why = NULL;
    return 0;
fail:
    cluster_url_cleanup(u);
    return -1;
}

/* A decimal after a RESP type byte up to CRLF; advances *p. -1 on malformed input. */
static long resp_num(const char **p, const char *end, char type)
{
    const char *s = *p;
    if (s >= end || *s != type)
        return -1;
    s++;
    long n = 0;
    const char *d = s;
    while (s < end && *s >= '0' && *s <= '9' && n < (1L << 40))
        n = n * 10 + (*s++ - '0');
    if (s == d || end - s < 2 || s[0] != '\r' || s[1] != '\n')
        return -1;
    *p = s + 2;
    return n;
}

int cluster_resp_split(const char *buf, size_t len, char ***argvp, size_t **lensp)
{
    const char *p = buf, *end = buf + len;
    long n = resp_num(&p, end, '*');
    if (n < 1 || n > 1000000)
        return -1;
    char **argv = calloc((size_t)n, sizeof(char *));
    size_t *lens = calloc((size_t)n, sizeof(size_t));
    if (argv == NULL || lens == NULL)
        goto fail;
    for (long i = 0; i < n; i++) {
        long l = resp_num(&p, end, '$');
        if (l < 0 || end - p < l + 2 || p[l] != '\r' || p[l + 1] != '\n')
            goto fail;
        if ((argv[i] = dupn(p, (size_t)l)) == NULL)
            goto fail;
        lens[i] = (size_t)l;
        p += l + 2;
    }
    if (p != end)
        goto fail;
    *argvp = argv;
    *lensp = lens;
    return (int)n;
fail:
    for (long i = 0; argv && i < n; i++)
        free(argv[i]);
    free(argv);
    free(lens);
    return -1;
}
