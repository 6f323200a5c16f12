-- poll_due.lua - make every tracked request due now (gap repair without an API key).
-- KEYS: 1 poll zset. ARGV: 1 now ms. Returns how many were moved earlier.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf')
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[1], id)
end
return #ids
