-- ratelimit_take.lua - take up to ARGV[3] sends from an endpoint's rate limit, shared by every
-- process (store/ratelimit.h): a sliding log of the grants of the last window. At most
-- ARGV[1] sends are granted in any window of ARGV[2] ms, so bursts are at most that many.
-- KEYS: 1 the endpoint's grant log {P}:rl:<wh> (list of "<ms>:<count>", oldest first;
--       expires after two idle windows)
-- ARGV: 1 limit (sends per window), 2 window ms, 3 sends wanted
-- Returns {granted, grant time (Redis ms: the id of this grant for ratelimit_give.lua), ms
-- until the log has room again (0: it has room now)}.
-- Time is the Redis server's (TIME), not the callers': two processes whose clocks differ
-- must not both see an old grant as outside the window.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lim, win, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local key = KEYS[1]
local items = redis.call('LRANGE', key, 0, -1)
local used, drop, last = 0, 0, 0
for i, it in ipairs(items) do
  local ts, c = string.match(it, '^(%d+):(%d+)$')
  ts, c = tonumber(ts), tonumber(c)
  if ts == nil or ts <= now - win then
    drop = i
  else
    used = used + c
    last = ts
  end
end
if drop > 0 then
  redis.call('LTRIM', key, drop, -1)
end
if now < last then -- the server's clock stepped back: never grant before the last grant
  now = last
end
local g = math.max(0, math.min(want, lim - used))
if g > 0 then
  redis.call('RPUSH', key, now .. ':' .. g)
end
local wait = 0
if lim - used - g <= 0 then
  local head = redis.call('LINDEX', key, 0)
  local ts = head and tonumber(string.match(head, '^(%d+):')) or now
  wait = math.max(1, ts + win - now)
end
if g > 0 or drop > 0 then
  redis.call('PEXPIRE', key, 2 * win)
end
return {g, now, wait}
