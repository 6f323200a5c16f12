-- watch_expire.lua - end the watches whose window has passed (watch_lib.lua). Any process
-- may run it at any time: it only acts on what is due.
-- A watch that ends here is a request.watch.ended event (watch_event, watch_lib.lua), with
-- the reason its status gives (final, abandoned, failure_tail): this script is the one place
-- a window's end is decided, so the event is written once whichever processes run it.
-- KEYS: 1 wend zset. ARGV: 1 now ms, 2 at most this many ids, 3 key tag "{P}", 4 waiting
--       TTL ms, 5 settled watch ms, 6 failure tail ms, 7 event stream MAXLEN.
-- Returns {ended ids...}.
local tag, now = ARGV[3], tonumber(ARGV[1])
local wcfg = {wttl = tonumber(ARGV[4]), settled = tonumber(ARGV[5]), ftail = tonumber(ARGV[6])}
-- #include watch_lib.lua
local out = {}
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  local k = tag .. ':req:' .. id
  local o = watch_read(k, id)
  -- the window as the settings of this process say (a changed setting applies here)
  local phase, u = watch_phase(o.st, o.wb or now)
  if not watched(o.phase) then
    phase, u = o.phase, false
  end
  local n = {phase = phase, wu = u, st = o.st, chg = o.chg or now, first = o.first or now,
             tier = (o.pt or '') ~= '' and o.pt or 'a', at = now, anon = o.anon}
  if watched(phase) then
    -- still watched (the window moved): keep the poll where it is
    n.at = redis.call('ZSCORE', tiers[n.tier], id) or now
  else
    out[#out + 1] = id
  end
  redis.call('HSET', k, unpack(watch_move(id, o, n, {})))
  if watched(o.phase) and not watched(phase) then
    watch_event(id, k, 'request.watch.ended', ',"reason":"' .. watch_end_reason(o.st) .. '"',
                ARGV[7])
  end
end
return out
