-- poll_claim.lua - claim due polls, drawing from the shared upstream budget.
-- KEYS: 1 poll zset (active tier), 2 budget bucket (hash: t = tokens, ts = last refill ms;
--       its name .. "w" is the flag {P}:budgetw, below),
--       3 urgent tier zset, 4 settled tier zset, 5 anonymous tier zset (watch_lib.lua),
--       6 the anonymous status reads' bucket {P}:budgetr (same hash shape)
-- ARGV: 1 now ms, 2 max polls wanted, 3 lease ms (claimed ids are pushed this far out so
--       no other process takes them), 4 budget per minute, 5 calls to reserve besides polls
--       (a /requests/v3 page), 6 only reserve (1: take ARGV[5] calls and claim no polls),
--       7 the anonymous status reads' share per minute: > 0 when the reservation is such a
--       read (absent or "0": any other), 8 feed skip ms: > 0 while the changes feed is
--       healthy (relay/ingest/feed.c), 9 the key tag "{P}"
-- While the feed is healthy, a due request the feed sees (req field fk = "1",
-- store/feed_mark.lua) is not polled: it is pushed ARGV[8] ms out without drawing from the
-- budget (the feed reports its changes; when the feed stops being healthy the poller makes
-- every tier due again). At most 512 such ids are passed over per tier and claim.
-- Returns {granted extra calls, id, id, ...}. Tiers are served in order - urgent (active
-- requests the upstream websocket does not confirm), active safety polls, settled watches,
-- then anonymous watches (dashboard subscriptions without the stream token) - and within a
-- tier the most overdue request comes first. Anonymous watches get at most half of the
-- calls left after the other tiers (rounded down): at least one token stays for the tracked
-- requests that fall due next, so however many anonymous ids are watched, a tracked request
-- waits for at most one refill (budget / 60 s) behind them.
--
-- An anonymous status read (a status read that must ask the upstream for a caller who did not
-- prove who it is: relay/api/compat.c through poller_fetch_now, ARGV[7] > 0, one call
-- reserved) comes after the urgent polls and from its own share: it is granted only when the
-- calls left after it still cover every urgent poll due now (KEYS[3]), and when the share's
-- own bucket (KEYS[6]) holds a call too: share = ARGV[7] calls a minute, a quarter of the
-- budget (relay/ingest/poller.h), as a bucket of at most a quarter of the share (at least 1)
-- refilled evenly with the rest a minute, so that no sliding minute sees more than the share,
-- whatever the number of client addresses asking. The call still counts against the
-- budget. With several
-- partitions the urgent tiers are partition keys this script cannot read (KEYS[3] is then the
-- deployment's own, empty): the share still holds.
--
-- A single call reserved alone (ARGV[6] = "1", not an anonymous read: changes feed, backfill
-- and gap pages, reads by id, the chain list - tier (1), docs/internals.md "Budget priority")
-- that finds the bucket empty leaves the flag {P}:budgetw (KEYS[2] .. "w": the same slot) for
-- a second, and a claim of polls meanwhile leaves one call in the bucket, so the next
-- reservation gets it; a granted reservation drops the flag. Without it the polls won every
-- call: each process's poller claims every token as its tick comes, before the feed's
-- reservation of the same tick, so once every watched request was due (the feed holder
-- killed, the upstream websocket down) the new holder's feed got no page while polls were
-- due - never again healthy, every request of the key polled at the budget's pace.
--
-- The budget is a token bucket shared by every process: it holds at most burst = budget/10
-- calls (at least 1) and refills evenly at (budget - burst) per minute, so that no 60 s
-- window - sliding, not only calendar minutes - ever sees more than the budget
-- (burst + 60 s of refill = budget), and the calls are spread over the minute instead of
-- being spent at its start.
local now = tonumber(ARGV[1])
local budget = tonumber(ARGV[4])
local share = tonumber(ARGV[7] or '0') or 0
local skip = tonumber(ARGV[8] or '0') or 0
-- #include poll_lib.lua
local rb -- the anonymous reads' bucket, refilled up to now: {tokens, ts, had, burst}
if share > 0 then
  local rburst = math.max(1, math.floor(share / 4))
  local rh = redis.call('HMGET', KEYS[6], 't', 'ts')
  rb = {tokens = tonumber(rh[1]) or rburst, ts = tonumber(rh[2]) or now, had = rh[2] ~= false,
        burst = rburst}
  local rrate = math.max(1, share - rburst) / 60000
  if now > rb.ts then
    rb.tokens = math.min(rburst, rb.tokens + (now - rb.ts) * rrate)
  end
end
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
local waitk = KEYS[2] .. 'w' -- a reservation waits for a call (above)
if avail > 0 then
  extra = math.min(tonumber(ARGV[5]), avail)
  if rb and (math.floor(rb.tokens) < extra or
             avail - extra < redis.call('ZCOUNT', KEYS[3], '-inf', now)) then
    extra = 0 -- the share is spent, or the urgent polls due now need every call left
  end
  avail = avail - extra
  out[1] = extra
  taken = extra
  if ARGV[6] ~= '1' and avail > 0 and redis.call('EXISTS', waitk) == 1 then
    avail = avail - 1 -- left for the reservation that waits
  end
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
      local got = poll_take_due(k, now, n, until_ms, skip, ARGV[9], out)
      taken = taken + got
      n = n - got
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
if ARGV[6] == '1' and share == 0 and tonumber(ARGV[5]) > 0 then
  if extra > 0 then
    redis.call('DEL', waitk)
  else
    redis.call('SET', waitk, '1', 'PX', 1000)
  end
end
if rb and (now > rb.ts or not rb.had or extra > 0) then -- as the budget's, above
  redis.call('HSET', KEYS[6], 't', tostring(rb.tokens - extra), 'ts', math.max(now, rb.ts))
  redis.call('PEXPIRE', KEYS[6], 120000)
end
return out
