-- wh_reap.lua - return deliveries whose lease expired (their process died or stalled) to
-- their endpoint's queue, due at once. The attempt that was in flight is not counted.
-- KEYS: 1 due, 2 inflight
-- ARGV: 1 tag, 2 now ms, 3 max deliveries
-- Returns the number of deliveries returned to the queue.
local tag = ARGV[1]
local now = tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
local n = 0
for _, did in ipairs(ids) do
  redis.call('ZREM', KEYS[2], did)
  local dl = tag .. ':dl:' .. did
  local h = redis.call('HMGET', dl, 'state', 'wh', 'att')
  if h[1] == 'pending' then
    if tonumber(h[3] or '0') > 0 then
      redis.call('HINCRBY', dl, 'att', -1)
    end
    redis.call('HSET', dl, 'q', '1', 'next', now)
    redis.call('ZADD', tag .. ':dq:' .. h[2], now, did)
    redis.call('ZADD', KEYS[1], 'LT', now, h[2])
    n = n + 1
  end
end
return n
