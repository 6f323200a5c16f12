/* util.h - allocation helpers that never return NULL, clocks, small string helpers.
 * runs on: any thread. */
#ifndef RELAY_UTIL_H
#define RELAY_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Allocate or abort (after logging): relay/ and store/ never handle OOM locally. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a new heap string; caller free()s. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Clocks in milliseconds. Monotonic for timers, realtime for wire timestamps. */
int64_t mono_ms(void);
int64_t wall_ms(void);

struct event;
/* evtimer_add of libevent timer ev, due in ms milliseconds (>= 0). */
void evtimer_add_ms(struct event *ev, int64_t ms);

/* Fill buf with n bytes from the OS random source (getrandom). Aborts on failure:
 * there is no safe fallback for secrets. */
void os_random(void *buf, size_t n);
/* Uniform random in [0, n) from a fast non-cryptographic generator (jitter only). */
uint64_t jitter_rand(uint64_t n);

/* Parse "250ms", "5s", "5m", "2h", "1d" (a bare number is seconds) into ms.
 * Returns 0 or -1 on a malformed or negative value. */
int parse_duration_ms(const char *s, int64_t *out);
/* Format ms back into the shortest exact duration string ("1500ms", "5m"). */
void format_duration_ms(int64_t ms, char *buf, size_t n);

/* Compare two Redis stream ids in stream order (read by protocol/proto.h
 * proto_stream_id_parse; a malformed id counts as what it read before the fault, else 0-0). */
int stream_id_cmp(const char *a, const char *b);

/* Copy into dst of size n (> 0): a, then sep and b when b is not NULL (sep '\0': none),
 * cut to n - 1 bytes and NUL-terminated, as snprintf(dst, n, "%s%c%s", ...) would, at a
 * fraction of its cost (issue 26: the delivery hot path). Returns the length written. */
size_t str_copy2(char *dst, size_t n, const char *a, char sep, const char *b);
#define str_copy(dst, n, a) str_copy2((dst), (n), (a), '\0', NULL)

/* Percent-encode everything but RFC 3986 unreserved characters. Caller free()s. */
char *url_escape(const char *s);

/* Parse "host:port" / "[v6]:port" into parts. host must have room for 256 bytes.
 * Returns 0 or -1. */
int parse_hostport(const char *s, char *host, size_t hostn, int *port);

#endif
