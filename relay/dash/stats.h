/* stats.h - the stats frames of the dashboard ("statusrelay.stats" subscribers): one per
 * HUB_STATS_MS to every subscriber, built from core->metrics, the upstream state and the ws
 * thread's counters, and one at once to a new subscriber.
 * runs on: core thread. */
#ifndef RELAY_DASH_STATS_H
#define RELAY_DASH_STATS_H

#include "relay/dash/internal.h"

#include <stdint.h>

/* Send one stats frame to session sess now. */
void dash_stats_frame_to(struct hub *h, uint64_t sess);
/* The stats timer (arg = hub; wired by hub_new): samples the event rate, sends the frame. */
void dash_on_stats_tick(evutil_socket_t fd, short what, void *arg);

#endif
