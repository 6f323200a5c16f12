-- poll_take.lua - claim due polls of ONE partition, the budget already taken (a deployment
-- with several partitions, docs/partitions.md: store/budget_take.lua took the calls; a
-- 1-partition deployment uses store/poll_claim.lua, which does both in one step). Tiers in
-- order - urgent, active, settled - then the anonymous tier, each most overdue first; the
-- poller asks for the tracked tiers of every partition first and for the anonymous tier of
-- every partition after (at most half of the calls left, as poll_claim.lua).
-- KEYS: 1 urgent tier zset, 2 active tier zset, 3 settled tier zset, 4 anonymous tier zset
-- ARGV: 1 now ms, 2 at most this many ids from the tracked tiers, 3 lease ms (claimed ids are
--       pushed this far out so no other process takes them), 4 at most this many ids from the
--       anonymous tier
-- Returns {id, id, ...}.
local now = tonumber(ARGV[1])
local until_ms = now + tonumber(ARGV[3])
local out = {}
local function take(k, n)
  local ids = redis.call('ZRANGEBYSCORE', k, '-inf', now, 'LIMIT', 0, n)
  for _, id in ipairs(ids) do
    redis.call('ZADD', k, 'XX', until_ms, id)
    out[#out + 1] = id
  end
  return #ids
end
local n = tonumber(ARGV[2])
for _, k in ipairs({KEYS[1], KEYS[2], KEYS[3]}) do
  if n <= 0 then
    break
  end
  n = n - take(k, n)
end
local a = tonumber(ARGV[4])
if a > 0 then
  take(KEYS[4], a)
end
return out
