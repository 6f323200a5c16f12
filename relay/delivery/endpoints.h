/* endpoints.h - the set of webhook endpoints of a process (struct webhooks): loaded from
 * Redis, found by id, written (put/delete through store/wh_*.lua), reloaded; plus the
 * resolver that checks URL hosts and the script handles of the API's reads and replays.
 * One endpoint (struct webhook) is relay/delivery/endpoint.h. The fan-out, the dispatcher and
 * the replay read this set; the service that owns the set, the fan-out and the dispatcher is
 * relay/delivery/delivery.h (it sits above them: this module knows none of them).
 *
 * Every process keeps a copy of the endpoint set (sorted by id), loaded atomically with a
 * version number ({P}:whv, bumped by every change). Fan-out passes the version it matched
 * against to its Lua script, which refuses when the set moved on; the process then reloads
 * and matches again, so an event is never fanned out against a stale endpoint set.
 * The set holds one reference per endpoint; a reload updates surviving endpoints in place
 * (the dispatcher's per-endpoint AIMD state stays) and marks vanished ones deleted.
 * runs on: core thread. */
#ifndef RELAY_DELIVERY_ENDPOINTS_H
#define RELAY_DELIVERY_ENDPOINTS_H

#include "relay/delivery/endpoint.h" /* the set hands out endpoints; callers read them */

#include <stddef.h>
#include <stdint.h>

struct core;
struct store_script;

#define WH_RETENTION_MS (7LL * 24 * 3600 * 1000) /* finished deliveries and bodies */
#define WH_LIST_CAP 100000       /* deliveries listed per endpoint (oldest trimmed) */

struct webhooks;

/* Create the endpoint set of c and set c->webhooks (loaded when Redis is up). */
struct webhooks *webhooks_new(struct core *c);
/* Closing, in two steps around the owner's teardown of what reads the set: detach marks it
 * closing and clears c->webhooks; close drops the endpoints, fails waiting reloads and frees
 * the set once no store callback holds it. NULL-safe. */
void webhooks_detach(struct webhooks *w);
void webhooks_close(struct webhooks *w);

/* c's set (NULL before delivery_start and once the service is going away). */
struct webhooks *webhooks_of(struct core *c);
/* The endpoint with id, borrowed (valid until the next reload unless referenced); NULL. */
struct webhook *webhooks_find(struct webhooks *w, const char *id);
size_t webhooks_count(const struct webhooks *w);
/* The i-th endpoint, sorted by id; borrowed; NULL past the end. */
struct webhook *webhooks_at(struct webhooks *w, size_t i);
/* Version of the loaded set ({P}:whv); "-" until the first load. */
const char *webhooks_version(const struct webhooks *w);
/* The endpoint view of the loaded set that relay/delivery/wh_view.c built (several
 * partitions), kept by the set until its next load or close; NULL when none is kept.
 * webhooks_view_keep hands a malloc'd view to the set (it frees the one it had). */
const char *webhooks_view(const struct webhooks *w);
void webhooks_view_keep(struct webhooks *w, char *view);

/* Reload the endpoint set from Redis; cb(arg, err) once done (err NULL or a store error).
 * Reloads requested while one runs are coalesced into one more. cb may be NULL; it runs
 * exactly once, at once (store_err_disconnected) when the set is closing. */
typedef void webhooks_done_cb(void *arg, const char *err);
void webhooks_reload(struct webhooks *w, webhooks_done_cb *cb, void *arg);

/* Resolve host and refuse it when any address is forbidden: cb(arg, code, message) with
 * code NULL when allowed. Async (evdns, the set's resolver); cb runs exactly once, maybe
 * before this returns when nothing needs resolving. */
typedef void webhooks_dns_cb(void *arg, const char *code, const char *msg);
void webhooks_check_host(struct webhooks *w, const char *host, webhooks_dns_cb *cb, void *arg);

/* ---- Redis CRUD (async; scripts in store/wh_*.lua) ------------------------------------- */

/* Create (create = 1) or update an endpoint with field/value pairs (nfields pairs; a value
 * of NULL deletes the field). cb(arg, err, found): found = 0 when updating an unknown id or
 * creating an existing one. The local set is reloaded before cb runs. Returns 0 (cb called
 * exactly once, later) or -1 (Redis unavailable; cb not called). */
typedef void webhooks_put_cb(void *arg, const char *err, int found);
int webhooks_put(struct webhooks *w, const char *id, int create, const char *const *fields,
                 int nfields, webhooks_put_cb *cb, void *arg);
/* Delete an endpoint with its queue and delivery log. cb(arg, err, found); returns as
 * webhooks_put. */
int webhooks_delete(struct webhooks *w, const char *id, webhooks_put_cb *cb, void *arg);

#endif
