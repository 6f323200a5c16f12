-- watch_fallback.lua - settle the watches of fallback requests that an earlier version kept
-- active: fallback is settled like refund (watch_lib.lua), so such a request moves to the phase
-- its status gives from its window base - settled (slow polls, out of the stuck index), or
-- ended when the settled window is over. Runs at start-up over the act index, a batch per
-- call; idempotent (a settled fallback is not in act).
-- KEYS: 1 act zset. ARGV: 1 now ms, 2 at most this many ids, 3 key tag "{P}", 4 waiting TTL
--       ms, 5 settled watch ms, 6 failure tail ms, 7 cursor (rank; start at 0)
-- Returns {next cursor (0 = done), settled count}.
local tag, now = ARGV[3], tonumber(ARGV[1])
local wcfg = {wttl = tonumber(ARGV[4]), settled = tonumber(ARGV[5]), ftail = tonumber(ARGV[6])}
-- #include watch_lib.lua
local start, batch = tonumber(ARGV[7]), tonumber(ARGV[2])
local ids = redis.call('ZRANGE', KEYS[1], start, start + batch - 1)
local n = 0
for _, id in ipairs(ids) do
  local k = tag .. ':req:' .. id
  local o = watch_read(k, id)
  if o.phase == 'active' and o.st == 'fallback' then
    n = n + 1
    local wb = o.wb or o.chg or now
    local phase, u = watch_phase(o.st, wb)
    local fields = {}
    watch_move(id, o, {phase = phase, wu = u, st = o.st, chg = o.chg or now,
                       first = o.first or now, tier = 's', at = now, anon = o.anon}, fields)
    redis.call('HSET', k, unpack(fields))
  end
end
if #ids < batch then
  return {0, n}
end
-- the settled ones left act: the ranks after them moved down by n
return {start + #ids - n, n}
