/* log.h - leveled one-line logger for every thread.
 *
 * Each line: `<RFC3339 ms UTC> level=<lvl> thread=<name> msg="<what happened>" k=v ...`
 * written with one write(2) to stderr or to the log file. The level is checked before
 * anything is formatted, so disabled levels cost a compare. Never log secrets.
 * runs on: any thread (the thread name is per-thread, set with log_thread_name). */
#ifndef RELAY_LOG_H
#define RELAY_LOG_H

enum log_level { LOG_ERR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern int log_level_current;

/* Parse "error|warn|info|debug". Returns the level or -1. */
int log_level_parse(const char *s);
const char *log_level_name(int level);
void log_set_level(int level);
/* Log to this file (append) instead of stderr; NULL = stderr. Returns 0 or -1. */
int log_open_file(const char *path);
/* Reopen the log file (SIGHUP, after rotation). Safe to call from the loop, not a handler. */
int log_reopen(void);
/* Name shown as thread=... for lines from the calling thread ("core", "ws", "sim"). */
void log_thread_name(const char *name);
/* Route libevent and libwebsockets internal logs into ours. */
void log_route_libs(void);

/* msg is a fixed human phrase; fmt adds key=value fields (may be "" ). */
void log_write(int level, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_at(lvl, msg, ...)                                                                     \
    do {                                                                                          \
        if ((lvl) <= log_level_current)                                                           \
            log_write((lvl), (msg), __VA_ARGS__);                                                 \
    } while (0)
#define log_err(msg, ...) log_at(LOG_ERR, msg, __VA_ARGS__)
#define log_warn(msg, ...) log_at(LOG_WARN, msg, __VA_ARGS__)
#define log_info(msg, ...) log_at(LOG_INFO, msg, __VA_ARGS__)
#define log_debug(msg, ...) log_at(LOG_DEBUG, msg, __VA_ARGS__)

#endif
