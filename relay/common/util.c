/* util.c - see util.h. runs on: any thread. */
#include "relay/common/util.h"
#include "protocol/proto.h"
#include "relay/common/log.h"

#include <event2/event.h>

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static void oom(size_t n)
{
    log_err("out of memory", "bytes=%zu", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *xcalloc(size_t n, size_t m)
{
    void *p = calloc(n ? n : 1, m ? m : 1);
    if (p == NULL)
        oom(n * m);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static size_t put_cut(char *dst, size_t at, size_t room, const char *s, size_t len)
{
    if (len > room - at)
        len = room - at;
    memcpy(dst + at, s, len);
    return at + len;
}

size_t str_copy2(char *dst, size_t n, const char *a, char sep, const char *b)
{
    if (n == 0)
        return 0;
    size_t room = n - 1, at = put_cut(dst, 0, room, a, strlen(a));
    if (b != NULL) {
        if (sep != '\0')
            at = put_cut(dst, at, room, &sep, 1);
        at = put_cut(dst, at, room, b, strlen(b));
    }
    dst[at] = '\0';
    return at;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        oom(0);
    char *p = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void evtimer_add_ms(struct event *ev, int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    evtimer_add(ev, &tv);
}

void os_random(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            log_err("getrandom failed", "errno=%d", errno);
            abort();
        }
        p += r;
        n -= (size_t)r;
    }
}

/* jitter_rand's xorshift64* state: one per thread (so no lock), seeded from the OS on the
 * thread's first call; 0 = not seeded yet. */
static __thread uint64_t jitter_state;

/* xorshift64*, seeded once per thread from the OS. Jitter only, never secrets. */
uint64_t jitter_rand(uint64_t n)
{
    uint64_t s = jitter_state;
    if (s == 0) {
        os_random(&s, sizeof(s));
        s |= 1;
    }
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    jitter_state = s;
    uint64_t r = s * 2685821657736338717ULL;
    return n ? r % n : 0;
}

int parse_duration_ms(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    int64_t mul;
    if (*end == '\0' || strcmp(end, "s") == 0)
        mul = 1000;
    else if (strcmp(end, "ms") == 0)
        mul = 1;
    else if (strcmp(end, "m") == 0)
        mul = 60 * 1000;
    else if (strcmp(end, "h") == 0)
        mul = 3600 * 1000;
    else if (strcmp(end, "d") == 0)
        mul = 86400 * 1000;
    else
        return -1;
    if (v > (unsigned long long)(INT64_MAX / mul))
        return -1;
    *out = (int64_t)v * mul;
    return 0;
}

void format_duration_ms(int64_t ms, char *buf, size_t n)
{
    static const struct { int64_t ms; const char *unit; } units[] = {
        {86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"},
    };
    for (size_t i = 0; i < ARRAY_LEN(units); i++)
        if (ms != 0 && ms % units[i].ms == 0) {
            snprintf(buf, n, "%lld%s", (long long)(ms / units[i].ms), units[i].unit);
            return;
        }
    snprintf(buf, n, ms == 0 ? "0s" : "%lldms", (long long)ms);
}

int parse_hostport(const char *s, char *host, size_t hostn, int *port)
{
    const char *colon;
    size_t hl;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL || rb[1] != ':')
            return -1;
        hl = (size_t)(rb - s - 1);
        s++;
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return -1;
        hl = (size_t)(colon - s);
    }
    if (hl == 0 || hl >= hostn)
        return -1;
    memcpy(host, s, hl);
    host[hl] = '\0';
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end != '\0' || colon[1] == '\0' || p < 0 || p > 65535)
        return -1;
    *port = (int)p;
    return 0;
}

char *url_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = xmalloc(strlen(s) * 3 + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

int stream_id_cmp(const char *a, const char *b)
{
    uint64_t am = 0, as = 0, bm = 0, bs = 0;
    proto_stream_id_parse(a, &am, &as);
    proto_stream_id_parse(b, &bm, &bs);
    if (am != bm)
        return am < bm ? -1 : 1;
    return as < bs ? -1 : as > bs ? 1 : 0;
}
