-- anon_expire.lua - drop holders whose lease expired (a process that died or lost Redis
-- without releasing) and end the watches nobody holds any more (store/anon_lib.lua). Any
-- process may run it at any time: it only acts on what is due.
-- KEYS: 1 anonx zset. ARGV: 1 now ms, 2 at most this many holders, 3 key tag "{P}"
-- Returns the count of watches that ended.
local tag, now = ARGV[3], tonumber(ARGV[1])
local wcfg = {wttl = 0, settled = 0, ftail = 0}
-- #include watch_lib.lua
-- #include anon_lib.lua
local n = 0
local ms = redis.call('ZRANGEBYSCORE', anon_x, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(ms) do
  redis.call('ZREM', anon_h, m)
  redis.call('ZREM', anon_x, m)
  local id = string.match(m, '^(.*)|[^|]*$')
  if id and anon_end(id, false) then
    n = n + 1
  end
end
return n
