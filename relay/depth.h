/* depth.h - the depth gauges of /metrics: deliveries by queue (due, in flight, dead), the poll
 * tiers (tracked_polled, poll_urgent, watch_settled, watch_anon) and requests_by_status.
 *
 * A timer counts the Redis sets behind them every DEPTH_INTERVAL_MS (one pipelined round of
 * ZCARDs, O(1) each) and writes the totals into struct metrics, so rendering /metrics never
 * waits for Redis. With partitions each gauge is the sum over the partitions' keys. A gauge
 * stays -1 until its first count, and keeps its last value when a count fails.
 * Owned by core (core.c creates it with the store and frees it with the loop's events).
 * runs on: core thread. */
#ifndef RELAY_DEPTH_H
#define RELAY_DEPTH_H

struct event_base;
struct store;
struct metrics;

#define DEPTH_INTERVAL_MS 2000

struct depth;

/* Set the gauges to -1 (unknown) and start the timer; rounds run only while s is ready.
 * A round in flight needs only m: its answers write into m when they come back, even after
 * depth_free (store_free completes them), so m must outlive s. Never NULL. */
struct depth *depth_new(struct event_base *base, struct store *s, struct metrics *m);
/* Stop the timer; NULL-safe. */
void depth_free(struct depth *d);

#endif
