-- poll_lib.lua - what store/poll_claim.lua and store/poll_take.lua share: taking the due ids
-- of one poll tier.
-- poll_take_due(k, now, n, until_ms, skip, tag, out): up to n ids of tier zset k due by now,
-- most overdue first, appended to out and pushed to until_ms (the claim's lease). While skip > 0
-- (the changes feed is healthy) ids the feed sees (<tag>:req:<id> field fk = "1") are not
-- taken, at most 512 of them per call: when <tag>:feedok exists (the feed is healthy in Redis's
-- own view, store/feed_commit.lua) and the request is not watched anonymously, it leaves the
-- tier (pt = "": watch_lib.lua, feed-covered requests have no tier member; feed_restore.lua
-- puts it back when the feed stops being healthy); otherwise it is pushed to now + skip.
-- Returns how many were taken.
local function poll_take_due(k, now, n, until_ms, skip, tag, out)
  local got, passed, skipped = 0, 0, 0
  local fok
  repeat
    local ids = redis.call('ZRANGEBYSCORE', k, '-inf', now, 'LIMIT', 0, n - got)
    skipped = 0
    for _, id in ipairs(ids) do
      local h = skip > 0 and redis.call('HMGET', tag .. ':req:' .. id, 'fk', 'anon', 'trk')
      if h and h[1] == '1' then
        if fok == nil then
          fok = redis.call('EXISTS', tag .. ':feedok') == 1
        end
        if fok and (h[2] ~= '1' or h[3] == '1') then
          redis.call('ZREM', k, id)
          redis.call('HSET', tag .. ':req:' .. id, 'pt', '')
        else
          redis.call('ZADD', k, 'XX', now + skip, id)
        end
        skipped = skipped + 1
      else
        redis.call('ZADD', k, 'XX', until_ms, id)
        out[#out + 1] = id
        got = got + 1
      end
    end
    passed = passed + skipped
  until skipped == 0 or got >= n or passed >= 512
  return got
end
