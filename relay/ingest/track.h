/* track.h - start and stop tracking requests: the Redis write (store/track.lua: trk flag,
 * metadata, a watch that starts now with an immediate first poll), then the watched set is
 * read again so the upstream websocket holder subscribes it (relay/ingest/watch.c).
 * runs on: core thread. */
#ifndef RELAY_TRACK_H
#define RELAY_TRACK_H

#include <stddef.h>

struct core;

/* err NULL on success; created = how many ids were not tracked before. */
typedef void track_done_cb(void *arg, const char *err, size_t created);

/* Track ids (each already validated with proto_request_id_valid). metadata: compact JSON
 * object text that passed proto_metadata_parse, or NULL; stored only when given (it replaces
 * the previous one), and copied as it is into every later event of the request
 * (store/apply.lua, "statusrelay.metadata"). Idempotent. Returns 0 (cb called once) or -1
 * when Redis is not ready (cb not called). */
int track_requests(struct core *c, const char *const *ids, size_t n, const char *metadata,
                   track_done_cb *cb, void *arg);

/* Stop tracking: trk=0, the watch ends (no polls, unsubscribed upstream). found = 0 when the id is
 * unknown (REST answers 404). */
typedef void untrack_done_cb(void *arg, const char *err, int found);
int untrack_request(struct core *c, const char *id, untrack_done_cb *cb, void *arg);

#endif
