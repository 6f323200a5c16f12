-- req_gc.lua - one bounded step of the request retention sweep (store/janitor.c runs it
-- periodically in every process, one partition at a time; each step is idempotent).
-- A request first seen before the cutoff (the hash's "first") whose watch has ended (not
-- watched, not held by an anonymous dashboard watch) and whose last event and last status
-- change are older than the cutoff loses its record and index entries: {P}:req:<id>,
-- {P}:st:<status>, {P}:tl:<id> (or the hash's "tl" / "tl1": store/tl_lib.lua), and its search
-- index entries with its {P}:ct member (store/search_lib.lua). Its events stay in the event stream until the stream's own bounds trim them;
-- its deliveries keep their own bounds. If the request is seen again later it starts a new
-- record, and so a new generation (protocol/event.h: gen), whose event ids never repeat the
-- deleted record's: a receiver that remembers webhook-ids does not drop them as duplicates.
-- The scan reads {P}:ct, every request by creation time (first seen until its facts say), up
-- to the cutoff: a request is created before it is first seen, so every candidate is there
-- (one whose createdAt is a little after its first sighting - clocks - on a later pass). One
-- created before the cutoff but first seen after it is skipped and examined again by later
-- passes until its first sighting is old too; the cursor steps past it.
-- An older version's index {P}:all (every request by first seen; no longer written): a deleted
-- request leaves it too, so it drains with the retention (docs/operations.md: UNLINK it once
-- every process runs this version). The walk (cursor "a..."; store/janitor.c sends it once
-- per partition after the process starts) copies into {P}:ct the ids only {P}:all holds
-- (requests a version before {P}:ct stored and nothing wrote since), scored by first seen.
-- KEYS: 1 {P}:ct, 2 {P}:all (an older version's)
-- ARGV: 1 tag (the partition's), 2 cutoff ms, 3 batch (entries examined at most),
--       4 cursor: the creation-time score to resume at ("" = from the oldest), or "a" and the
--       first-seen score to resume the walk of {P}:all at ("a" = from its start)
-- Returns {requests deleted, next cursor ("" = the scan reached the cutoff: the next step
-- starts again from the oldest)}; the walk {ids copied (-1: no {P}:all), next cursor ("a..."
-- or "" = the walk is done)}.
-- #include search_lib.lua
-- #include tl_lib.lua
local tag, cutoff = ARGV[1], tonumber(ARGV[2])
local batch = tonumber(ARGV[3])

-- the cursor after a full batch es (id, score, ...): its last score, or past it when the
-- whole batch is on that one score (so the scan never stalls on it)
local function next_cursor(es)
  if #es < batch * 2 then
    return ''
  end
  local nxt = es[#es]
  if nxt == es[2] then
    nxt = '(' .. nxt
  end
  return nxt
end

if string.sub(ARGV[4], 1, 1) == 'a' then
  if redis.call('EXISTS', KEYS[2]) == 0 then
    return {-1, ''}
  end
  local from = ARGV[4] == 'a' and '-inf' or string.sub(ARGV[4], 2)
  local es = redis.call('ZRANGEBYSCORE', KEYS[2], from, '+inf', 'WITHSCORES', 'LIMIT', 0, batch)
  local copied = 0
  for i = 1, #es, 2 do
    copied = copied + redis.call('ZADD', KEYS[1], 'NX', es[i + 1], es[i])
  end
  local nxt = next_cursor(es)
  return {copied, nxt == '' and '' or 'a' .. nxt}
end

local from = ARGV[4] == '' and '-inf' or ARGV[4]
local es = redis.call('ZRANGEBYSCORE', KEYS[1], from, '(' .. ARGV[2], 'WITHSCORES', 'LIMIT', 0,
                      batch)
local deleted = 0
for i = 1, #es, 2 do
  local id = es[i]
  local req, tl = tag .. ':req:' .. id, tag .. ':tl:' .. id
  local h = redis.call('HMGET', req, 'watch', 'anon', 'chg', 'status', 'tl', 'tl1', 'first')
  -- no phase: a record of a version before watches, ended unless it is still on the
  -- active poll tier (store/watch_lib.lua watch_read); an index entry without a record
  -- reads as ended too and just goes
  -- first seen (a hash without "first", never tracked nor applied: its creation score)
  -- before the cutoff, else passed over at the cost of this HMGET (a request created long
  -- before it was first seen, e.g. by a backfill of an old window, is read by every pass
  -- until then)
  local seen = tonumber(h[7] or es[i + 1]) < cutoff
  local ended = seen and (h[1] == 'ended' or
                          (not h[1] and not redis.call('ZSCORE', tag .. ':poll', id)))
  local old = ended and h[2] ~= '1' and tonumber(h[3] or '0') < cutoff and
              not redis.call('ZSCORE', tag .. ':watch', id)
  if old then
    -- the last event's time: its stream id's milliseconds (a change of hashes or details
    -- without a status change moves no "chg"); the newest of the hash's fields and the list
    local ids = tl_merge(h[5], h[6], nil)
    local last = redis.call('LINDEX', tl, -1)
    if #ids > 0 and (not last or tl_before(last, ids[#ids])) then
      last = ids[#ids]
    end
    if last and tonumber(string.match(last, '^(%d+)')) >= cutoff then
      old = false
    end
  end
  if old then
    search_drop(tag, id)
    redis.call('DEL', req, tl)
    redis.call('ZREM', KEYS[2], id)
    if h[4] then
      redis.call('ZREM', tag .. ':st:' .. h[4], id)
    end
    deleted = deleted + 1
  end
end
return {deleted, next_cursor(es)}
