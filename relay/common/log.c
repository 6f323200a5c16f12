/* log.c - see log.h. runs on: any thread; the file descriptor swap is atomic. */
#include "relay/common/log.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <libwebsockets.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int log_level_current = LOG_INFO;
static _Atomic int log_fd = 2;
static char *log_path;
static __thread const char *thread_name = "main";

static const char *const names[] = {"error", "warn", "info", "debug"};

int log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

const char *log_level_name(int level)
{
    return level >= 0 && level < 4 ? names[level] : "?";
}

void log_set_level(int level)
{
    log_level_current = level;
}

void log_thread_name(const char *name)
{
    thread_name = name;
}

int log_open_file(const char *path)
{
    free(log_path);
    log_path = path ? strdup(path) : NULL;
    return log_reopen();
}

int log_reopen(void)
{
    if (log_path == NULL)
        return 0;
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return -1;
    int old = atomic_exchange(&log_fd, fd);
    if (old > 2)
        close(old);
    return 0;
}

void log_write(int level, const char *msg, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line),
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s thread=%s msg=\"%s\"",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, log_level_name(level), thread_name, msg);
    if (n < 0)
        return;
    if ((size_t)n < sizeof(line) - 2 && fmt != NULL && fmt[0] != '\0') {
        line[n++] = ' ';
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        if (m > 0)
            n += m;
    }
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    for (int i = 0; i < n; i++)            /* one event, one line: no embedded newlines */
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[n++] = '\n';
    ssize_t w = write(atomic_load(&log_fd), line, (size_t)n);
    (void)w;
}

/* Library lines are rate-limited: a library stuck in a loop (libevent's accept warning
 * under EMFILE once wrote 2.5 M lines in 12 s) writes at most LIB_LINES_PER_S lines a
 * second; the next line let through carries suppressed=N. One limiter per library, each
 * used by one thread only (libevent: core; libwebsockets: ws). */
#define LIB_LINES_PER_S 20
struct lib_quiet {
    int64_t window_ms;
    int n;
    unsigned long long suppressed;
};
static struct lib_quiet quiet_event, quiet_lws;

static int lib_allow(struct lib_quiet *q, unsigned long long *folded)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    *folded = 0;
    if (now - q->window_ms >= 1000) {
        q->window_ms = now;
        q->n = 0;
    }
    if (q->n >= LIB_LINES_PER_S) {
        q->suppressed++;
        return 0;
    }
    q->n++;
    *folded = q->suppressed;
    q->suppressed = 0;
    return 1;
}

static void on_event_log(int severity, const char *m)
{
    int lvl = severity >= EVENT_LOG_ERR ? LOG_ERR : severity == EVENT_LOG_WARN ? LOG_WARN
                                                                                 : LOG_DEBUG;
    unsigned long long folded;
    if (lvl > log_level_current || !lib_allow(&quiet_event, &folded))
        return;
    if (folded)
        log_at(lvl, "libevent", "detail=\"%s\" suppressed=%llu", m, folded);
    else
        log_at(lvl, "libevent", "detail=\"%s\"", m);
}

static void on_lws_log(int level, const char *line)
{
    int lvl = level == LLL_ERR ? LOG_WARN : level == LLL_WARN ? LOG_INFO : LOG_DEBUG;
    unsigned long long folded;
    if (lvl > log_level_current || !lib_allow(&quiet_lws, &folded))
        return;
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' '))
        n--;
    if (folded)
        log_at(lvl, "libwebsockets", "detail=\"%.*s\" suppressed=%llu", (int)n, line, folded);
    else
        log_at(lvl, "libwebsockets", "detail=\"%.*s\"", (int)n, line);
}

void log_route_libs(void)
{
    event_set_log_callback(on_event_log);
    int lws_levels = LLL_ERR | LLL_WARN;
    lws_set_log_level(log_level_current >= LOG_DEBUG ? lws_levels | LLL_NOTICE : lws_levels,
                      on_lws_log);
}
