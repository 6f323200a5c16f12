/* keys.h - the table of every Redis key, and key_build, which the C code uses to name them.
 * Lua scripts that reach keys beyond their KEYS (the wh_*.lua and watch_*.lua steps, which
 * get the tag "{P}" as an argument) build the same names from this table. With
 * STATUSRELAY_PARTITIONS = 1 (the default) all keys live under one hash tag, "{<prefix>}", so
 * one deployment's keys map to one Redis Cluster slot. With N > 1 partitions the keys of a
 * request (its state, events, watch, polls, deliveries) live under its partition's tag
 * "{<prefix>:p<k>.<x>}" (key_spread_tag; "{<prefix>:p<k>}", key_part_tag, in a deployment
 * recorded before the spread tags; k = key_partition(id)) and the deployment-wide ones
 * (endpoints, budget, leases, chains, config) stay under "{<prefix>}": docs/partitions.md.
 *
 *   key                          type    what
 *   {P}:req:<id>                 hash    last-known state of a request: rec (record JSON;
 *                                        deflated once its watch ended: store/rec.h),
 *                                        seq, status, meta (metadata JSON), first (ms),
 *                                        trk ("1" tracked / "0"), src (last source), chg
 *                                        (ms of the last status change), and its watch
 *                                        (store/watch_lib.lua): watch (active|settled|
 *                                        ended), wu (watch until ms or ""), wb (window
 *                                        start ms), pt (poll tier u|a|s|n or ""), anon
 *                                        ("1" watched anonymously, store/anon_lib.lua),
 *                                        miss (404 answers to its polls while anonymous),
 *                                        cf (ms the upstream last confirmed the state:
 *                                        store/apply.lua, apply_confirm.lua)
 *                                        fx (the request facts, compressed: store/facts.h;
 *                                        written by store/facts_put.lua only), fk ("1": the
 *                                        changes feed returned it, store/feed_mark.lua),
 *                                        tl (the stream ids of its events while they fit
 *                                        64 bytes, then {P}:tl:<id>: store/tl_lib.lua,
 *                                        watch_lib.lua tl_push; tl1: an older version's one id)
 *                                        rzev (typed events waiting for a deflated rec:
 *                                        watch_lib.lua watch_event, store/rec_put.lua)
 *   {P}:all                      zset    an older version's every request id by first seen
 *                                        (ms): no longer written; walked once per process
 *                                        start (ids only it holds copied into {P}:ct) and
 *                                        drained by the retention sweep (store/req_gc.lua)
 *   {P}:st:<status>              zset    request ids by current status, score = the {P}:ct
 *                                        score (an older version's: first seen, until the
 *                                        next status change or facts)
 *   {P}:pollu / :poll / :polls   zset    the poll schedule of watched requests by due time
 *   / :polln                             (ms), one per tier: urgent (unconfirmed active),
 *                                        active (safety), settled, anonymous; claimed in
 *                                        that order
 *   {P}:anonh                    zset    holders of anonymous watches "<id>|<instance>",
 *                                        score 0 (store/anon_lib.lua)
 *   {P}:anonx                    zset    the same holders by lease expiry (ms)
 *   {P}:anon404                  zset    ids the upstream does not know, kept from
 *                                        anonymous watches until the score (ms); capped
 *   {P}:watch                    zset    watched (active or settled) ids by change version
 *   {P}:unwatch                  zset    ids whose watch ended, by change version: those of
 *                                        the last 30 s and those the record pass has not
 *                                        read ({P}:rzk) while one runs; trimmed by
 *                                        watch_sync.lua, capped at 100,000 (watch_lib.lua)
 *   {P}:wver / {P}:wlow          string  change version counter / newest version trimmed
 *                                        from unwatch (a process behind it reads the whole
 *                                        watched set: watch_sync.lua)
 *   {P}:wvt                      zset    change versions by the Redis time (ms) they were the
 *                                        newest, one each 5 s, the last ~35 s (watch_sync.lua)
 *   {P}:rzon                     string  a process deflates records (PX 10 min, kept alive by
 *                                        its watch_sync.lua calls): the trim keeps {P}:rzk
 *   {P}:rzk                      string  the unwatch version the record pass read to
 *                                        (store/rec_scan.lua; {P}:rzc: an older version's)
 *   {P}:rzq                      zset    ids whose typed events wait for their deflated
 *                                        rec, by the time the first one was due (rec_put.lua)
 *   {P}:wend                     zset    watched ids with an end, by watch-until (ms)
 *   {P}:act                      zset    active ids other than waiting, by last status
 *                                        change (ms): stuck requests are the old ones
 *   {P}:unset                    zset    the same ids by first seen (oldest unsettled)
 *   {P}:events                   stream  the event log: id, rid, seq, rec (read: store/events.h)
 *   {P}:tl:<id>                  list    stream ids of a request's events (timeline), once
 *                                        they outgrow the hash's tl field (at most 200)
 *   {P}:ix                       hash    search index (store/search_lib.lua): "<kind>:<value>"
 *                                        (kind w, tx, ref, dep) -> the ids of its requests,
 *                                        space-separated (<= 16), or "*"; the request's own
 *                                        entries are its hash's "ix" field (one per line)
 *   {P}:ix:<kind>:<value>        zset    the ids of a value with more than 16 requests, by
 *                                        creation time (ms); at most 1000 (newest kept)
 *   {P}:ct                       zset    every request id by creation time (ms): createdAt
 *                                        from its facts, first seen until then; the listing
 *                                        and the retention sweep read it (the hash's "cx"
 *                                        holds the same score: store/apply.lua)
 *   {P}:budget                   hash    the upstream budget's token bucket shared by all
 *                                        processes: t (tokens), ts (last refill ms);
 *                                        expires after 2 idle minutes
 *   {P}:budgetr                  hash    the same for the anonymous status reads' share of
 *                                        it (store/poll_claim.lua)
 *   {P}:budgetw                  string  a single reserved call (a feed page, a read) found
 *                                        the budget empty: claims of polls leave it one call
 *                                        (PX 1 s; store/poll_claim.lua, budget_take.lua)
 *   {P}:leader                   string  holder of the upstream websocket lease (PX)
 *   {P}:wsok                     string  the lease holder's websocket is healthy (PX;
 *                                        store/leader.lua)
 *   {P}:feedl                    string  holder of the changes feed lease (PX)
 *   {P}:feedc                    hash    the changes feed's cursor: at (newest updatedAt
 *                                        applied, ms) (store/feed_commit.lua)
 *   {P}:feeds                    zset    feed items applied within the overlap behind the
 *                                        cursor: "<id>:<updatedAt ms>", score = updatedAt
 *   {P}:feedok                   string  the feed is healthy (PX 2 intervals, set per page)
 *   {P}:feedr                    string  while the feed is not healthy: the watch version
 *                                        feed_restore.lua's pass reached (DEL per page)
 *   {P}:bf:<id>                  hash    a backfill's progress: since, until, created,
 *                                        pages, items, applied, done, error (PX 24 h)
 *   {P}:config                   hash    the deployment record: partitions (the count N a
 *                                        deployment with N > 1 recorded, "<N>/spread" with
 *                                        the spread tags, "<N>" recorded before them with
 *                                        the plain ones; none: 1), written once by
 *                                        store/partitions.lua
 *   {P}:chains                   hash    the upstream chain list (relay/ingest/chains.c):
 *                                        body (the upstream's GET /chains body, verbatim:
 *                                        GET /v1/chains), at (ms it was fetched)
 *   {P}:chainsl                  string  holder of the chain list refresh lease (PX): one
 *                                        process fetches (store/chains_poll.lua)
 *   {P}:wh:<id>                  hash    webhook endpoint: url, filters, headers (JSON),
 *                                        description, enabled ("1"/"0"), signatureScheme,
 *                                        signing, mode ("all"/"latest"), secret, prevSecret,
 *                                        prevExpiresAt, createdAt, failSince, disabledReason,
 *                                        disabledAt, rateLimit (deliveries per second)
 *   {P}:whs                      zset    endpoint ids by creation time
 *   {P}:rl:<webhook id>          list    a rate-limited endpoint's grants of the last
 *                                        window: "<Redis ms>:<count>", oldest first
 *                                        (store/ratelimit_take.lua; PX 2 windows)
 *   {P}:whv                      string  endpoint-set version, INCR on every change: fan-out
 *                                        refuses to match against a stale set
 *   {P}:whgone                   zset    deleted endpoints whose deliveries the retention sweep
 *                                        (store/wh_gc.lua) still has to purge, by delete time
 *   {P}:probe                    string  the write probe of readiness (store/janitor.c; PX)
 *   {P}:fanout                   string  holder of the webhook fan-out lease (PX)
 *   {P}:body:<event id>          string  the webhook body of an event, encoded once (PX
 *                                        retention); missing -> re-encoded from the stream
 *   {P}:dl:<delivery id>         hash    delivery "<event id>.<endpoint id>": ev, wh, rid,
 *                                        seq, st (event status), sid (stream id), et (event
 *                                        ms), ct (created ms), state (pending|delivered|dead|
 *                                        superseded|skipped), att (attempts this run), nlog,
 *                                        a<n> (attempt log JSON), next (due ms), q ("1" when
 *                                        queued or in flight), rp ("1" replay), done (ms)
 *   {P}:due                      zset    endpoint ids with queued deliveries, score = the
 *                                        earliest due time of that endpoint's queue
 *   {P}:dq:<wh>                  zset    an endpoint's queued deliveries by due time (ms)
 *   {P}:inflight                 zset    claimed deliveries by lease expiry (ms)
 *   {P}:dead                     zset    dead deliveries by time of death
 *   {P}:skipped                  zset    deliveries skipped while their endpoint was disabled
 *                                        (both swept with their records after
 *                                        STATUSRELAY_DEAD_RETENTION by store/wh_gc.lua)
 *   {P}:dls:<webhook id>         zset    an endpoint's deliveries by creation time (listing)
 *   {P}:dlh:<webhook id>         hash    an endpoint's delivered log: delivery id -> compact entry
 *                                        of a delivery delivered at its first attempt (no dl hash;
 *                                        wh_fanout.lua writes, wh_list.lua reads, capped with dls)
 *   {P}:order:<wh>:<id>          zset    per endpoint and request: unfinished delivery ids
 *                                        by seq; only one member is queued at a time
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

/* Partitions (docs/partitions.md). 1 <= nparts <= KEY_MAX_PARTITIONS. */
#define KEY_MAX_PARTITIONS 64
#define KEY_TAG_MAX 168 /* a tag buffer: "{" prefix ":p" 2 digits "." 7 digits "}" for any
                         * valid prefix (<= 150 bytes) */
