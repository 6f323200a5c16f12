-- watch_sync.lua - what changed in the set of watched requests after a version (read only):
-- every process keeps its copy of the set (the upstream websocket holder subscribes it).
-- KEYS: 1 watch zset, 2 unwatch zset, 3 wver (version counter), 4 wlow (oldest version
--       unwatch still covers). ARGV: 1 last version seen (-1 = none), 2 at most this many.
-- Returns {version, full, id, watched, id, watched, ...}: full = 1 when the list is the
-- whole watched set (the caller drops every id not in it; watched is then always 1), else
-- the changes after ARGV[1] in version order (watched 1 = watch, 0 = unwatch). version is
-- what to pass next time.
local cur = tonumber(redis.call('GET', KEYS[3]) or '0')
local last = tonumber(ARGV[1])
local low = tonumber(redis.call('GET', KEYS[4]) or '0')
local out = {cur, 0}
if last < 0 or last < low or last > cur then
  out[2] = 1
  for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    out[#out + 1] = id
    out[#out + 1] = 1
  end
  return out
end
if last == cur then
  return out
end
local lim = tonumber(ARGV[2])
local add = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. last, '+inf', 'WITHSCORES', 'LIMIT', 0, lim)
local del = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. last, '+inf', 'WITHSCORES', 'LIMIT', 0, lim)
local all = {}
for i = 1, #add, 2 do
  all[#all + 1] = {tonumber(add[i + 1]), add[i], 1}
end
for i = 1, #del, 2 do
  all[#all + 1] = {tonumber(del[i + 1]), del[i], 0}
end
table.sort(all, function(a, b) return a[1] < b[1] end)
local n = math.min(#all, lim)
-- a full batch may have left later changes of one list behind: resume after the last kept
if #add >= 2 * lim or #del >= 2 * lim or #all > lim then
  out[1] = all[n][1]
end
for i = 1, n do
  out[#out + 1] = all[i][2]
  out[#out + 1] = all[i][3]
end
return out
