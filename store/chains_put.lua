-- chains_put.lua - the end of one chain list refresh (store/chains_poll.lua took the lease).
-- KEYS: 1 chain list hash, 2 refresh lease
-- ARGV: 1 the upstream's body ("" = the refresh failed), 2 now ms, 3 holder, 4 what to do with
--       the lease when it is still ours: ms to keep it (the next try waits that long), 0 to
--       release it now (the next due look may try again)
-- A new body replaces the cached one (at = now) and always releases the lease.
-- Returns 1 when a body was stored, else 0.
local stored = 0
local hold = tonumber(ARGV[4])
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], 'body', ARGV[1], 'at', ARGV[2])
  stored = 1
  hold = 0
end
if redis.call('GET', KEYS[2]) == ARGV[3] then
  if hold > 0 then
    redis.call('PEXPIRE', KEYS[2], hold)
  else
    redis.call('DEL', KEYS[2])
  end
end
return stored
