/* chains.h - the upstream's chain list (GET /chains): names, icons, explorer URLs and the
 * disabled / blockProductionLagging marks the dashboard page and the CLI show.
 *
 * Every STATUSRELAY_CHAINS_REFRESH (10 min) one process at a time (the lease {P}:chainsl,
 * store/chains_poll.lua) reads GET /chains, drawing the call from the shared upstream budget
 * (poller_get), and stores the upstream's body verbatim in {P}:chains (store/keys.h) when it
 * is a JSON object with a "chains" array. A failed read is retried by the next due look: at
 * once when no call was made (budget spent), after 30 s on a 429/5xx/transport error, after
 * a full period on any other answer. GET /v1/chains (relay/api/chains.c) serves the cached
 * body from Redis in every process.
 *
 * The dashboard port gets the list too: every process looks at the cache every refresh/4
 * (250 ms .. 5 s) and, when its fetch time changed, hands chains_slim() of it to the ws
 * thread (XMSG_DASH_ACCEPT_SUB, session 0, DASH_OP_CHAINS), which serves it at
 * GET /chains.json to the page (relay/edge/ws_server.c).
 * runs on: core thread. */
#ifndef RELAY_CHAINS_H
#define RELAY_CHAINS_H

#include <stddef.h>

struct core;
struct chains;

/* Create (no I/O yet). c->poller and c->store must exist. Never NULL (aborts on OOM). */
struct chains *chains_new(struct core *c);
/* Start the periodic look (first one as soon as Redis is ready). */
void chains_start(struct chains *ch);
/* Free. Call after httpc_free and store_free (their completions may call back here).
 * NULL-safe. */
void chains_free(struct chains *ch);

/* The explorer lookup (protocol/facts.h) of the chain list this process last read from the
 * cache (rebuilt when the list changes), NULL while none is known: request facts link their
 * transactions with it (relay/ingest/facts.c, GET /v1/requests/{id}). Borrowed until the next
 * change (core thread). */
struct proto_explorers;
const struct proto_explorers *chains_explorers(const struct chains *ch);

/* The dashboard's copy of an upstream /chains body: {"chains":[...]} keeping, per chain, only
 * the fields the page reads (id, name, displayName, vmType, iconUrl, logoUrl, brandColor,
 * explorerUrl, explorerName, explorerPaths, explorerQueryParams, disabled,
 * blockProductionLagging, depositEnabled), values untouched. Returns malloc'd compact JSON
 * (*out_len set), or NULL when body is not an object with a "chains" array. Pure. */
char *chains_slim(const char *body, size_t len, size_t *out_len);

#endif
