-- search_page.lua - one partition's page of a search (GET /v1/requests with q, user, txHash,
-- referrer, from, to; store/search.h). Read only. Order: creation time (the <tag>:ct score),
-- then id bytes; the cursor is the last (score, id) a client saw.
-- KEYS: 1 <tag>:ct
-- ARGV: 1 tag, 2 q as a request id ("" = no q), 3 q normalised (a wallet, a deposit address
--       or a hash), 4 user
--       (a wallet: user, sender or recipient), 5 txHash, 6 referrer (each "" = not given),
--       7 from ms, 8 to ms ("" = unbounded), 9 status ("" = any), 10 cursor score ("" = from
--       the start), 11 cursor id, 12 entries wanted
-- Returns {id, score, id, score, ...}.
-- #include search_lib.lua
-- #include bytes_lib.lua
local tag = ARGV[1]
local lo, hi = tonumber(ARGV[7]), tonumber(ARGV[8])
local status, cs, cid, want = ARGV[9], tonumber(ARGV[10]), ARGV[11], tonumber(ARGV[12])
local stkey = tag .. ':st:' .. status

local function keep(id, score)
  if lo and score < lo or hi and score > hi then
    return false
  end
  if cs and (score < cs or score == cs and not bytes_after(id, cid)) then
    return false
  end
  return status == '' or redis.call('ZSCORE', stkey, id) ~= false
end

-- the candidate sets (id -> true), one per parameter given
local sets = {}
local function members(kind, v)
  local set = {}
  for _, id in ipairs(search_ids(tag, kind .. ':' .. v)) do
    set[id] = true
  end
  return set
end
if ARGV[3] ~= '' then
  local set = members('w', ARGV[3])
  for _, kind in ipairs({'tx', 'dep'}) do
    for id in pairs(members(kind, ARGV[3])) do
      set[id] = true
    end
  end
  if ARGV[2] ~= '' and search_score(tag, ARGV[2]) then
    set[ARGV[2]] = true
  end
  sets[#sets + 1] = set
end
if ARGV[4] ~= '' then sets[#sets + 1] = members('w', ARGV[4]) end
if ARGV[5] ~= '' then sets[#sets + 1] = members('tx', ARGV[5]) end
if ARGV[6] ~= '' then sets[#sets + 1] = members('ref', ARGV[6]) end

local out = {}
if #sets == 0 then
  -- a time range only: the creation-time zset itself, in batches past the cursor
  local min = lo and tostring(lo) or '-inf'
  if cs and (not lo or cs >= lo) then
    min = ARGV[10]
  end
  local max = hi and tostring(hi) or '+inf'
  local off = 0
  while #out < 2 * want do
    local es = redis.call('ZRANGEBYSCORE', KEYS[1], min, max, 'WITHSCORES', 'LIMIT', off, 256)
    for i = 1, #es, 2 do
      if #out < 2 * want and keep(es[i], tonumber(es[i + 1])) then
        out[#out + 1] = es[i]
        out[#out + 1] = es[i + 1]
      end
    end
    if #es < 512 then
      break
    end
    off = off + 256
  end
  return out
end

local ents = {}
for id in pairs(sets[1]) do
  local all = true
  for j = 2, #sets do
    if not sets[j][id] then
      all = false
      break
    end
  end
  if all then
    local s = search_score(tag, id)
    if s and keep(id, tonumber(s)) then
      ents[#ents + 1] = {id, tonumber(s), s}
    end
  end
end
table.sort(ents, function(a, b)
  if a[2] ~= b[2] then
    return a[2] < b[2]
  end
  return bytes_after(b[1], a[1])
end)
for i = 1, math.min(#ents, want) do
  out[#out + 1] = ents[i][1]
  out[#out + 1] = ents[i][3]
end
return out
