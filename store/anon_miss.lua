-- anon_miss.lua - the upstream answered 404 for a status poll of this request. A request
-- watched anonymously (store/anon_lib.lua) counts it; at ARGV[4] answers its watch ends, every
-- holder is dropped and the id goes into the negative cache for ARGV[5] ms (at most ARGV[6]
-- entries: expired ones and then the soonest to expire are dropped). A request tracked
-- through the API is left alone: it may be tracked before the upstream knows it
-- (STATUSRELAY_WAITING_TTL ends it).
-- KEYS: 1 req hash. ARGV: 1 id, 2 now ms, 3 key tag "{P}", 4 tries, 5 negative-cache ms,
--       6 negative-cache cap
-- Returns 1 when the watch ended now, else 0.
local tag, now = ARGV[3], tonumber(ARGV[2])
local wcfg = {wttl = 0, settled = 0, ftail = 0}
-- #include watch_lib.lua
-- #include anon_lib.lua
local id = ARGV[1]
local o = watch_read(KEYS[1], id)
if not o.anon or not watched(o.phase) then
  return 0
end
if redis.call('HINCRBY', KEYS[1], 'miss', 1) < tonumber(ARGV[4]) then
  return 0
end
anon_drop_holders(id)
redis.call('ZADD', anon_nf, now + tonumber(ARGV[5]), id)
redis.call('ZREMRANGEBYSCORE', anon_nf, '-inf', now)
local over = redis.call('ZCARD', anon_nf) - tonumber(ARGV[6])
if over > 0 then
  redis.call('ZPOPMIN', anon_nf, over)
end
anon_end(id, true)
return 1
