/* metrics.h (api) - the page of GET /metrics.
 * runs on: core thread. */
#ifndef RELAY_API_METRICS_H
#define RELAY_API_METRICS_H

struct core;
struct evbuffer;

/* Append every counter and gauge of c (struct metrics, store stats, upstream state, webhook
 * endpoints, dashboard sessions) to out as Prometheus text exposition format 0.0.4: HELP and
 * TYPE lines, names prefixed "statusrelay_", counters suffixed "_total". */
void metrics_render(struct core *c, struct evbuffer *out);

#endif
