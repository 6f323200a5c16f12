-- ratelimit_give.lua - give back sends granted by ratelimit_take.lua and not used (nothing was
-- sent for them, so removing them from the log never lets a window hold more than the limit).
-- KEYS: 1 the endpoint's grant log {P}:rl:<wh> (ratelimit_take.lua)
-- ARGV: 1 grant time (ms, as ratelimit_take.lua returned it), 2 sends given back
-- Returns the sends given back (0 when the grant already left the window).
local key = KEYS[1]
local at, n = ARGV[1], tonumber(ARGV[2])
local items = redis.call('LRANGE', key, 0, -1)
local given = 0
for i = #items, 1, -1 do
  if given >= n then
    break
  end
  local ts, c = string.match(items[i], '^(%d+):(%d+)$')
  if ts == at then
    c = tonumber(c)
    local k = math.min(c, n - given)
    given = given + k
    if k == c then
      redis.call('LSET', key, i - 1, '-')
    else
      redis.call('LSET', key, i - 1, ts .. ':' .. (c - k))
    end
  end
end
redis.call('LREM', key, 0, '-')
return given
