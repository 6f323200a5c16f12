-- watch_migrate.lua - give a watch to the requests a version without watches tracked
-- (watch_lib.lua). Runs at start-up; idempotent, and only acts on requests without a phase.
-- Tracked requests in the old poll set ({P}:poll, tracked and not final) start a watch as
-- if tracked now; tracked success/refund requests of that version had stopped being
-- watched and stay ended (tracking them again restarts their watch).
-- KEYS: 1 poll zset (the active tier). ARGV: 1 now ms, 2 at most this many ids, 3 key tag
--       "{P}", 4 waiting TTL ms, 5 settled watch ms, 6 failure tail ms, 7 cursor (start at 0)
-- Returns {next cursor (0 = done), migrated count}.
local tag, now = ARGV[3], tonumber(ARGV[1])
local wcfg = {wttl = tonumber(ARGV[4]), settled = tonumber(ARGV[5]), ftail = tonumber(ARGV[6])}
-- #include watch_lib.lua
local start = tonumber(ARGV[7])
local ids = redis.call('ZRANGE', KEYS[1], start, start + tonumber(ARGV[2]) - 1, 'WITHSCORES')
local n = 0
for i = 1, #ids, 2 do
  local id, due = ids[i], ids[i + 1]
  local k = tag .. ':req:' .. id
  local o = watch_read(k, id)
  if o.legacy then
    n = n + 1
    local phase, u = watch_phase(o.st, now)
    local fields = {'wb', ARGV[1], 'chg', tostring(o.chg or now)}
    watch_move(id, o, {phase = phase, wu = u, st = o.st, chg = o.chg or now,
                       first = o.first or now, tier = 'a', at = due}, fields)
    redis.call('HSET', k, unpack(fields))
  end
end
if #ids < 2 * tonumber(ARGV[2]) then
  return {0, n}
end
return {start + #ids / 2, n}
