/* keys.h - the only place that builds Redis key names. All keys live under one hash tag,
 * "{<prefix>}", so one deployment's keys map to one Redis Cluster slot.
 *
 *   key                          type    what
 *   {P}:req:<id>                 hash    last-known state of a request: rec (record JSON),
 *                                        seq, status, meta (metadata JSON), first (ms),
 *                                        trk ("1" tracked / "0"), src (last source)
 *   {P}:all                      zset    every known request id, score = first seen (ms)
 *   {P}:st:<status>              zset    request ids by current status, score = first seen
 *   {P}:poll                     zset    tracked, non-final request ids, score = next poll
 *                                        time (ms); polls are claimed from here
 *   {P}:events                   stream  the event log: id (event id), rid, seq, rec
 *   {P}:tl:<id>                  list    stream ids of a request's events (timeline)
 *   {P}:budget:<unix minute>     string  upstream HTTP calls spent in that minute (all
 *                                        processes), expires after 2 minutes
 *   {P}:leader                   string  holder of the upstream websocket lease (PX)
 *   {P}:wh:<id>                  hash    webhook endpoint
 *   {P}:whs                      zset    endpoint ids by creation time
 *   {P}:dl:<delivery id>         hash    delivery: state, attempts, next attempt
 *   {P}:due                      zset    pending deliveries by due time (ms)
 *   {P}:inflight                 zset    claimed deliveries by lease expiry (ms)
 *   {P}:dead                     zset    dead deliveries by time of death
 *   {P}:dls:<webhook id>         zset    an endpoint's deliveries by creation time
 *   {P}:order:<wh>:<id>          list    per endpoint and request: delivery ids in seq order
 *
 * runs on: any thread (pure string building). */
#ifndef STORE_KEYS_H
#define STORE_KEYS_H

#include <stddef.h>

/* Each writes "<tag>:<kind>[:<a>[:<b>]]" into buf and returns its length (truncated keys are
 * impossible for ids within PROTO_MAX_ID and buf >= KEY_MAX). */
#define KEY_MAX 400
size_t key_build(char *buf, size_t n, const char *tag, const char *kind, const char *a,
                 const char *b);

#endif
