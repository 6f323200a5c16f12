-- feed_seen.lua - which items of a feed page were applied already (the overlap: a sweep reads
-- again from a little before the cursor, and items at the cursor's exact updatedAt come back).
-- KEYS: 1 seen set {P}:feeds (zset "<id>:<updatedAt ms>", score = updatedAt ms)
-- ARGV: members
-- Returns {1 seen / 0 not, ...} in ARGV order.
local out = {}
for i, m in ipairs(ARGV) do
  out[i] = redis.call('ZSCORE', KEYS[1], m) and 1 or 0
end
return out
