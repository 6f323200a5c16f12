/* redis_url.h - the one parser of STATUSRELAY_REDIS_URL, and its redacted form for logs.
 *
 * Accepted forms:
 *   redis://[[user]:password@]host[:port][/db]   (a bare "redis://password@host" is a password,
 *                                                 as before Redis 6 ACLs)
 *   unix:///path/to.sock[?db=N]
 * user and password may be percent-encoded (%40 for '@'). `rediss://` is refused with a reason:
 * the hiredis this builds against (Debian's 0.14) has no TLS. Used by the store to connect and
 * by config validation (--check-config), so both accept exactly the same URLs.
 * runs on: any thread (pure string work, no I/O). */
#ifndef STORE_REDIS_URL_H
#define STORE_REDIS_URL_H

#include <stddef.h>

struct redis_url {
    char *host;      /* heap; NULL for unix sockets */
    char *unix_path; /* heap; NULL for TCP */
    char *user;      /* heap; NULL: no ACL user (AUTH <password> only) */
    char *password;  /* heap; NULL: no AUTH */
    int port;        /* 6379 unless given */
    int db;          /* 0 unless given */
};

/* Parse url into *u (zeroed first; release with redis_url_cleanup on every path). Returns 0, or
 * -1 with *why (may be NULL) set to a static sentence saying what is wrong; *u is then
 * cleaned up already. */
int redis_url_parse(const char *url, struct redis_url *u, const char **why);
/* Free the strings of *u and zero it. */
void redis_url_cleanup(struct redis_url *u);
/* Copy url into out (size n, always terminated) with the password replaced by "***":
 * redis://user:***@host:6379/0. Works on unparsable URLs too (anything between "://" and the
 * last '@' that follows a ':' is hidden; a bare userinfo is hidden whole). */
void redis_url_redact(const char *url, char *out, size_t n);

#endif
