/* command.h - commands, scripts and replies on the store (store.h): the level the store's own
 * modules work at (store/apply.c, deliveries.c, polls.c, gather.c, ...). relay/ never includes
 * this header: it calls those modules' typed functions, so no hiredis type reaches the daemon.
 * runs on: core thread only. */
#ifndef STORE_COMMAND_H
#define STORE_COMMAND_H

#include "store/store.h"

#include <hiredis/hiredis.h>
#include <stddef.h>

/* reply is borrowed for the callback only (NULL when err == store_err_disconnected; an
 * error reply when err == store_err_server). Called exactly once per accepted command. */
typedef void store_cb(void *arg, const char *err, redisReply *reply);

/* Send a command (printf-like hiredis format: values via %s / %b, never in the format).
 * Returns 0 (cb will be called exactly once) or -1 when not ready (cb not called). */
int store_cmd(struct store *s, store_cb *cb, void *arg, const char *fmt, ...);
int store_cmdargv(struct store *s, store_cb *cb, void *arg, int argc, const char **argv,
                  const size_t *lens);

/* A Lua script shipped with the binary. sha is computed locally at registration. */
struct store_script {
    const char *name; /* "apply" */
    const char *src;
    size_t len;
    char sha[41];
};
/* Look up an embedded script "store/<name>.lua" and compute its SHA1. Aborts if absent. */
void store_script_init(struct store_script *sc, const char *name);
/* EVALSHA with a NOSCRIPT fallback to EVAL (which loads it). argv holds keys then args. */
int store_eval(struct store *s, const struct store_script *sc, store_cb *cb, void *arg,
               int nkeys, int argc, const char **argv, const size_t *lens);

/* ---- the event log's page commands (store/events.c; walked with store/events.h) ---- */

/* XRANGE {P}:events start end [COUNT count]: a page of the log, oldest first, as
 * store_events_iter_range walks it. start / end are stream ids, "(id" (exclusive, Redis 6.2+),
 * a bare ms time, "-" or "+"; count 0 = no COUNT. Returns store_cmd's result (0: cb is called
 * exactly once; -1: the store is not ready and cb is not called). */
int store_events_range(struct store *s, const char *start, const char *end, int count,
                       store_cb *cb, void *arg);
/* The same on the event stream of the partition whose tag is given (store_tag_of: a
 * request's own events, docs/partitions.md); store_events_range is this on partition 0 of a
 * 1-partition deployment. */
int store_events_range_in(struct store *s, const char *tag, const char *start, const char *end,
                          int count, store_cb *cb, void *arg);
/* XREVRANGE {P}:events + - COUNT 1: the newest entry (an empty reply when the log is empty).
 * Returns as store_events_range. */
int store_events_last(struct store *s, store_cb *cb, void *arg);
/* The same on the stream of the partition whose tag is given. */
int store_events_last_in(struct store *s, const char *tag, store_cb *cb, void *arg);

#endif
