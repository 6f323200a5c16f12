-- wh_requeue.lua - replay dead or skipped deliveries: they leave the dead/skipped set,
-- become pending with a fresh attempt budget (the attempt log is kept) and carry the
-- statusrelay-replay header. Deliveries of disabled or deleted endpoints are left alone.
-- KEYS: 1 dead or skipped zset, 2 due
-- ARGV: 1 tag, 2 now ms, 3 endpoint id or "", 4 request id or "", 5 since ms or "",
--       6 until ms or "", 7 dry run "1"|"0", 8 max deliveries
-- Returns the number of deliveries replayed (or that would be).
-- ARGV[1] is the partition's tag, or "<partition tag> <deployment tag> <endpoint view>" in a
-- deployment with several partitions (docs/partitions.md; the view: wh_lib.lua)
local tag, dtag, vs = string.match(ARGV[1], '^(%S+) (%S+) ?(.*)$')
if not tag then
  tag, dtag, vs = ARGV[1], ARGV[1], ''
end
-- an endpoint is enabled: its hash says so, or with several partitions the caller's copy
-- (vs = "id[:flags],...", wh_lib.lua) lists it without "d"
local function enabled(wh)
  if dtag == tag then
    return redis.call('HGET', dtag .. ':wh:' .. wh, 'enabled') == '1'
  end
  for id, f in string.gmatch(vs, '([^,:]+):?([ld]*)') do
    if id == wh then
      return not string.find(f, 'd', 1, true)
    end
  end
  return false
end
local now = tonumber(ARGV[2])
local fwh, frid = ARGV[3], ARGV[4]
local since, untl = tonumber(ARGV[5]), tonumber(ARGV[6])
local dry = ARGV[7] == '1'
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[8]) - 1)
local n = 0
for _, did in ipairs(ids) do
  local dl = tag .. ':dl:' .. did
  local h = redis.call('HMGET', dl, 'wh', 'rid', 'et', 'seq', 'state')
  if not h[1] then
    if not dry then
      redis.call('ZREM', KEYS[1], did)
    end
  elseif (fwh == '' or h[1] == fwh) and (frid == '' or h[2] == frid)
      and (not since or tonumber(h[3]) >= since) and (not untl or tonumber(h[3]) <= untl)
      and enabled(h[1]) then
    n = n + 1
    if not dry then
      redis.call('ZREM', KEYS[1], did)
      redis.call('HSET', dl, 'state', 'pending', 'att', 0, 'rp', '1')
      redis.call('HDEL', dl, 'done', 'q', 'next')
      redis.call('PERSIST', dl)
      local ok = tag .. ':order:' .. h[1] .. ':' .. h[2]
      redis.call('ZADD', ok, h[4], did)
      local mem = redis.call('ZRANGE', ok, 0, -1)
      local active = false
      for _, m in ipairs(mem) do
        if redis.call('HGET', tag .. ':dl:' .. m, 'q') == '1' then
          active = true
        end
      end
      if not active then
        redis.call('HSET', tag .. ':dl:' .. mem[1], 'q', '1', 'next', now)
        redis.call('ZADD', tag .. ':dq:' .. h[1], now, mem[1])
        redis.call('ZADD', KEYS[2], 'LT', now, h[1])
      end
    end
  end
end
return n