/* The partition of request id[0..len): CRC16-XMODEM of the id bytes (the Redis Cluster
 * hash, cluster_crc16) mod nparts; 0 when nparts <= 1. A fixed function: the same in every
 * process and version (changing it would move requests between partitions). */
unsigned key_partition(const char *id, size_t len, unsigned nparts);
/* The hash tag of partition part of nparts into buf: "{<prefix>}" when nparts <= 1 (today's
 * tag: a 1-partition deployment keeps every key name), else "{<prefix>:p<part>}". Returns
 * the length (truncated to n - 1 like snprintf). */
size_t key_part_tag(char *buf, size_t n, const char *prefix, unsigned part, unsigned nparts);
/* The tag schemes of a deployment with N > 1, recorded in {P}:config (store/partitions.lua):
 * KEY_TAGS_PLAIN is "{<prefix>:p<k>}" (key_part_tag; every deployment recorded before the
 * spread scheme keeps it), KEY_TAGS_SPREAD is key_spread_tag's (new deployments). */
enum key_tags { KEY_TAGS_PLAIN = 0, KEY_TAGS_SPREAD = 1 };
/* The spread tag of partition part of nparts: "{<prefix>:p<part>.<x>}" with x the smallest
 * integer >= 0 whose tag content "<prefix>:p<part>.<x>" hashes (cluster_crc16 mod 16384,
 * Redis Cluster's slot) into the middle half of the part-th of nparts equal slot ranges:
 * [(4 part + 1) * 16384 / (4 nparts), (4 part + 3) * 16384 / (4 nparts)) rounded down. So
 * the N partitions sit one in each of the N equal ranges that redis-cli --cluster create
 * gives N masters (and N / M in each of M masters' when M divides N), a slot or more away
 * from every range edge. A fixed function of (prefix, part, nparts): the same in every
 * process and version; changing it would move partitions. "{<prefix>}" when nparts <= 1.
 * If no x < 10^7 hits the window (never seen), the x whose slot is nearest the window's
 * centre is taken. Returns the length (truncated to n - 1 like snprintf). */
size_t key_spread_tag(char *buf, size_t n, const char *prefix, unsigned part, unsigned nparts);
/* The tag of partition part in scheme tags: key_part_tag or key_spread_tag. */
size_t key_tag_of_scheme(char *buf, size_t n, enum key_tags tags, const char *prefix,
                         unsigned part, unsigned nparts);
/* The ids of ids[0..n) in partition part, in their order, into out (room for n). Returns
 * how many. For the calls that take many ids (one call per partition). */
size_t key_ids_in(unsigned part, unsigned nparts, const char *const *ids, size_t n,
                  const char **out);

#endif
