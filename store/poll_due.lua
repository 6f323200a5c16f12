-- poll_due.lua - make every active watched request due now (gap repair without an API key:
-- the upstream websocket was down, anything may have changed). Settled watches keep their
-- slow schedule. KEYS: 1 active tier zset, 2 urgent tier zset. ARGV: 1 now ms.
-- Returns how many were moved earlier.
local n = 0
for _, k in ipairs(KEYS) do
  local ids = redis.call('ZRANGEBYSCORE', k, '(' .. ARGV[1], '+inf')
  for _, id in ipairs(ids) do
    redis.call('ZADD', k, 'XX', ARGV[1], id)
  end
  n = n + #ids
end
return n
