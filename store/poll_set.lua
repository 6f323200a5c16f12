-- poll_set.lua - set the next poll of a watched request (after a poll whose answer was not a
-- new event: an accepted event is scheduled by apply.lua). A request whose watch ended
-- meanwhile is left alone.
-- KEYS: 1 req hash. ARGV: 1 id, 2 tier ("u" urgent, "a" active, "s" settled, "" = keep the
--       request's tier), 3 due ms, 4 key tag "{P}"
-- An anonymous watch (store/anon_lib.lua) stays in its tier "n" whatever the tier asked.
-- A request the changes feed sees (fk = "1") while the feed is healthy ({P}:feedok) gets no
-- schedule: it leaves its tier (pt = "", watch_lib.lua "Feed-covered requests").
-- Returns 1 when scheduled, 0 when the request is not watched.
local tag = ARGV[4]
local tiers = {u = tag .. ':pollu', a = tag .. ':poll', s = tag .. ':polls', n = tag .. ':polln'}
local h = redis.call('HMGET', KEYS[1], 'watch', 'pt', 'anon', 'trk', 'fk')
local phase, pt = h[1], h[2]
if not phase then
  -- written before watches existed (watch_migrate.lua converts these at start-up): polled
  -- while in the old poll set
  return redis.call('ZADD', tiers.a, 'XX', 'CH', ARGV[3], ARGV[1]) > 0 and 1 or 0
elseif phase ~= 'active' and phase ~= 'settled' then
  return 0
end
local t = ARGV[2]
if t == '' then
  t = (pt and pt ~= '') and pt or 'a'
end
if h[3] == '1' and h[4] ~= '1' then
  t = 'n'
elseif h[5] == '1' and redis.call('EXISTS', tag .. ':feedok') == 1 then
  if pt and pt ~= '' then
    redis.call('ZREM', tiers[pt], ARGV[1])
    redis.call('HSET', KEYS[1], 'pt', '')
  end
  return 1
end
if pt and pt ~= '' and pt ~= t then
  redis.call('ZREM', tiers[pt], ARGV[1])
end
if pt ~= t then
  redis.call('HSET', KEYS[1], 'pt', t)
end
redis.call('ZADD', tiers[t], ARGV[3], ARGV[1])
return 1
