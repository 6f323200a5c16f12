-- untrack.lua - stop tracking one request: its watch ends (no subscription, no polls).
-- A watch that ends here is a request.watch.ended event with reason "untracked"
-- (watch_event, watch_lib.lua) when it was tracked and watched.
-- KEYS: 1 req hash. ARGV: 1 id, 2 key tag "{P}", 3 now ms, 4 event stream MAXLEN.
-- Returns 0 when the request is unknown, 1 otherwise.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local tag, now = ARGV[2], tonumber(ARGV[3])
local wcfg = {wttl = 0, settled = 0, ftail = 0}
-- #include watch_lib.lua
local o = watch_read(KEYS[1], ARGV[1])
local fields = watch_move(ARGV[1], o, {phase = 'ended', wu = false, st = o.st},
                         {'trk', '0', 'anon', '0'})
redis.call('HSET', KEYS[1], unpack(fields))
if o.trk == '1' and watched(o.phase) then
  watch_event(ARGV[1], KEYS[1], 'request.watch.ended', ',"reason":"untracked"', ARGV[4])
end
return 1
