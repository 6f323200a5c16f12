-- wh_gc.lua - one bounded step of the retention sweep (store/janitor.c runs it periodically,
-- in every process; each step is idempotent):
--  1. dead and skipped deliveries that finished before the cutoff are deleted with their
--     index entries (the dead/skipped set, the endpoint's listing {P}:dls:<wh> and delivered
--     log {P}:dlh:<wh>): no index keeps an id whose record is gone;
--  2. endpoints deleted by wh_del.lua ({P}:whgone, by deletion time) lose their deliveries in
--     batches: records, order sets, listing, delivered log, queue; an endpoint leaves
--     {P}:whgone once nothing of it is left and the grace (a fan-out or an attempt that
--     matched it before the delete may still write) is over;
--  3. events older than the event cutoff are trimmed from the event stream (exactly, oldest
--     first, at most one batch: XRANGE then XTRIM MAXLEN, which Redis < 6.2 has too).
-- KEYS: 1 dead, 2 skipped, 3 whgone, 4 inflight, 5 events stream
-- ARGV: 1 tag (with several partitions "<partition tag> <deployment tag>": this partition's
--       deliveries and stream; an endpoint with nothing left here is only reported, and the
--       janitor takes it out of {P}:whgone once every partition reported it), 2 now ms, 3 delivery cutoff ms (dead/skipped since before it are deleted),
--       4 batch (records deleted per step at most), 5 event cutoff ms or "" (no age bound),
--       6 grace ms of a deleted endpoint, then (several partitions) pairs (endpoint id,
--       delete ms) of {P}:whgone
-- Returns {1 if a batch was full (call again soon) else 0, dead/skipped deleted, deliveries
-- of deleted endpoints deleted, events trimmed, then the ids of endpoints fully purged now}.
local tag, dtag = string.match(ARGV[1], '^(%S+) (%S+)')
if not tag then
  tag, dtag = ARGV[1], ARGV[1]
end
local now = tonumber(ARGV[2])
local cutoff, batch = tonumber(ARGV[3]), tonumber(ARGV[4])
local grace = tonumber(ARGV[6])
local budget = batch
local more = 0
local n_old, n_gone, n_ev = 0, 0, 0
local purged = {}
-- #include dl_lib.lua

-- the endpoint of a delivery id "<event id>.<endpoint id>"
local function wh_of(did)
  return string.match(did, '%.([^.]+)$')
end

-- 1. expired dead and skipped deliveries
for _, set in ipairs({KEYS[1], KEYS[2]}) do
  if budget > 0 then
    local ids = redis.call('ZRANGEBYSCORE', set, '-inf', '(' .. cutoff, 'LIMIT', 0, budget)
    if #ids == budget then
      more = 1
    end
    for _, did in ipairs(ids) do
      local dl = tag .. ':dl:' .. did
      local h = redis.call('HMGET', dl, 'wh', 'state')
      -- a record pending again (replayed) left the set when it was replayed: only the stale
      -- index entry goes
      if h[2] ~= 'pending' then
        redis.call('DEL', dl)
        local wh = h[1] or wh_of(did)
        if wh then
          redis.call('ZREM', tag .. ':dls:' .. wh, did)
          redis.call('HDEL', tag .. ':dlh:' .. wh, did)
        end
      end
      n_old = n_old + 1
    end
    if #ids > 0 then
      redis.call('ZREM', set, unpack(ids))
    end
    budget = budget - #ids
  end
end

-- delete deliveries of a deleted endpoint (ids of its listing or its queue)
local function drop_all(wh, ids)
  for _, did in ipairs(ids) do
    dl_delete(wh, did)
    redis.call('ZREM', KEYS[4], did)
    redis.call('ZREM', KEYS[1], did)
    redis.call('ZREM', KEYS[2], did)
  end
  n_gone = n_gone + #ids
  budget = budget - #ids
end

-- 2. deleted endpoints
-- (several partitions: {P}:whgone is a deployment key: the janitor read it and passes its
-- first entries as ARGV[7..] pairs (endpoint id, delete ms); KEYS[3] is not touched)
local gone
if dtag == tag then
  gone = redis.call('ZRANGE', KEYS[3], 0, 9, 'WITHSCORES')
else
  gone = {}
  for g = 7, #ARGV do
    gone[#gone + 1] = ARGV[g]
  end
end
for g = 1, #gone, 2 do
  if budget <= 0 then
    more = 1
    break
  end
  local wh, at = gone[g], tonumber(gone[g + 1])
  local dls, dlh, dq = tag .. ':dls:' .. wh, tag .. ':dlh:' .. wh, tag .. ':dq:' .. wh
  local ids = redis.call('ZRANGE', dls, 0, budget - 1)
  if #ids > 0 then
    drop_all(wh, ids)
    redis.call('ZREM', dls, unpack(ids))
    redis.call('HDEL', dlh, unpack(ids))
  end
  if budget > 0 then
    ids = redis.call('ZRANGE', dq, 0, budget - 1)
    if #ids > 0 then
      drop_all(wh, ids)
      redis.call('ZREM', dq, unpack(ids))
    end
  end
  if budget > 0 then
    -- delivered-log entries without a listing entry (none are expected): in batches too
    local sc = redis.call('HSCAN', dlh, '0', 'COUNT', budget)
    local keys = {}
    for k = 1, #sc[2], 2 do
      keys[#keys + 1] = sc[2][k]
    end
    if #keys > 0 then
      redis.call('HDEL', dlh, unpack(keys))
      budget = budget - #keys
    end
  end
  local left = redis.call('EXISTS', dls, dlh, dq)
  if left > 0 then
    more = 1
  elseif now - at >= grace then
    if dtag == tag then
      redis.call('ZREM', KEYS[3], wh)
    end
    purged[#purged + 1] = wh
  end
end

-- 3. the event stream's age bound
if ARGV[5] ~= '' and budget > 0 then
  local e = redis.call('XRANGE', KEYS[5], '-', tostring(tonumber(ARGV[5]) - 1), 'COUNT', budget)
  if #e > 0 then
    redis.call('XTRIM', KEYS[5], 'MAXLEN', redis.call('XLEN', KEYS[5]) - #e)
    n_ev = #e
    if #e == budget then
      more = 1
    end
  end
end

local out = {more, n_old, n_gone, n_ev}
for _, wh in ipairs(purged) do
  out[#out + 1] = wh
end
return out
