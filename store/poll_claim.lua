-- poll_claim.lua - claim due polls, drawing from the shared per-minute upstream budget.
-- KEYS: 1 poll zset, 2 budget key of the current minute
-- ARGV: 1 now ms, 2 max polls wanted, 3 lease ms (claimed ids are pushed this far out so
--       no other process takes them), 4 budget per minute, 5 calls to reserve besides polls
--       (a /requests/v3 page), 6 only reserve (1: take ARGV[5] calls and claim no polls)
-- Returns {granted extra calls, id, id, ...}. The most overdue requests come first.
local used = tonumber(redis.call('GET', KEYS[2]) or '0')
local avail = tonumber(ARGV[4]) - used
if avail <= 0 then
  return {0}
end
local extra = math.min(tonumber(ARGV[5]), avail)
avail = avail - extra
local out = {extra}
local taken = extra
if ARGV[6] ~= '1' and avail > 0 then
  local n = math.min(tonumber(ARGV[2]), avail)
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, n)
  local until_ms = tonumber(ARGV[1]) + tonumber(ARGV[3])
  for _, id in ipairs(ids) do
    redis.call('ZADD', KEYS[1], 'XX', until_ms, id)
    out[#out + 1] = id
  end
  taken = taken + #ids
end
if taken > 0 then
  redis.call('INCRBY', KEYS[2], taken)
  redis.call('PEXPIRE', KEYS[2], 120000)
end
return out
