-- poll_lib.lua - what store/poll_claim.lua and store/poll_take.lua share: taking the due ids
-- of one poll tier.
-- poll_take_due(k, now, n, until_ms, skip, tag, out): up to n ids of tier zset k due by now,
-- most overdue first, appended to out and pushed to until_ms (the claim's lease). While skip > 0
-- (the changes feed is healthy) ids the feed sees (<tag>:req:<id> field fk = "1") are pushed to
-- now + skip instead of taken, at most 512 of them per call. Returns how many were taken.
local function poll_take_due(k, now, n, until_ms, skip, tag, out)
  local got, passed, skipped = 0, 0, 0
  repeat
    local ids = redis.call('ZRANGEBYSCORE', k, '-inf', now, 'LIMIT', 0, n - got)
    skipped = 0
    for _, id in ipairs(ids) do
      if skip > 0 and redis.call('HGET', tag .. ':req:' .. id, 'fk') == '1' then
        redis.call('ZADD', k, 'XX', now + skip, id)
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
