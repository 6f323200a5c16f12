-- search_lib.lua - the search indexes of one request (store/search.h), included by
-- store/search_index.lua (facts), store/apply.lua (the status record's values),
-- store/search_page.lua (reads) and store/req_gc.lua (removal). Keys, all in the request's
-- partition (tag):
--   <tag>:ix              hash  the field of an entry "<kind>:<value>" (search_field: "<kind>#"
--                               and 16 hex digits of the entry's SHA-1) -> the ids of its
--                               requests, space-separated (at most SEARCH_SMALL), or "*":
--                               they are in <tag>:ix:<field>. kind "w" (a wallet: user, sender,
--                               recipient, depositor), "tx" (a transaction hash: in, out,
--                               deposit), "ref" (a referrer), "dep" (a deposit address)
--   <tag>:ix:<field>      zset  the ids of an entry with more than SEARCH_SMALL requests, by
--                               creation time (ms); at most cap (the oldest go first)
--   <tag>:ct              zset  every request id by creation time: the facts' createdAt
--                               once known, first seen until then
--   <tag>:req:<id> "ix"         the request's own fields, one per line (so that removing the
--                               request removes them)
-- One hash field per value, not one key per value: a zset key holding one 66-byte id is a
-- skiplist of about 1 KB; a field about 150 bytes. The field is a 64-bit digest of the entry,
-- not the entry: 19 bytes instead of up to 130 (a 0x hash: 69), in the index and in the
-- request's own list (about 440 B less per request with facts). Two values share a field
-- with a chance of about n^2 / 2^65 for n values (1e6 values: 3e-8); a search for one then
-- also returns the other's requests. Entries written before the digest (the field is the
-- entry itself, "<kind>:<value>", told apart by its ':') are still read, reused for their
-- value and removed: no migration. Values arrive normalised (store/search.c: 0x wallets and
-- hashes lower-cased).
-- #include chunk_lib.lua
local SEARCH_SMALL = 16

-- The creation-time score of id: its createdAt (ct) or first seen (all); nil when unknown.
local function search_score(tag, id)
  local s = redis.call('ZSCORE', tag .. ':ct', id)
  if not s then
    s = redis.call('ZSCORE', tag .. ':all', id)
  end
  return s
end

local function search_split(v)
  local t = {}
  for x in string.gmatch(v, '%S+') do
    t[#t + 1] = x
  end
  return t
end

-- The <tag>:ix field of entry e ("<kind>:<value>"): "<kind>#" and 16 hex digits of its SHA-1.
local function search_field(e)
  return (string.match(e, '^([^:]*):') or '') .. '#' .. string.sub(redis.sha1hex(e), 1, 16)
end

-- The ids of entry e ("<kind>:<value>"): under its field, and under the entry itself (written
-- before the digest), each id once.
local function search_ids(tag, e)
  local out, seen = {}, {}
  for _, f in ipairs({search_field(e), e}) do
    local v = redis.call('HGET', tag .. ':ix', f)
    local ids = {}
    if v == '*' then
      ids = redis.call('ZRANGE', tag .. ':ix:' .. f, 0, -1)
    elseif v then
      ids = search_split(v)
    end
    for _, x in ipairs(ids) do
      if not seen[x] then
        seen[x] = true
        out[#out + 1] = x
      end
    end
  end
  return out
end

-- Add id to the index entries ents ({"tx:0xab..", "w:0x..", ...}) at score; cap per entry.
-- Returns the number of entries new to the request. held: optional, the request's "ix" as
-- the caller read it ("" when absent); then the request's new "ix" (or nil: unchanged) is
-- returned second, for the caller to write with its own HSET, instead of written here.
local function search_add(tag, id, score, ents, cap, held)
  local h, req = tag .. ':ix', tag .. ':req:' .. id
  if not held then
    chunks.unpack(req) -- a packed hash (chunk_lib.lua): whole values before "ix" is written
  end
  local mine = held or redis.call('HGET', req, 'ix') or ''
  -- have: the request's fields; an entry it has under the entry itself (written before the
  -- digest) keeps that field
  local have, old = {}, {}
  for f in string.gmatch(mine, '[^\n]+') do
    have[f] = true
    if string.find(f, ':', 1, true) then
      old[search_field(f)] = f
    end
  end
  local added = 0
  for _, ent in ipairs(ents) do
    local e = search_field(ent)
    e = old[e] or e
    local v = redis.call('HGET', h, e)
    if v == '*' then
      local k = h .. ':' .. e
      redis.call('ZADD', k, score, id)
      local n = redis.call('ZCARD', k)
      if n > cap then
        redis.call('ZPOPMIN', k, n - cap)
      end
    elseif not v then
      redis.call('HSET', h, e, id)
    elseif not string.find(' ' .. v .. ' ', ' ' .. id .. ' ', 1, true) then
      local ids = search_split(v)
      if #ids >= SEARCH_SMALL then
        local k = h .. ':' .. e
        for _, x in ipairs(ids) do
          redis.call('ZADD', k, search_score(tag, x) or score, x)
        end
        redis.call('ZADD', k, score, id)
        redis.call('HSET', h, e, '*')
      else
        redis.call('HSET', h, e, v .. ' ' .. id)
      end
    end
    if not have[e] then
      have[e] = true
      mine = mine .. e .. '\n'
      added = added + 1
    end
  end
  if held then
    return added, added > 0 and mine or nil
  end
  if added > 0 then
    redis.call('HSET', req, 'ix', mine)
  end
  return added
end

-- Remove every index entry of id (the retention sweep deletes the request): before its hash
-- goes.
local function search_drop(tag, id)
  local h = tag .. ':ix'
  local mine = chunks.get(tag .. ':req:' .. id, 'ix')
  for e in string.gmatch(mine or '', '[^\n]+') do
    local v = redis.call('HGET', h, e)
    if v == '*' then
      local k = h .. ':' .. e
      redis.call('ZREM', k, id)
      if redis.call('ZCARD', k) == 0 then
        redis.call('HDEL', h, e)
      end
    elseif v then
      local left = {}
      for _, x in ipairs(search_split(v)) do
        if x ~= id then
          left[#left + 1] = x
        end
      end
      if #left == 0 then
        redis.call('HDEL', h, e)
      else
        redis.call('HSET', h, e, table.concat(left, ' '))
      end
    end
  end
  redis.call('ZREM', tag .. ':ct', id)
end
