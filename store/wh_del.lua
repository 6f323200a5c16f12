-- wh_del.lua - delete a webhook endpoint with its queue and delivery log.
-- KEYS: 1 endpoint hash, 2 endpoint index zset, 3 endpoints version, 4 due, 5 inflight,
--       6 dead, 7 skipped
-- ARGV: 1 tag, 2 endpoint id
-- Returns 0 when the endpoint does not exist, else the new version.
local tag, wh = ARGV[1], ARGV[2]
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
redis.call('ZREM', KEYS[2], wh)
redis.call('ZREM', KEYS[4], wh)
redis.call('DEL', tag .. ':dq:' .. wh)
local dls = tag .. ':dls:' .. wh
local ids = redis.call('ZRANGE', dls, 0, 49999)
for _, did in ipairs(ids) do
  local dl = tag .. ':dl:' .. did
  local rid = redis.call('HGET', dl, 'rid')
  if rid then
    redis.call('DEL', tag .. ':order:' .. wh .. ':' .. rid)
  end
  redis.call('DEL', dl)
  redis.call('ZREM', KEYS[5], did)
  redis.call('ZREM', KEYS[6], did)
  redis.call('ZREM', KEYS[7], did)
end
redis.call('DEL', dls)
redis.call('DEL', tag .. ':dlh:' .. wh)
return redis.call('INCR', KEYS[3])
