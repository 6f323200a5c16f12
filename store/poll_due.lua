-- poll_due.lua - make every request of the given poll tiers due now: the active and urgent
-- tiers for gap repair without an API key (the upstream websocket was down, anything may have
-- changed; settled watches keep their slow schedule), every tier when the upstream websocket
-- has been down for a few seconds (relay/ingest/poller.c poller_ws_lost).
-- KEYS: the tier zsets (1 active, 2 urgent; or urgent, active, settled, anonymous).
-- ARGV: 1 now ms.
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
