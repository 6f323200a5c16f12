-- search_index.lua - index one request's facts for search (store/search.h,
-- store_search_index): its wallets, transaction hashes and referrer, and its creation time.
-- KEYS: 1 <tag>:req:<id> (only so that the script names its slot)
-- ARGV: 1 tag, 2 request id, 3 createdAt ms ("" = unknown: keep the score it has), 4 cap
--       (entries per index key), 5.. entries "<kind>:<value>"
-- A request without a record (not applied yet, or swept) is not indexed: an entry nothing
-- would ever remove. Returns {indexed (1/0), entries new to the request}.
-- #include search_lib.lua
local tag, id, cap = ARGV[1], ARGV[2], tonumber(ARGV[4])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, 0}
end
chunks.unpack(KEYS[1]) -- a packed hash (chunk_lib.lua): whole values before "ix" is written
local score = ARGV[3]
if score ~= '' then
  local old = redis.call('ZSCORE', tag .. ':ct', id)
  -- the hash's "cx" is the score too (store/apply.lua), and so is the member of its status
  -- set (the listing by status orders by creation time): both move with it; a "cx" an older
  -- process left behind (it moved ct only) is corrected here as well
  local h = redis.call('HMGET', KEYS[1], 'ix', 'cx', 'status')
  if old ~= score or h[2] ~= score then
    redis.call('ZADD', tag .. ':ct', score, id)
    redis.call('HSET', KEYS[1], 'cx', score)
    if h[3] then
      redis.call('ZADD', tag .. ':st:' .. h[3], 'XX', score, id)
    end
    -- entries written before (status record values) move to the creation time
    local mine = h[1] or ''
    local b
    for _, e in ipairs(search_mine(mine)) do
      local bin = string.byte(e, 1) == 10
      if redis.call('HGET', bin and search_bkey(tag, e) or tag .. ':ix', e) == '*' then
        if bin then
          b = b or search_bin(id)
          if b then
            redis.call('ZADD', search_zkey(tag, e), 'XX', score, b)
          end
        else
          redis.call('ZADD', tag .. ':ix:' .. e, 'XX', score, id)
        end
      end
    end
  end
else
  score = search_score(tag, id)
  if not score then
    return {0, 0}
  end
end
local ents = {}
for i = 5, #ARGV do
  ents[#ents + 1] = ARGV[i]
end
return {1, search_add(tag, id, score, ents, cap)}
