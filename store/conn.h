/* conn.h - one hiredis async connection to one Redis server on the core event_base: the
 * connection engine under store.c (a single Redis: one conn) and cluster.c (one conn per
 * master or seed). Both owners get the same connect, handshake, timeout and script rules.
 *
 * A conn connects (TCP host:port or a Unix socket), runs the handshake (AUTH [user] password,
 * SELECT db, CONFIG GET maxmemory-policy, optionally the persistence checks, PING) and says
 * "up" once PING answered. It keeps the commands it wrote in order (Redis answers in that
 * order), so a command unanswered past the command timeout, or a connect plus handshake that
 * takes longer, drops the connection: every written command completes with a NULL reply
 * instead of hanging. An EVALSHA answered NOSCRIPT is resent once as EVAL on the same
 * connection (EVAL loads the script there). Going down is reported once per connection;
 * whether and when to reconnect is the owner's decision (conn_retry: capped exponential
 * backoff with jitter, reset when a connection comes up), because a cluster reconnects only
 * the nodes it needs. An allkeys-* eviction policy sets conn_fatal; with fatal_checks the
 * handshake stops there and the connection closes (the owner then stops).
 *
 * Ownership: the owner owns the conn (conn_new/conn_free) and every struct conn_req, which
 * it embeds in its record of a command; the conn links a written request until its callback
 * ran. runs on: core thread only. */
#ifndef STORE_CONN_H
#define STORE_CONN_H

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct conn;
struct conn_req;
struct store_script;

/* DOWN: no connection, or one going away (no writes); CONNECTING: TCP connect under way;
 * HANDSHAKE: connected, AUTH/SELECT/checks/PING not all answered; UP: commands accepted. */
enum conn_state { CONN_DOWN = 0, CONN_CONNECTING, CONN_HANDSHAKE, CONN_UP };

/* reply borrowed for the callback only; NULL when the connection was lost (or freed) before
 * the answer. Called exactly once per accepted conn_send*. After it, the conn keeps no
 * pointer to req. */
typedef void conn_reply_cb(struct conn_req *req, redisReply *reply);
/* up = 1: the handshake is done (conn_send accepted from now on); 0: the connection is gone
 * (connect failed, lost, timed out or closed after a handshake failure). Called once per
 * change, never from conn_free. */
typedef void conn_event_cb(void *arg, struct conn *c, int up);

/* One command, embedded in the owner's record of it. Set cb, data and script before
 * conn_send; the _x fields are the conn's. */
struct conn_req {
    conn_reply_cb *cb;
    void *data;                        /* the owner's: usually the record embedding this */
    const struct store_script *script; /* non-NULL: argv is an EVALSHA of it (see conn_send) */
    struct conn_req *_next;            /* written, unanswered: oldest first */
    int64_t _sent;                     /* mono ms it was written */
    int _argc, _evaled;
    const char *const *_argv;
    const size_t *_lens;
};

struct conn_opts {
    const char *host;      /* TCP, with port; borrowed: must outlive the conn */
    int port;
    const char *unix_path; /* non-NULL: a Unix socket instead (borrowed) */
    const char *user, *password; /* AUTH [user] password when password is set (borrowed) */
    int db;                      /* SELECT db when > 0 */
    int64_t cmd_timeout_ms;      /* > 0: an answer, or connect + handshake, takes longer: drop */
    int fatal_checks;            /* 1: an allkeys-* policy stops the handshake (see top) */
    int check_persistence;       /* 1: warn when Redis runs without AOF (and without RDB) */
    const char *what;            /* log phrase: "redis" or "redis cluster node" */
    conn_event_cb *on_event;
    void *arg;
};

/* Prepare (no I/O before conn_connect). Copies nothing but the options' pointers. */
struct conn *conn_new(struct event_base *base, const struct conn_opts *o);
/* Drop the connection (written requests complete with NULL replies first, no on_event) and
 * free. NULL-safe. Not from inside one of this conn's callbacks. */
void conn_free(struct conn *c);

/* Connect now unless connected, connecting, or waiting out a conn_retry backoff. A connect
 * refused at once (no socket, a bad path) is retried after the backoff by itself. */
void conn_connect(struct conn *c);
/* Connect after the backoff: 100 ms doubling to 5 s, jittered to [d/2, d]. Nothing when one
 * is already scheduled or a connection exists. */
void conn_retry(struct conn *c);
/* A handshake step of the owner's failed (e.g. store.c's partition check): logs "redis
 * handshake failed" with why, and closes after the written replies; on_event(0) follows. */
void conn_fail(struct conn *c, const char *why);

enum conn_state conn_state(const struct conn *c);
/* The allkeys-* refusal text once a handshake saw that policy, else NULL. */
const char *conn_fatal(const struct conn *c);
/* "host:port" or the socket path, for logs and `statusrelay partitions`. */
const char *conn_addr(const struct conn *c);

/* Write a command: argc/argv/lens as redisAsyncCommandArgv (lens NULL: strlen). Returns 0
 * (req->cb runs exactly once) or -1 when not UP (nothing called). With req->script, argv is
 * "EVALSHA sha numkeys ..." and argv/lens must stay valid until req->cb ran: on NOSCRIPT the
 * conn writes it again as "EVAL <script source> numkeys ..." (once per conn_send). */
int conn_send(struct conn *c, struct conn_req *req, int argc, const char *const *argv,
              const size_t *lens);
/* The same with a hiredis format (values via %s / %b, never in the format); no script. */
int conn_vsendf(struct conn *c, struct conn_req *req, const char *fmt, va_list ap);
int conn_sendf(struct conn *c, struct conn_req *req, const char *fmt, ...);
/* Write ASKING (reply ignored) so the next command is served during a slot migration.
 * Returns 0 or -1 when not UP. */
int conn_asking(struct conn *c);

/* Counters since conn_new: disconnects after a connection was made, and timeouts. */
struct conn_counts {
    uint64_t reconnects, timeouts;
};
void conn_counts_add(const struct conn *c, struct conn_counts *sum);

#endif
