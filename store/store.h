/* store.h - the one Redis connection of a process: hiredis async on the core event_base.
 *
 * Redis going away is normal. The store reconnects with capped exponential backoff and
 * jitter, re-runs the handshake (AUTH/SELECT, start-up checks, SCRIPT LOAD) and tells its
 * listeners when it is up or down. While it is not ready, store_cmd* return -1 and call
 * nothing: callers keep what must not be lost and retry on the next "up". A command that
 * has not been answered within the command timeout makes the store drop the connection, so
 * every pending callback completes (with store_err_disconnected) instead of hanging.
 * The connection itself (connect, handshake, backoff, timeouts, NOSCRIPT) is store/conn.c;
 * a redis-cluster:// URL goes through store/cluster.c, which keeps one such conn per master.
 * This header is what relay/ sees: it names no hiredis type. Commands, scripts and replies are
 * store/command.h's, for the store's own modules (relay/ speaks their typed calls).
 * runs on: core thread only. */
#ifndef STORE_STORE_H
#define STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct store;

/* Named error strings passed to callbacks (compare by pointer or strcmp). */
extern const char store_err_disconnected[]; /* connection lost before the answer */
extern const char store_err_server[];       /* Redis answered with an error reply */

/* up = 1 when the store became ready (after the handshake), 0 when it went down. */
typedef void store_state_cb(void *arg, int up);

struct store_opts {
    const char *url;      /* see store/redis_url.h: redis://[[user]:password@]host:port[/db] or
                           * unix:///path[?db=N]; a user is sent as AUTH user password */
    const char *prefix;   /* key prefix; keys are "{prefix}:..." */
    int64_t cmd_timeout_ms; /* default 5000 */
    int fatal_checks;     /* 1: an allkeys-* eviction policy makes store_start fail */
    int partitions;       /* STATUSRELAY_PARTITIONS (0 = 1): checked against the count the
                           * deployment's Redis recorded before the store is ready
                           * (store/partitions.lua); a difference is fatal */
};

/* Parse the URL and prepare; connects in store_start. NULL with a logged reason on a bad
 * URL. */
struct store *store_new(struct event_base *base, const struct store_opts *o);
/* Free; pending callbacks complete with store_err_disconnected first. NULL-safe. */
void store_free(struct store *s);

/* Register a listener for up/down changes (several allowed). */
void store_on_state(struct store *s, store_state_cb *cb, void *arg);

/* Connect and keep connected. Returns 0. The first handshake's fatal check failure (see
 * store_fatal) is reported through the state callbacks as a down with store_fatal() set. */
int store_start(struct store *s);
/* Non-NULL when start-up found a setting we refuse to run with (e.g. allkeys eviction). */
const char *store_fatal(const struct store *s);
int store_ready(const struct store *s);
/* A write refusal (Redis answering "OOM ...", "READONLY ..." or "MISCONF ..." to any command)
 * seen in the last STORE_REFUSAL_MEMORY_MS: its first line, borrowed until the next command;
 * NULL otherwise. store_write_ok forgets it (a write just succeeded). /readyz reports it. */
#define STORE_REFUSAL_MEMORY_MS 5000
const char *store_write_refused(const struct store *s);
void store_write_ok(struct store *s);
/* Prefix with hash tag, e.g. "{statusrelay}": the deployment tag (docs/partitions.md). */
const char *store_tag(const struct store *s);
/* The partition count N, and the hash tag of partition k < N (store_tag when N = 1, else
 * "{prefix:p<k>.<x>}" or, in a deployment recorded before the spread tags, "{prefix:p<k>}":
 * store/keys.h; borrowed for the store's life, set before the store is first ready). */
unsigned store_partitions(const struct store *s);
const char *store_part_tag(const struct store *s, unsigned k);
/* The deployment's tag scheme as its record says (docs/partitions.md): "spread" or "plain"
 * ("plain" with N = 1: the one tag {prefix}); NULL with N > 1 until the store was first
 * ready (the record not read yet). */
const char *store_tag_scheme(const struct store *s);
/* The tag of request id's partition (key_partition): every key of the request, its events,
 * watch, polls and deliveries carry it. store_tag when N = 1. */
const char *store_tag_of(const struct store *s, const char *id);
/* The tag argument of the delivery scripts (store/wh_*.lua) for partition k: its tag, and
 * with N > 1 "<partition tag> <deployment tag>" (endpoint hashes are deployment keys). */
const char *store_wh_tag(const struct store *s, unsigned k);
/* Where the keys of tag live (operators: `statusrelay partitions`): on a Redis Cluster its
 * slot is returned and the master this process routes it to now goes into node ("host:port",
 * "" while unknown); with a single Redis -1 and the Redis address (host:port or socket path). */
int store_tag_where(const struct store *s, const char *tag, char *node, size_t n);

/* Counters for metrics. */
struct store_stats {
    uint64_t commands, errors, reconnects, timeouts;
    uint64_t latency_ms_sum, latency_n;
    int64_t pending;
};
void store_stats_get(const struct store *s, struct store_stats *out);

#endif
