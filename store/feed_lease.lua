-- feed_lease.lua - take or renew the changes feed lease (relay/ingest/feed.c): one process at a
-- time reads /requests/v3 from the deployment's cursor; every process learns whether the feed
-- is healthy (a page read within 2 feed intervals without error) and where the cursor is.
-- KEYS: 1 lease {P}:feedl, 2 cursor {P}:feedc (hash: at = ms), 3 health {P}:feedok
-- ARGV: 1 instance id, 2 lease ms, 3 "1" to take or renew the lease, "0" only to look
-- Returns {held (1/0), healthy (1/0), cursor ms or -1 when none yet}.
local held = 0
if ARGV[3] == '1' then
  local cur = redis.call('GET', KEYS[1])
  if cur == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    held = 1
  elseif not cur then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    held = 1
  end
end
local ok = redis.call('EXISTS', KEYS[3])
local at = tonumber(redis.call('HGET', KEYS[2], 'at') or '-1') or -1
return {held, ok, at}
