-- feed_restore.lua - while the changes feed is not healthy ({P}:feedok absent), put the watched
-- requests it covers (fk = "1", pt = "": watch_lib.lua "Feed-covered requests") back into their
-- poll tiers: a bounded pass over the watch index per call (relay/ingest/feed.c, each tick),
-- resumed from the watch version kept in {P}:feedr. A watch that starts while the key is
-- absent gets its tier from watch_move itself (a new watch version, above the cursor anyway),
-- and an event of a covered request leaves it without one until the pass reaches it, so one
-- pass per outage covers every request; a request whose watch version moves later is met
-- again (harmless: it has a tier then).
-- While the feed is healthy the cursor is dropped (the next outage starts a new pass).
-- KEYS: 1 {P}:feedok, 2 {P}:watch, 3 cursor {P}:feedr
-- ARGV: 1 now ms, 2 at most this many watch entries read, 3 key tag "{P}", 4 due ms of an
--       active request (tier "a"), 5 due ms of a settled one (tier "s"); relay/ingest/feed.c
--       chooses them (now when the feed was healthy before in that process, as every tier is
--       made due then; else the tier's own period: a process that just started), 6 the tier
--       of an active request: "u" (urgent) while the upstream websocket cannot confirm it,
--       else "a" (absent: "a"). Restored into "a" while the websocket was down, the requests
--       waited behind every request polled since (a poll puts it into "u": poller.c
--       poller_next_poll), and the urgent tier, re-polled every second, took the whole budget
--       as soon as it held a few dozen: the others were not polled for minutes
-- Returns how many requests got a tier back.
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[3])
  return 0
end
local tag = ARGV[3]
local tiers = {a = tag .. ':poll', s = tag .. ':polls', u = tag .. ':pollu'}
local at = ARGV[6] == 'u' and 'u' or 'a'
local cur = redis.call('GET', KEYS[3])
local from = cur and ('(' .. cur) or '-inf'
local r = redis.call('ZRANGEBYSCORE', KEYS[2], from, '+inf', 'WITHSCORES', 'LIMIT', 0,
                     tonumber(ARGV[2]))
local n = 0
for i = 1, #r, 2 do
  local id = r[i]
  local k = tag .. ':req:' .. id
  local h = redis.call('HMGET', k, 'watch', 'pt', 'fk', 'anon', 'trk')
  if h[3] == '1' and (h[2] == false or h[2] == '') and (h[1] == 'active' or h[1] == 'settled')
     and (h[4] ~= '1' or h[5] == '1') then
    local t = h[1] == 'settled' and 's' or at
    redis.call('ZADD', tiers[t], t == 's' and ARGV[5] or ARGV[4], id)
    redis.call('HSET', k, 'pt', t)
    n = n + 1
  end
end
if #r > 0 then
  redis.call('SET', KEYS[3], r[#r])
end
return n
