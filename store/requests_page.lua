-- requests_page.lua - one page of a request index zset for GET /v1/requests (read only).
-- Order: score (creation time, ms: first seen until the facts say; {P}:act: the last change)
-- then member bytes, Redis' own zset order. The cursor is the
-- last (score, id) a client saw; paging resumes strictly after it even if that id has since
-- left the zset (a status index loses members as requests change status).
-- KEYS: 1 zset ({P}:ct, {P}:st:<status> or {P}:act)
-- ARGV: 1 cursor score ("" = from the start), 2 cursor id, 3 entries wanted, 4 highest
--       score listed ("" = no bound; {P}:act with now - STUCK_AFTER lists stuck requests)
-- Returns {id, score, id, score, ...}.
-- #include bytes_lib.lua
local want = tonumber(ARGV[3])
local function page()
  if ARGV[1] == '' then
    return redis.call('ZRANGE', KEYS[1], 0, want - 1, 'WITHSCORES')
  end
  local cs, cid = tonumber(ARGV[1]), ARGV[2]
  local cur = redis.call('ZSCORE', KEYS[1], cid)
  if cur and tonumber(cur) == cs then
    local r = redis.call('ZRANK', KEYS[1], cid)
    return redis.call('ZRANGE', KEYS[1], r + 1, r + want, 'WITHSCORES')
  end
  -- The cursor's member is gone: members with the same score sort by bytes (bytes_after).
  local out = {}
  local same = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])
  for _, m in ipairs(same) do
    if #out >= 2 * want then
      return out
    end
    if bytes_after(m, cid) then
      out[#out + 1] = m
      out[#out + 1] = ARGV[1]
    end
  end
  local need = want - #out / 2
  if need > 0 then
    local rest = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf', 'WITHSCORES',
                            'LIMIT', 0, need)
    for _, v in ipairs(rest) do
      out[#out + 1] = v
    end
  end
  return out
end
local out = page()
if ARGV[4] == nil or ARGV[4] == '' then
  return out
end
local max = tonumber(ARGV[4])
for i = 2, #out, 2 do
  if tonumber(out[i]) > max then
    local cut = {}
    for j = 1, i - 2 do
      cut[j] = out[j]
    end
    return cut
  end
end
return out
