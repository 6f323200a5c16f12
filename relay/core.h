/* core.h - the daemon's core: owns the libevent loop and every piece of application state.
 *
 * Start-up order (serve.c): config -> core_new (event_base with pthreads, store, applier,
 * httpc, queues) -> ws thread -> REST API -> upstream client and poller -> loop. Shutdown in
 * reverse. Modules reach each other through struct core; none keeps globals.
 * runs on: core thread (except the queues, see xq.h). */
#ifndef RELAY_CORE_H
#define RELAY_CORE_H

#include "relay/config.h"
#include "relay/metrics.h"

#include <stdint.h>

struct event_base;
struct event;
struct store;
struct applier;
struct janitor;
struct httpc;
struct xq;
struct ws_thread;
struct ingest;
struct upstream;
struct poller;
struct feed;
struct chains;
struct api;
struct webhooks;
struct hub;
struct watch;
struct delivery;

struct core {
    const struct config *cfg;
    struct event_base *base;
    struct store *store;
    struct applier *applier;
    struct janitor *janitor;   /* retention sweep and write probe (store/janitor.c) */
    struct httpc *httpc;
    struct xq *to_ws, *to_core;
    struct event *wake_ev;
    struct ws_thread *ws;
    struct ingest *ingest;
    struct upstream *upstream;
    struct poller *poller;
    struct feed *feed;         /* the changes feed and backfills (relay/ingest/feed.c) */
    struct chains *chains;     /* the upstream chain list (relay/ingest/chains.c) */
    struct watch *watch;       /* watched set, watch expiry, stuck gauges (relay/ingest/watch.c) */
    struct anon *anon;         /* anonymous dashboard watches (relay/ingest/anon.c) */
    struct api *api;
    struct webhooks *webhooks; /* the endpoint set (relay/delivery/endpoints.c) */
    struct delivery *delivery; /* owns the set, fan-out and dispatcher (relay/delivery/delivery.c) */
    struct hub *hub;           /* dashboard stream, core side (relay/dash/hub.c) */
    struct metrics metrics;
    char instance_id[40]; /* random per process: lease holder name, consumer name */
    int64_t started_ms;
    int shutting_down;
};

/* Create the loop and the modules that need no network yet. NULL after logging on failure. */
struct core *core_new(const struct config *cfg);
/* Start listeners and connections; returns 0 or -1 (port in use, ...). */
int core_start(struct core *c);
/* Run until core_stop; returns the process exit status. */
int core_run(struct core *c);
/* Begin graceful shutdown (signal handlers call this on the loop). */
void core_stop(struct core *c);
void core_free(struct core *c);

#endif
