-- wh_fanout.lua - create webhook deliveries for a batch of events, idempotently, and XACK
-- the batch in the same atomic step (a crash before this script leaves the entries pending in
-- the consumer group; after it, everything is written: never lost, never doubled). Also used
-- by replays (ARGV[7] = "1": no lease or XACK, terminal deliveries are queued again).
-- The delivery id is deterministic: "<event id>.<endpoint id>".
-- KEYS: 1 events stream, 2 endpoints version, 3 fanout lease
-- ARGV: 1 tag, 2 endpoints version the caller matched against, 3 instance id, 4 now ms,
--       5 consumer group, 6 retention ms of finished deliveries and bodies, 7 replay flag,
--       8 per-endpoint listing cap, then per event: stream id, event id, request id, seq,
--       status, event time ms, body, n, then n pairs (endpoint id, "p" pending | "s" skipped)
-- Returns {1, deliveries created or queued again}, {-1, version} when the endpoint set
-- changed (the caller reloads and retries), {-2} when this process lost the fanout lease.
local tag = ARGV[1]
local ver = redis.call('GET', KEYS[2]) or '0'
if ver ~= ARGV[2] then
  return {-1, ver}
end
local replay = ARGV[7] == '1'
if not replay and redis.call('GET', KEYS[3]) ~= ARGV[3] then
  return {-2}
end
local now = tonumber(ARGV[4])
local ttl = ARGV[6]
local cap = tonumber(ARGV[8])

-- #include wh_lib.lua

local capped = {}
local count = 0
local i = 9
local sids = {}
while i <= #ARGV do
  local sid, ev, rid, seq, st, et, body, n =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6],
    tonumber(ARGV[i + 7])
  sids[#sids + 1] = sid
  i = i + 8
  if n > 0 then
    redis.call('SET', tag .. ':body:' .. ev, body, 'PX', ttl)
  end
  for j = 0, n - 1 do
    local wh, kind = ARGV[i + 2 * j], ARGV[i + 2 * j + 1]
    local did = ev .. '.' .. wh
    local dl = tag .. ':dl:' .. did
    local state = redis.call('HGET', dl, 'state')
    local latest = is_latest(wh)
    local ok = tag .. ':order:' .. wh .. ':' .. rid
    if not state then
      count = count + 1
      -- the common case: no other unfinished delivery of this request to this endpoint, so
      -- this one is queued at once (written in the same HSET)
      local alone = false
      if kind ~= 's' then
        redis.call('ZADD', ok, seq, did)
        alone = redis.call('ZCARD', ok) == 1
      end
      if alone then
        redis.call('HSET', dl, 'ev', ev, 'wh', wh, 'rid', rid, 'seq', seq, 'st', st, 'sid', sid,
                   'et', et, 'ct', now, 'att', 0, 'nlog', 0, 'rp', replay and '1' or '0',
                   'state', 'pending', 'q', '1', 'next', now)
        redis.call('ZADD', tag .. ':dq:' .. wh, now, did)
        touched[wh] = true
      else
        redis.call('HSET', dl, 'ev', ev, 'wh', wh, 'rid', rid, 'seq', seq, 'st', st, 'sid', sid,
                   'et', et, 'ct', now, 'att', 0, 'nlog', 0, 'rp', replay and '1' or '0',
                   'state', kind == 's' and 'skipped' or 'pending')
      end
      local dls = tag .. ':dls:' .. wh
      redis.call('ZADD', dls, now, did)
      if cap > 0 and not capped[wh] then
        capped[wh] = true
        local over = redis.call('ZCARD', dls) - cap
        if over > 0 then
          redis.call('ZREMRANGEBYRANK', dls, 0, over - 1)
        end
      end
      if kind == 's' then
        redis.call('ZADD', tag .. ':skipped', now, did)
      elseif not alone then
        if latest then
          -- supersede waiting older states, and the active one unless it is in flight
          local mem = redis.call('ZRANGEBYSCORE', ok, '-inf', '(' .. seq)
          for _, m in ipairs(mem) do
            if not redis.call('ZSCORE', tag .. ':inflight', m) then
              supersede(m, wh, ok)
            end
          end
        end
        ensure_active(ok, wh)
      end
    elseif replay and state ~= 'pending' and kind ~= 's' then
      count = count + 1
      redis.call('HSET', dl, 'state', 'pending', 'att', 0, 'rp', '1')
      redis.call('HDEL', dl, 'done')
      redis.call('PERSIST', dl)
      redis.call('ZREM', tag .. ':dead', did)
      redis.call('ZREM', tag .. ':skipped', did)
      redis.call('ZADD', ok, seq, did)
      ensure_active(ok, wh)
    end
  end
  i = i + 2 * n
end
fix_touched(tag .. ':due')
if not replay and #sids > 0 then
  redis.call('XACK', KEYS[1], ARGV[5], unpack(sids))
end
return {1, count}
