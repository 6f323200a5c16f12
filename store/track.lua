-- track.lua - start tracking request ids (idempotent).
-- KEYS: 1 poll zset, 2 all zset, 3.. one req hash per id
-- ARGV: 1 now ms, 2 metadata JSON or "", 3.. ids (same order as KEYS[3..])
-- A newly tracked request is due for a poll at once; returns the count of newly tracked ids.
local created = 0
for i = 3, #KEYS do
  local k, id = KEYS[i], ARGV[i]
  if redis.call('HGET', k, 'trk') ~= '1' then
    created = created + 1
    redis.call('HSET', k, 'trk', '1')
    if redis.call('HSETNX', k, 'first', ARGV[1]) == 1 then
      redis.call('ZADD', KEYS[2], 'NX', ARGV[1], id)
    end
    redis.call('ZADD', KEYS[1], ARGV[1], id)
  end
  if ARGV[2] ~= '' then
    redis.call('HSET', k, 'meta', ARGV[2])
  end
end
return created
