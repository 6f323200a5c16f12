-- anon_release.lua - the last subscriber of ids in this process left: drop this process's
-- holders; a watch nobody else holds ends (store/anon_lib.lua).
-- KEYS: 1 anonh zset. ARGV: 1 now ms, 2 instance id, 3 key tag "{P}", 4.. ids
-- Returns the count of watches that ended.
local tag, now = ARGV[3], tonumber(ARGV[1])
local wcfg = {wttl = 0, settled = 0, ftail = 0}
-- #include watch_lib.lua
-- #include anon_lib.lua
local n = 0
for i = 4, #ARGV do
  local m = ARGV[i] .. '|' .. ARGV[2]
  redis.call('ZREM', anon_h, m)
  redis.call('ZREM', anon_x, m)
  if anon_end(ARGV[i], false) then
    n = n + 1
  end
end
return n
