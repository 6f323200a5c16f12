-- watch_sync.lua - what changed in the set of watched requests after a version: every process
-- keeps its copy of the set (the upstream websocket holder subscribes it); and the trim of the
-- ended watches no process and no record pass needs any more (the only writes).
-- KEYS: 1 watch zset, 2 unwatch zset, 3 wver (version counter), 4 wlow (oldest version
--       unwatch still covers). ARGV: 1 last version seen (-1 = none), 2 at most this many,
--       3 key tag "{P}", 4 "1": this process deflates records (STATUSRELAY_COMPRESS_RECORDS).
-- Returns {version, full, id, watched, id, watched, ...}: full = 1 when the list is the
-- whole watched set (the caller drops every id not in it; watched is then always 1), else
-- the changes after ARGV[1] in version order (watched 1 = watch, 0 = unwatch). version is
-- what to pass next time.
--
-- The trim (before the read): every process syncs each 250 ms, so an ended watch's unwatch
-- member serves processes for HORIZON ms; older members go once the record pass
-- (store/rec_scan.lua) has read them too, i.e. at most its cursor {P}:rzk while some process
-- runs the pass ({P}:rzon exists: each such process keeps it alive here; with no such process
-- for RZON_TTL the cursor, which no longer moves, holds nothing back). At most TRIM members a
-- call; wlow rises to the newest one trimmed, so a process whose last version is older gets
-- the whole set (as after the 100,000 cap of watch_lib.lua's bump, still the hard bound).
-- The time of a version: {P}:wvt, zset of versions (member) by the Redis time (ms) they were
-- the newest, one added when wver moved and the newest is MARK ms old: a version is older than
-- HORIZON when a mark at least HORIZON old is at or above it. Marks older than the one used
-- are dropped (about HORIZON / MARK + 1 are kept).
local HORIZON, MARK, TRIM, RZON_TTL = 30000, 5000, 200, 600000
local cur = tonumber(redis.call('GET', KEYS[3]) or '0')
local low = tonumber(redis.call('GET', KEYS[4]) or '0')
local tag = ARGV[3]
if tag then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local wvt, rzon = tag .. ':wvt', tag .. ':rzon'
  if ARGV[4] == '1' and redis.call('PTTL', rzon) < RZON_TTL / 2 then
    redis.call('SET', rzon, '1', 'PX', RZON_TTL)
  end
  local top = redis.call('ZREVRANGE', wvt, 0, 0, 'WITHSCORES')
  if cur > 0 and (not top[1] or (tonumber(top[1]) < cur and now - tonumber(top[2]) >= MARK)) then
    redis.call('ZADD', wvt, now, cur)
  end
  local h = redis.call('ZREVRANGEBYSCORE', wvt, now - HORIZON, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local old = h[1] and redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if h[1] then
    redis.call('ZREMRANGEBYSCORE', wvt, '-inf', '(' .. h[2])
  end
  if old and old[1] then
    local upto = tonumber(h[1])
    if redis.call('EXISTS', rzon) == 1 then
      -- the record pass reads unwatch from its cursor: nothing it has not read goes
      upto = math.min(upto, tonumber(redis.call('GET', tag .. ':rzk') or '') or -1)
    end
    if tonumber(old[2]) <= upto then
      local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', upto, 'WITHSCORES', 'LIMIT', 0, TRIM)
      local top_gone = gone[#gone]
      redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', top_gone)
      if tonumber(top_gone) > low then
        low = tonumber(top_gone)
        redis.call('SET', KEYS[4], top_gone)
      end
    end
  end
end
local last = tonumber(ARGV[1])
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
