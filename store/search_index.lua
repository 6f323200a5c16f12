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
  if old ~= score then
    redis.call('ZADD', tag .. ':ct', score, id)
    -- entries written before (status record values) move to the creation time
    local mine = redis.call('HGET', KEYS[1], 'ix') or ''
    for e in string.gmatch(mine, '[^\n]+') do
      if redis.call('HGET', tag .. ':ix', e) == '*' then
        redis.call('ZADD', tag .. ':ix:' .. e, 'XX', score, id)
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
