-- leader.lua - take or renew the upstream websocket lease, and share its health.
-- KEYS: 1 leader key, 2 ws-health key
-- ARGV: 1 instance id, 2 lease ms, 3 "1" when this instance's websocket is ready and healthy
-- Returns {held (1/0), ws healthy anywhere (1/0)}.
local cur = redis.call('GET', KEYS[1])
local held = 0
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  held = 1
elseif not cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  held = 1
end
if held == 1 then
  if ARGV[3] == '1' then
    redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  else
    redis.call('DEL', KEYS[2])
  end
end
local ok = 0
if redis.call('EXISTS', KEYS[2]) == 1 then ok = 1 end
return {held, ok}
