-- watch_stats.lua - gauges of the watch (read only): stuck requests by status and the
-- oldest unsettled request.
-- KEYS: 1 act zset (active, not waiting, by last status change ms), 2 unset zset (the same
--       ids by first-seen ms). ARGV: 1 stuck cutoff ms (changed before this = stuck), 2 key
--       tag "{P}", 3 at most this many stuck ids are counted by status
-- Returns {oldest first-seen ms or -1, stuck total, status, count, status, count, ...};
-- stuck ids beyond ARGV[3] are counted under the status "other".
local total = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[1])
local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local out = {#oldest > 0 and tonumber(oldest[2]) or -1, total}
local cap = tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, cap)
local by, order = {}, {}
for _, id in ipairs(ids) do
  local st = redis.call('HGET', ARGV[2] .. ':req:' .. id, 'status') or 'other'
  if not by[st] then
    by[st] = 0
    order[#order + 1] = st
  end
  by[st] = by[st] + 1
end
if total > #ids then
  if not by.other then
    by.other = 0
    order[#order + 1] = 'other'
  end
  by.other = by.other + total - #ids
end
for _, st in ipairs(order) do
  out[#out + 1] = st
  out[#out + 1] = by[st]
end
return out
