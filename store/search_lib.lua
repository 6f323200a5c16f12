-- search_lib.lua - the search indexes of one request (store/search.h), included by
-- store/search_index.lua (facts), store/apply.lua (the status record's values),
-- store/search_page.lua (reads) and store/req_gc.lua (removal). Keys, all in the request's
-- partition (tag):
--   <tag>:ix:<3 hex>      hash  binary entries, in 4096 bucket hashes by the first 12 bits of
--                               the digest (search_bkey): an entry "<kind>:<value>" (kind "w"
--                               a wallet: user, sender, recipient, depositor; "tx" a
--                               transaction hash: in, out, deposit; "ref" a referrer; "dep" a
--                               deposit address) -> the ids of its requests. The field is "\n"
--                               and the 8 bytes of the entry's 64-bit digest (search_fbin: the
--                               first 8 bytes of its SHA-1; the kind is part of the digested
--                               text), the value the requests' ids as 32 binary bytes each,
--                               concatenated (at most SEARCH_SMALL), or "*": they are in
--                               <tag>:ix:#<16 hex of the digest>, a zset of binary ids. A
--                               bucket of at most hash-max-listpack-entries (512) entries with
--                               values of at most hash-max-listpack-value bytes (64 by default:
--                               two ids; 2048 recommended) stays a listpack: ~45 B an entry
--                               instead of ~100 in one big hash. Only ids of the upstream's
--                               form "0x" and 64 lower-case hex digits are binary (search_bin);
--                               any other id (the relay accepts up to 128 of [A-Za-z0-9_:.-])
--                               is indexed in the text form.
--   <tag>:ix              hash  the text form (versions up to 65785ee, and other ids): the
--                               field "<kind>#" and the 16 hex digits of the digest
--                               (search_field), the value the ids space-separated or "*" (then
--                               <tag>:ix:<field>, a zset of text ids); older still (52c16ea),
--                               the field the entry itself ("<kind>:<value>"). Every form is
--                               read and removed: no migration; the retention sweep takes the
--                               old ones with their requests.
--   <tag>:ix:#<16 hex>,   zset  the ids of an entry with more than SEARCH_SMALL requests, by
--   <tag>:ix:<field>            creation time (ms); at most cap (the oldest go first)
--   <tag>:ct              zset  every request id by creation time: the facts' createdAt
--                               once known, first seen until then
--   <tag>:req:<id> "ix"         the request's own fields (so that removing the request removes
--                               them): binary fields (9 bytes, starting with "\n")
--                               concatenated, text fields each followed by "\n"; both may be
--                               present (search_mine reads them).
-- One hash field per value, not one key per value: a zset key holding one 66-byte id is a
-- skiplist of about 1 KB. Two values share a digest with a chance of about n^2 / 2^65 for n
-- values (1e6 values: 3e-8); a search for one then also returns the other's requests. A
-- version up to 65785ee never reads a bucket (it looks up text fields only) and never finds a
-- binary field through a request's "ix": a binary field always holds "\n", and it splits "ix"
-- into lines; its own text lines appended after binary fields are read here. Values arrive
-- normalised (store/search.c: 0x wallets and hashes lower-cased).
-- #include chunk_lib.lua
local SEARCH_SMALL = 16

-- The creation-time score of id in ct: its createdAt, or first seen; nil when unknown.
local function search_score(tag, id)
  local s = redis.call('ZSCORE', tag .. ':ct', id)
  return s
end

