-- budget_lib.lua - the shared upstream budget's token bucket, for the scripts of a deployment
-- with several partitions (docs/partitions.md: the bucket is a deployment key, the poll tiers
-- are partition keys, and one script touches one slot). The same bucket as store/poll_claim.lua
-- (which a 1-partition deployment keeps using): at most burst = budget/10 calls (at least 1),
-- refilled evenly at (budget - burst) per minute. Pasted where a script has the line
-- "-- #include budget_lib.lua".
-- Keys: the bucket hash (t = tokens, ts = last refill ms), expiring after 2 idle minutes.

-- The bucket refilled up to now: {tokens, ts, had (the hash existed), burst}.
local function bucket_read(key, now, budget)
  local burst = math.max(1, math.floor(budget / 10))
  local per_min = budget - burst
  if per_min <= 0 then
    per_min = budget
  end
  local h = redis.call('HMGET', key, 't', 'ts')
  local b = {tokens = tonumber(h[1]) or burst, ts = tonumber(h[2]) or now, had = h[2] ~= false,
             burst = burst}
  if now > b.ts then
    b.tokens = math.min(burst, b.tokens + (now - b.ts) * per_min / 60000)
  end
  return b
end

-- Write the bucket back with delta tokens taken (negative: given back, up to the burst). The
-- refill state is written on every call, as poll_claim.lua does, so an older "now" of another
-- process never refills the same interval twice.
local function bucket_write(key, now, b, delta)
  local t = math.min(b.burst, b.tokens - delta)
  if now > b.ts or not b.had then
    redis.call('HSET', key, 't', tostring(t), 'ts', now)
  elseif delta ~= 0 then
    redis.call('HSET', key, 't', tostring(t))
  end
  redis.call('PEXPIRE', key, 120000)
end
