-- wh_del.lua - delete a webhook endpoint. It disappears at once (its hash, its place in the
-- index and the due set); its deliveries, listing, delivered log and queue are removed in
-- batches afterwards by the retention sweep (wh_gc.lua), which finds it in {P}:whgone, so a
-- restart half-way through loses nothing and the delete itself stays O(1) whatever the
-- endpoint's history.
-- KEYS: 1 endpoint hash, 2 endpoint index zset, 3 endpoints version, 4 due, 5 deleted
--       endpoints zset {P}:whgone
-- ARGV: 1 now ms, 2 endpoint id
-- Returns 0 when the endpoint does not exist, else the new version.
local wh = ARGV[2]
if redis.call('DEL', KEYS[1]) == 0 then
  return 0
end
redis.call('ZREM', KEYS[2], wh)
redis.call('ZREM', KEYS[4], wh)
redis.call('ZADD', KEYS[5], ARGV[1], wh)
return redis.call('INCR', KEYS[3])
