-- members.lua - the live processes of a deployment with several partitions, by lease expiry
-- (docs/partitions.md): each renews its own entry and counts the others, so the partitions'
-- fan-out leases spread over the processes (each takes at most ceil(partitions / live)).
-- KEYS: 1 {P}:members (zset instance id -> expiry ms). ARGV: 1 instance id, 2 now ms, 3 lease
--       ms ("0": leave - a process stopping gracefully)
-- Returns the number of live processes (this one included unless it left).
local now = tonumber(ARGV[2])
if ARGV[3] == '0' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], 60000)
return redis.call('ZCARD', KEYS[1])
