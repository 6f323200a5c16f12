-- wh_list.lua - page through an endpoint's deliveries, newest first, optionally by state.
-- KEYS: 1 the endpoint's delivery zset
-- ARGV: 1 tag, 2 state or "", 3 offset, 4 limit
-- Returns {next offset or -1, {field, value, ... , "id", delivery id}, ...}. Scans at most
-- 5,000 entries per call; entries whose hash expired are dropped from the zset.
local tag, want = ARGV[1], ARGV[2]
local off, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {-1}
local scanned = 0
local dlh = tag .. ':dlh:' .. (string.match(KEYS[1], ':dls:(.*)$') or '')
local names = {'ev', 'rid', 'seq', 'st', 'sid', 'et', 'done', 'a1'}

-- a delivery delivered at its first attempt has no record, only a compact entry in the
-- endpoint's delivered log (wh_fanout.lua): its fields as a record would have them
local function compact(did)
  local c = redis.call('HGET', dlh, did)
  if not c then
    return {}
  end
  local h, i = {}, 1
  for part in string.gmatch(c .. '\n', '([^\n]*)\n') do
    if names[i] then
      h[#h + 1] = names[i]
      h[#h + 1] = part
    end
    i = i + 1
  end
  local wh = string.match(KEYS[1], ':dls:(.*)$')
  for _, kv in ipairs({{'wh', wh}, {'ct', h[14]}, {'att', '1'}, {'nlog', '1'},
                       {'state', 'delivered'}, {'rp', '0'}, {'q', '0'}}) do
    h[#h + 1] = kv[1]
    h[#h + 1] = kv[2]
  end
  return h
end
while scanned < 5000 do
  local ids = redis.call('ZREVRANGE', KEYS[1], off, off + 499)
  if #ids == 0 then
    return out
  end
  local removed = 0
  for k, did in ipairs(ids) do
    local h = redis.call('HGETALL', tag .. ':dl:' .. did)
    if #h == 0 then
      h = compact(did)
    end
    if #h == 0 then
      redis.call('ZREM', KEYS[1], did)
      removed = removed + 1
    else
      local st
      for j = 1, #h, 2 do
        if h[j] == 'state' then
          st = h[j + 1]
        end
      end
      if want == '' or st == want then
        h[#h + 1] = 'id'
        h[#h + 1] = did
        -- the offset just after this entry (several partitions: the listing is merged, and
        -- each partition's cursor stops after the last of its entries shown)
        h[#h + 1] = 'off'
        h[#h + 1] = tostring(off + k - removed)
        out[#out + 1] = h
        if #out - 1 >= limit then
          out[1] = off + k - removed
          return out
        end
      end
    end
  end
  off = off + #ids - removed
  scanned = scanned + #ids
end
out[1] = off
return out
