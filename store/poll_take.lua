-- poll_take.lua - claim due polls of ONE partition, the budget already taken (a deployment
-- with several partitions, docs/partitions.md: store/budget_take.lua took the calls; a
-- 1-partition deployment uses store/poll_claim.lua, which does both in one step). Tiers in
-- order - urgent, active, settled - then the anonymous tier, each most overdue first; the
-- poller asks for the tracked tiers of every partition first and for the anonymous tier of
-- every partition after (at most half of the calls left, as poll_claim.lua).
-- KEYS: 1 urgent tier zset, 2 active tier zset, 3 settled tier zset, 4 anonymous tier zset
-- ARGV: 1 now ms, 2 at most this many ids from the tracked tiers, 3 lease ms (claimed ids are
--       pushed this far out so no other process takes them), 4 at most this many ids from the
--       anonymous tier, 5 feed skip ms (> 0 while the changes feed is healthy: requests the
--       feed sees are pushed that far out instead of polled, as poll_claim.lua), 6 the
--       partition's key tag "{P}"
-- Returns {id, id, ...}.
local now = tonumber(ARGV[1])
local until_ms = now + tonumber(ARGV[3])
local out = {}
local skip = tonumber(ARGV[5] or '0') or 0
-- #include poll_lib.lua
local function take(k, n)
  return poll_take_due(k, now, n, until_ms, skip, ARGV[6], out)
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
