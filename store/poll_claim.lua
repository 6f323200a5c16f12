-- poll_claim.lua - claim due polls, drawing from the shared upstream budget.
-- KEYS: 1 poll zset (active tier), 2 budget bucket (hash: t = tokens, ts = last refill ms),
--       3 urgent tier zset, 4 settled tier zset, 5 anonymous tier zset (watch_lib.lua)
-- ARGV: 1 now ms, 2 max polls wanted, 3 lease ms (claimed ids are pushed this far out so
--       no other process takes them), 4 budget per minute, 5 calls to reserve besides polls
--       (a /requests/v3 page), 6 only reserve (1: take ARGV[5] calls and claim no polls)
-- Returns {granted extra calls, id, id, ...}. Tiers are served in order - urgent (active
-- requests the upstream websocket does not confirm), active safety polls, settled watches,
-- then anonymous watches (dashboard subscriptions without the stream token) - and within a
-- tier the most overdue request comes first. Anonymous watches get at most half of the
-- calls left after the other tiers (rounded down): at least one token stays for the tracked
-- requests that fall due next, so however many anonymous ids are watched, a tracked request
-- waits for at most one refill (budget / 60 s) behind them.
--
-- The budget is a token bucket shared by every process: it holds at most burst = budget/10
-- calls (at least 1) and refills evenly at (budget - burst) per minute, so that no 60 s
-- window - sliding, not only calendar minutes - ever sees more than the budget
-- (burst + 60 s of refill = budget), and the calls are spread over the minute instead of
-- being spent at its start.
local now = tonumber(ARGV[1])
local budget = tonumber(ARGV[4])
local burst = math.max(1, math.floor(budget / 10))
local per_min = budget - burst
if per_min <= 0 then
  per_min = budget -- a budget of 1: one call a minute, the bucket holds that one
end
local rate = per_min / 60000
local h = redis.call('HMGET', KEYS[2], 't', 'ts')
local tokens = tonumber(h[1]) or burst
local ts = tonumber(h[2]) or now
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate)
end
local avail = math.floor(tokens)
local out = {0}
local taken, extra = 0, 0
if avail > 0 then
  extra = math.min(tonumber(ARGV[5]), avail)
  avail = avail - extra
  out[1] = extra
  taken = extra
  if ARGV[6] ~= '1' and avail > 0 then
    local n = math.min(tonumber(ARGV[2]), avail)
    local until_ms = now + tonumber(ARGV[3])
    for i, k in ipairs({KEYS[3], KEYS[1], KEYS[4], KEYS[5]}) do
      if i == 4 then
        n = math.min(n, math.floor((avail - (taken - extra)) / 2))
      end
      if n <= 0 then
        break
      end
      local ids = redis.call('ZRANGEBYSCORE', k, '-inf', now, 'LIMIT', 0, n)
      for _, id in ipairs(ids) do
        redis.call('ZADD', k, 'XX', until_ms, id)
        out[#out + 1] = id
      end
      taken = taken + #ids
      n = n - #ids
    end
  end
end
-- refill state is written on every call (also when nothing was taken), so a clock that
-- reads an older "now" in another process never refills the same interval twice
if now > ts or not h[2] then
  redis.call('HSET', KEYS[2], 't', tostring(tokens - taken), 'ts', now)
elseif taken > 0 then
  redis.call('HSET', KEYS[2], 't', tostring(tokens - taken))
end
redis.call('PEXPIRE', KEYS[2], 120000)
return out
