-- req_gc.lua - one bounded step of the request retention sweep (store/janitor.c runs it
-- periodically in every process, one partition at a time; each step is idempotent).
-- A request first seen before the cutoff whose watch has ended (not watched, not held by an
-- anonymous dashboard watch) and whose last event and last status change are older than the
-- cutoff loses its record and index entries: {P}:req:<id>, {P}:all, {P}:st:<status>,
-- {P}:tl:<id> (or the hash's "tl" / "tl1": store/tl_lib.lua), and its search index entries (store/search_lib.lua). Its events stay in the event stream until the stream's own bounds trim them;
-- its deliveries keep their own bounds. If the request is seen again later it starts a new
-- record, and so a new generation (protocol/event.h: gen), whose event ids never repeat the
-- deleted record's: a receiver that remembers webhook-ids does not drop them as duplicates.
-- KEYS: 1 {P}:all
-- ARGV: 1 tag (the partition's), 2 cutoff ms, 3 batch (entries examined at most),
--       4 cursor: the first-seen score to resume at ("" = from the oldest)
-- Returns {requests deleted, next cursor ("" = the scan reached the cutoff: the next step
-- starts again from the oldest)}.
-- #include search_lib.lua
-- #include tl_lib.lua
local tag, cutoff = ARGV[1], tonumber(ARGV[2])
local batch = tonumber(ARGV[3])
local from = ARGV[4] == '' and '-inf' or ARGV[4]
local es = redis.call('ZRANGEBYSCORE', KEYS[1], from, '(' .. ARGV[2], 'WITHSCORES', 'LIMIT', 0,
                      batch)
local deleted = 0
for i = 1, #es, 2 do
  local id = es[i]
  local req, tl = tag .. ':req:' .. id, tag .. ':tl:' .. id
  local h = redis.call('HMGET', req, 'watch', 'anon', 'chg', 'status', 'tl', 'tl1')
  -- no phase: a record of a version before watches, ended unless it is still on the
  -- active poll tier (store/watch_lib.lua watch_read); an index entry without a record
  -- reads as ended too and just goes
  local ended = h[1] == 'ended' or (not h[1] and not redis.call('ZSCORE', tag .. ':poll', id))
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
    redis.call('ZREM', KEYS[1], id)
    if h[4] then
      redis.call('ZREM', tag .. ':st:' .. h[4], id)
    end
    deleted = deleted + 1
  end
end
local nxt = ''
if #es == batch * 2 then
  nxt = es[#es]
  if nxt == es[2] then
    -- a whole batch on one millisecond and nothing of it deletable: step past it
    nxt = '(' .. nxt
  end
end
return {deleted, nxt}
