-- search_lib.lua - the search indexes of one request (store/search.h), included by
-- store/search_index.lua (facts), store/apply.lua (the status record's hashes) and
-- store/req_gc.lua (removal). Keys, all in the request's partition (tag):
--   <tag>:ix:<kind>:<value>  zset  request ids by creation time (ms): kind "w" (a wallet: user,
--                                  sender or recipient), "tx" (a transaction hash: in, out,
--                                  deposit), "ref" (a referrer); at most cap entries each (the
--                                  oldest go first)
--   <tag>:ct                 zset  every request id by creation time: the facts' createdAt
--                                  once known, first seen until then
--   <tag>:ixr:<id>           set   "<kind>:<value>" of every index entry the request has (so
--                                  removing the request removes them)
-- Values arrive normalised (store/search.c: 0x wallets and hashes lower-cased).

-- The creation-time score of id: its createdAt (ct) or first seen (all); nil when unknown.
local function search_score(tag, id)
  local s = redis.call('ZSCORE', tag .. ':ct', id)
  if not s then
    s = redis.call('ZSCORE', tag .. ':all', id)
  end
  return s
end

-- Add id to the index entries ents ({"tx:0xab..", "w:0x..", ...}) at score; cap per key.
-- Returns the number of entries new to the request.
local function search_add(tag, id, score, ents, cap)
  local added = 0
  local ixr = tag .. ':ixr:' .. id
  for _, e in ipairs(ents) do
    local k = tag .. ':ix:' .. e
    redis.call('ZADD', k, score, id)
    added = added + redis.call('SADD', ixr, e)
    local n = redis.call('ZCARD', k)
    if n > cap then
      redis.call('ZPOPMIN', k, n - cap)
    end
  end
  return added
end

-- Remove every index entry of id (the retention sweep deleted the request).
local function search_drop(tag, id)
  local ixr = tag .. ':ixr:' .. id
  for _, e in ipairs(redis.call('SMEMBERS', ixr)) do
    redis.call('ZREM', tag .. ':ix:' .. e, id)
  end
  redis.call('DEL', ixr)
  redis.call('ZREM', tag .. ':ct', id)
end
