-- wh_lease.lua - take or renew a named lease (the webhook fan-out holder).
-- KEYS: 1 lease key
-- ARGV: 1 holder id, 2 lease ms
-- Returns 1 when the caller holds the lease now, 0 when someone else does.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
