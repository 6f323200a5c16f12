/* cluster.h - Redis Cluster routing under the store (a redis-cluster:// URL): reads the slot
 * map (CLUSTER SLOTS) from any reachable node, keeps one store/conn.c connection per master
 * on the core event_base, and sends every command to the master of its routing key's slot
 * (cluster_cmd_key). MOVED: the slot's owner is updated at once, the map is re-read, the
 * command resent (at most 5 hops). ASK: ASKING + the command on the named node, map kept.
 * TRYAGAIN / CLUSTERDOWN / LOADING / MASTERDOWN: resent after a short pause until the command
 * timeout. NOSCRIPT: resent as EVAL on the same master (conn.c; scripts load per master).
 *
 * The guarantees are the single-Redis store's (store.h): the cluster is "up" when it has a
 * map and every master of it is connected and past its handshake; while it is down,
 * cluster_send returns -1 and calls nothing. A command whose connection dies before its
 * answer completes with store_err_disconnected (it may or may not have run, as with a plain
 * Redis restart); one that was accepted but not yet written (waiting for a master to
 * connect, for a redirect or a retry) is sent once a master is there, re-routed after a map
 * change, or completes with store_err_disconnected after the command timeout. A lost master
 * makes the cluster down until the map is re-read from any reachable node (a promoted
 * replica) and its masters are connected. runs on: core thread only. */
#ifndef STORE_CLUSTER_H
#define STORE_CLUSTER_H

#include "store/command.h"

#include <stdint.h>

struct event_base;
struct cluster;

typedef void cluster_state_cb(void *arg, int up);

struct cluster_opts {
    const char *url;         /* redis-cluster://... (cluster_url_parse) */
    int64_t cmd_timeout_ms;  /* > 0 */
    int fatal_checks;        /* 1: an allkeys-* eviction policy on a master stops the cluster */
    cluster_state_cb *on_state; /* up/down changes; also a down when a fatal check failed */
    void (*on_error)(void *arg, const char *msg); /* every error reply handed to a caller */
    void *arg;
};

/* NULL with one logged line naming the problem on a bad URL. */
struct cluster *cluster_new(struct event_base *base, const struct cluster_opts *o);
/* Completes every accepted command with store_err_disconnected, then frees. NULL-safe. */
void cluster_free(struct cluster *cl);
void cluster_start(struct cluster *cl);
const char *cluster_fatal(const struct cluster *cl);

/* Send argv (argv[i] and both arrays malloc'd; taken on every path). sc non-NULL: argv is an
 * EVALSHA of that script (resent as EVAL on NOSCRIPT). Returns 0 (cb runs exactly once) or
 * -1 when the cluster is not up (cb not called). */
int cluster_send(struct cluster *cl, store_cb *cb, void *arg, const struct store_script *sc,
                 int argc, char **argv, size_t *lens);

void cluster_stats_get(const struct cluster *cl, struct store_stats *out);
/* The master serving slot as this process routes to it now ("host:port" into buf, n bytes):
 * 0, or -1 when no map is read yet or the slot has no owner. */
int cluster_slot_node(const struct cluster *cl, unsigned slot, char *buf, size_t n);

#endif
