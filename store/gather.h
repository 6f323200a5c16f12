/* gather.h - scatter-gather over Redis: several commands (usually one per partition,
 * docs/partitions.md), their replies handed over one by one, and one completion when every
 * command sent was answered. A deployment of one partition is the degenerate case: one
 * command, one reply, the same completion. The store modules that read across partitions
 * (store/eventlog.c, store/requests.c, store/delivery_log.c, store/counts.c) are built on it,
 * so no caller counts outstanding replies by hand.
 *
 *     struct store_gather *g = store_gather_new(s, on_reply, on_done, arg);
 *     for (unsigned p = 0; p < store_partitions(s); p++)
 *         store_gather_eval(g, p, &script, nkeys, argc, argv, NULL);   (or store_gather_argv)
 *     store_gather_end(g);               (no more commands: on_done may run from here)
 *
 * Ownership: the gather owns itself from store_gather_new until it calls done, then frees
 * itself; arg is the caller's throughout. runs on: core thread. */
#ifndef STORE_GATHER_H
#define STORE_GATHER_H

#include "store/command.h"

/* Named errors a gather completes with, besides store_err_disconnected / store_err_server:
 * a command that could not be sent (the store is not ready), and a reply the reply function
 * refused (not the shape its command promises). */
extern const char store_err_unsent[];
extern const char store_err_reply[];

struct store_gather;

/* One answered command: i is the index it was sent with, err and reply as store_cb's (reply
 * borrowed for the call; NULL when err is store_err_disconnected). Called for every answer,
 * errors included. Returns 0, or -1 when the reply is unusable (the gather then completes
 * with store_err_reply unless an earlier error is already recorded). NULL: replies are only
 * counted. */
typedef int store_gather_reply_fn(void *arg, unsigned i, const char *err, redisReply *reply);
/* The completion, exactly once, after store_gather_end and every answer: err NULL when each
 * command was sent and answered without error, else the first error seen. */
typedef void store_gather_done_fn(void *arg, const char *err);

/* A new gather on s. Never NULL (allocation aborts). */
struct store_gather *store_gather_new(struct store *s, store_gather_reply_fn *on_reply,
                                      store_gather_done_fn *done, void *arg);
/* Send one command (argv form, as store_cmdargv) / one script (as store_eval) tagged i.
 * Returns 0, or -1 when it could not be sent: the gather then completes with
 * store_err_unsent (the other commands are still awaited). */
int store_gather_argv(struct store_gather *g, unsigned i, int argc, const char **argv,
                      const size_t *lens);
int store_gather_eval(struct store_gather *g, unsigned i, const struct store_script *sc,
                      int nkeys, int argc, const char **argv, const size_t *lens);
/* No more commands. done runs now when every answer is in (or none was sent), else from the
 * last answer. g must not be used after this call. */
void store_gather_end(struct store_gather *g);

#endif