local function search_split(v)
  local t = {}
  for x in string.gmatch(v, '%S+') do
    t[#t + 1] = x
  end
  return t
end

-- The 32 binary bytes of request id when it is "0x" and 64 lower-case hex digits, else nil.
local function search_bin(id)
  if #id ~= 66 or string.sub(id, 1, 2) ~= '0x' or string.find(id, '[^0-9a-f]', 3) then
    return nil
  end
  local s = string.sub
  return struct.pack('>I4I4I4I4I4I4I4I4', tonumber(s(id, 3, 10), 16),
                     tonumber(s(id, 11, 18), 16), tonumber(s(id, 19, 26), 16),
                     tonumber(s(id, 27, 34), 16), tonumber(s(id, 35, 42), 16),
                     tonumber(s(id, 43, 50), 16), tonumber(s(id, 51, 58), 16),
                     tonumber(s(id, 59, 66), 16))
end

-- The request id of 32 binary bytes (search_bin's inverse).
local function search_hex(b)
  return string.format('0x%08x%08x%08x%08x%08x%08x%08x%08x',
                       struct.unpack('>I4I4I4I4I4I4I4I4', b))
end

-- The text-form <tag>:ix field of entry e ("<kind>:<value>"): "<kind>#" and the 16 hex digits
-- of its digest.
local function search_field(e)
  return (string.match(e, '^([^:]*):') or '') .. '#' .. string.sub(redis.sha1hex(e), 1, 16)
end

-- The binary field of a digest's 16 hex digits: "\n" and its 8 bytes.
local function search_fhex(h)
  return '\n' .. struct.pack('>I4I4', tonumber(string.sub(h, 1, 8), 16),
                             tonumber(string.sub(h, 9, 16), 16))
end

-- The binary <tag>:ix field of entry e.
local function search_fbin(e)
  return search_fhex(redis.sha1hex(e))
end

-- The binary field f's overflow zset: <tag>:ix:#<16 hex digits of the digest>.
local function search_zkey(tag, f)
  return tag .. ':ix:#' .. string.format('%08x%08x', struct.unpack('>I4I4', f, 2))
end

-- The bucket of binary field f: <tag>:ix:<3 hex digits>, the digest's first 12 bits.
local function search_bkey(tag, f)
  return tag .. ':ix:' .. string.format('%03x', string.byte(f, 2) * 16 +
                                              math.floor(string.byte(f, 3) / 16))
end

-- The fields of a request's "ix" (binary ones with their leading "\n", 9 bytes; text ones
-- without their line end), in order.
local function search_mine(mine)
  local out, p, n = {}, 1, #mine
  while p <= n do
    if string.byte(mine, p) == 10 then
      if p + 8 <= n then
        out[#out + 1] = string.sub(mine, p, p + 8)
      end
      p = p + 9
    else
      local q = string.find(mine, '\n', p, true) or n + 1
      out[#out + 1] = string.sub(mine, p, q - 1)
      p = q + 1
    end
  end
  return out
end

-- The binary field a field of any form stands for (a text one: the same digest), or nil.
local function search_fof(f)
  if string.byte(f, 1) == 10 then
    return f
  end
  local h = string.match(f, '^[^:#]*#(%x+)$')
  if h and #h == 16 then
    return search_fhex(h)
  end
  if string.find(f, ':', 1, true) then
    return search_fbin(f)
  end
  return nil
end

-- The 1-based start of binary id b in value v (at a multiple of 32 bytes), or nil.
local function search_at(v, b)
  local i = string.find(v, b, 1, true)
  while i and (i - 1) % 32 ~= 0 do
    i = string.find(v, b, i + 1, true)
  end
  return i
end

-- The ids of entry e ("<kind>:<value>"), as text: under its binary field, its text field and
-- the entry itself (the forms of versions before), each id once.
local function search_ids(tag, e)
  local out, seen = {}, {}
  local function put(x)
    if not seen[x] then
      seen[x] = true
      out[#out + 1] = x
    end
  end
  local h = tag .. ':ix'
  local fb = search_fbin(e)
  local v = redis.call('HGET', search_bkey(tag, fb), fb)
  if v == '*' then
    for _, x in ipairs(redis.call('ZRANGE', search_zkey(tag, fb), 0, -1)) do
      if #x == 32 then
        put(search_hex(x))
      end
    end
  elseif v then
    for i = 1, #v - 31, 32 do
      put(search_hex(string.sub(v, i, i + 31)))
    end
  end
  for _, f in ipairs({search_field(e), e}) do
    v = redis.call('HGET', h, f)
    local ids = {}
    if v == '*' then
      ids = redis.call('ZRANGE', h .. ':' .. f, 0, -1)
    elseif v then
      ids = search_split(v)
    end
    for _, x in ipairs(ids) do
      put(x)
    end
  end
  return out
end

-- Add member m at score to the overflow zset k of an entry, keeping its newest cap members.
local function search_zcap(k, score, m, cap)
  redis.call('ZADD', k, score, m)
  local n = redis.call('ZCARD', k)
  if n > cap then
    redis.call('ZPOPMIN', k, n - cap)
  end
end

-- Text form: add id to the field f (of any version before) at score; cap per entry.
local function search_add_text(tag, f, id, score, cap)
  local h = tag .. ':ix'
  local v = redis.call('HGET', h, f)
  if v == '*' then
    search_zcap(h .. ':' .. f, score, id, cap)
  elseif not v then
    redis.call('HSET', h, f, id)
  elseif not string.find(' ' .. v .. ' ', ' ' .. id .. ' ', 1, true) then
    local ids = search_split(v)
    if #ids >= SEARCH_SMALL then
      local k = h .. ':' .. f
      for _, x in ipairs(ids) do
        redis.call('ZADD', k, search_score(tag, x) or score, x)
      end
      redis.call('ZADD', k, score, id)
      redis.call('HSET', h, f, '*')
    else
      redis.call('HSET', h, f, v .. ' ' .. id)
    end
  end
end

-- Binary form: add b (id's binary form) to the binary field f at score; cap per entry.
local function search_add_bin(tag, f, id, b, score, cap)
  local h = search_bkey(tag, f)
  local v = redis.call('HGET', h, f)
  if v == '*' then
    search_zcap(search_zkey(tag, f), score, b, cap)
  elseif not v then
    redis.call('HSET', h, f, b)
  elseif not search_at(v, b) then
    if #v >= 32 * SEARCH_SMALL then
      local k = search_zkey(tag, f)
      for i = 1, #v - 31, 32 do
        local x = string.sub(v, i, i + 31)
        redis.call('ZADD', k, search_score(tag, search_hex(x)) or score, x)
      end
      redis.call('ZADD', k, score, b)
      redis.call('HSET', h, f, '*')
    else
      redis.call('HSET', h, f, v .. b)
    end
  end
end

-- Add id to the index entries ents ({"tx:0xab..", "w:0x..", ...}) at score; cap per entry.
-- Returns the number of entries new to the request. held: optional, the request's "ix" as
-- the caller read it ("" when absent); then the request's new "ix" (or nil: unchanged) is
-- returned second, for the caller to write with its own HSET, instead of written here.
-- An entry the request has in a text form already (written by a version before) stays there.
local function search_add(tag, id, score, ents, cap, held)
  local req = tag .. ':req:' .. id
  if not held then
    chunks.unpack(req) -- a packed hash (chunk_lib.lua): whole values before "ix" is written
  end
  local mine = held or redis.call('HGET', req, 'ix') or ''
  local b = search_bin(id)
  -- have: the binary field each of the request's fields stands for -> that field
  local have = {}
  for _, f in ipairs(search_mine(mine)) do
    local fb = search_fof(f)
    if fb then
      have[fb] = f
    end
  end
  local added = 0
  for _, ent in ipairs(ents) do
    local fb = search_fbin(ent)
    local f = have[fb]
    if f and string.byte(f, 1) ~= 10 then
      search_add_text(tag, f, id, score, cap)
    elseif b then
      search_add_bin(tag, fb, id, b, score, cap)
      if not f then
        have[fb] = fb
        mine = mine .. fb
        added = added + 1
      end
    else
      f = search_field(ent)
      search_add_text(tag, f, id, score, cap)
      have[fb] = f
      mine = mine .. f .. '\n'
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
  local b
  for _, e in ipairs(search_mine(mine or '')) do
    local bin = string.byte(e, 1) == 10
    if bin and not b then
      b = search_bin(id) or ''
    end
    local hk = bin and search_bkey(tag, e) or h
    local v = redis.call('HGET', hk, e)
    if v == '*' then
      local k = bin and search_zkey(tag, e) or h .. ':' .. e
      redis.call('ZREM', k, bin and b or id)
      if redis.call('ZCARD', k) == 0 then
        redis.call('HDEL', hk, e)
      end
    elseif v and bin then
      local i = b ~= '' and search_at(v, b)
      if i then
        if #v == 32 then
          redis.call('HDEL', hk, e)
        else
          redis.call('HSET', hk, e, string.sub(v, 1, i - 1) .. string.sub(v, i + 32))
        end
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
