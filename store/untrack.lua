-- untrack.lua - stop tracking one request. KEYS: 1 req hash, 2 poll zset. ARGV: 1 id.
-- Returns 0 when the request is unknown, 1 otherwise.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'trk', '0')
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
