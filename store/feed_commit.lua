-- feed_commit.lua - the end of one feed page: its items are applied, so the cursor moves to
-- the newest updatedAt seen, the items join the seen set (trimmed) and the feed
-- is healthy for 2 intervals. Only while holder holds the lease (a holder that lost it does
-- not move a cursor another process now owns).
-- KEYS: 1 lease {P}:feedl, 2 cursor {P}:feedc, 3 seen {P}:feeds, 4 health {P}:feedok
-- ARGV: 1 instance id, 2 newest updatedAt ms of the page (0: empty page), 3 seen items older
--       than this (ms) leave the set (the caller keeps the overlap and the page's own items),
--       4 health ms, 5.. pairs of score, member
-- Returns 1, or 0 when the lease is not held (nothing written).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local at = tonumber(redis.call('HGET', KEYS[2], 'at') or '-1') or -1
local top = tonumber(ARGV[2])
if top > at then
  at = top
  redis.call('HSET', KEYS[2], 'at', at)
end
for i = 5, #ARGV, 2 do
  redis.call('ZADD', KEYS[3], ARGV[i], ARGV[i + 1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[3])
redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[4])
-- healthy again: the next outage's restore pass (feed_restore.lua) starts from the beginning
-- of the watch index; its cursor is {P}:feedr, the health key's name with "ok" -> "r"
redis.call('DEL', string.sub(KEYS[4], 1, -3) .. 'r')
return 1
