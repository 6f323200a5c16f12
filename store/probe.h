/* probe.h - the readiness probe: one cheap read (EXISTS "{P}:readyz", a key of the
 * deployment's tag, routed like any command, cluster included) whose only news is that Redis
 * answered. GET /readyz (relay/api/health.c) times it. runs on: core thread. */
#ifndef STORE_PROBE_H
#define STORE_PROBE_H

struct store;

/* Redis answered (err NULL, or store_err_server) or the connection went away
 * (store_err_disconnected). */
typedef void store_probe_cb(void *arg, const char *err);
/* Send the probe. Returns 0 (cb is called exactly once, later) or -1 when the store is not
 * ready (cb is not called). */
int store_probe(struct store *s, store_probe_cb *cb, void *arg);

#endif
