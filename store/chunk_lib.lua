-- chunk_lib.lua - a request hash {P}:req:<id> of an ended watch kept a listpack with Redis
-- defaults (store/rec.h "The compact hash"; docs/facts.md "Storage"). Redis keeps a hash compact
-- only while every value is at most hash-max-listpack-value (64 B) and converts it for good at
-- the first larger one, so the record pass (store/rec_put.lua) rewrites the hash of an ended
-- watch (chunks.pack: read, DEL, HSET, in the pass's compare-and-set script) with each value
-- over 64 B of the fields chunkable() names split: its first 62 bytes stay in the field, the
-- rest of all of them goes to one stream cut into parts of 63 B:
--   field f      "\0" .. the value's first 62 bytes (63 B: a listpack entry with a 1-byte header)
--   "ck"         the chunked fields with their whole lengths, in stream order: "rec:301 fx:537"
--   "1" .. "n"   the stream: the rest of each chunked value (after its first 62 bytes), in ck's
--                order, concatenated and cut into parts of 63 B (the last one shorter); the
--                names are integers, which a listpack stores in one byte
-- One partial part a hash (not one a value) and 2-byte names: ~4 B of overhead a part (~9 B
-- with the "<field>~<n>" parts of one value each, measured in docs/facts.md "Storage").
-- Binary-safe. A value is read as chunked only while "ck" names its field, it is 63 B long and
-- starts with "\0": a value written whole since (an older version's apply, a binary value of
-- another field) is read as it is, and the other values' parts stay where ck says. Readers go
-- through chunks.get / chunks.hmget (C readers through scripts: requests_read.lua,
-- req_get.lua, apply_read.lua), which answer the whole value.
-- Writers of a chunkable field call chunks.unpack first when the hash has "ck": the hash is
-- back in the layout of a watched request (whole values, no chunks) and everything written
-- afterwards is as before; an ended watch's id goes to {P}:rzq, so that the pass packs it
-- again (rec_scan.lua). relay/common/embed.pl pastes this file where a script has the line
-- "-- #include chunk_lib.lua"; it needs nothing defined before it.
local chunks = {max = 64, head = 62, part = 63, entries = 128}

-- The fields stored in chunks when over 64 B: the record, the facts versions, search's own,
-- the tracking metadata (track.lua).
function chunks.chunkable(f)
  return f == 'rec' or f == 'ix' or f == 'meta' or string.match(f, '^fx%d*$') ~= nil
end

-- Where ck (c) puts field f: the offset of its rest in the stream and its whole length; nil
-- when c does not name it.
function chunks.listed(c, f)
  if c == nil or c == false then
    return nil
  end
  local off = 0
  for name, n in string.gmatch(c, '([^ :]+):(%d+)') do
    n = tonumber(n)
    if name == f then
      return off, n
    end
    off = off + n - chunks.head
  end
  return nil
end

-- The whole value of field f of hash k whose stored value is v (false/nil: absent) and whose
-- "ck" is c; all: optional, the hash's fields as a table (no read then). A chunked value with
-- a part missing is answered as stored (its reader finds it unreadable).
function chunks.join(k, f, v, c, all)
  if not v or not c or #v ~= chunks.head + 1 or string.byte(v) ~= 0 then
    return v
  end
  local off, n = chunks.listed(c, f)
  if not off or n <= chunks.max then
    return v
  end
  local rest = n - chunks.head
  local a, b = math.floor(off / chunks.part) + 1, math.floor((off + rest - 1) / chunks.part) + 1
  local p = {}
  if all then
    for i = a, b do
      p[#p + 1] = all[tostring(i)] or false
    end
  else
    local names = {}
    for i = a, b do
      names[#names + 1] = tostring(i)
    end
    p = redis.call('HMGET', k, unpack(names))
  end
  for i = 1, #p do
    if not p[i] then
      return v
    end
  end
  local from = off - (a - 1) * chunks.part + 1
  local t = string.sub(table.concat(p), from, from + rest - 1)
  if #t ~= rest then
    return v
  end
  return string.sub(v, 2) .. t
end

-- HGET with the whole value.
function chunks.get(k, f)
  local h = redis.call('HMGET', k, f, 'ck')
  return chunks.join(k, f, h[1], h[2])
end

-- HMGET with whole values (false where absent); fields: a list of names.
function chunks.hmget(k, fields)
  local n = #fields
  local ask = {unpack(fields)}
  ask[n + 1] = 'ck'
  local h = redis.call('HMGET', k, unpack(ask))
  local c = h[n + 1]
  h[n + 1] = nil
  if c then
    for i = 1, n do
      h[i] = chunks.join(k, fields[i], h[i], c)
    end
  end
  return h
end

-- The hash's fields as a list of names and values (HGETALL) and as a table.
local function chunks_all(k)
  local raw = redis.call('HGETALL', k)
  local all = {}
  for i = 1, #raw, 2 do
    all[raw[i]] = raw[i + 1]
  end
  return raw, all
end

-- Is f a part of the stream ("1" .. "n") of a hash whose "ck" is c?
local function chunks_part(c, f)
  return c ~= nil and c ~= false and string.match(f, '^%d+$') ~= nil
end

-- Before a write of a chunkable field: the hash back to whole values (c: its "ck" when the
-- caller read it, else read here). Returns true when it was chunked.
function chunks.unpack(k, c)
  c = c or redis.call('HGET', k, 'ck')
  if not c then
    return false
  end
  local raw, all = chunks_all(k)
  local del, set = {'ck'}, {}
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    if chunks_part(c, f) then
      del[#del + 1] = f
    elseif f ~= 'ck' then
      local w = chunks.join(k, f, v, c, all)
      if w ~= v then
        set[#set + 1] = f
        set[#set + 1] = w
      end
    end
  end
  redis.call('HDEL', k, unpack(del))
  if #set > 0 then
    redis.call('HSET', k, unpack(set))
  end
  -- an ended watch's hash is packed again by the pass's next step (rec_scan.lua, {P}:rzq)
  local tag, id = string.match(k, '^(.*):req:(.+)$')
  if tag and all.watch ~= 'active' and all.watch ~= 'settled' then
    redis.call('ZADD', tag .. ':rzq', 'NX', 0, id)
  end
  return true
end

-- Does a hash with a value of n bytes stay a listpack on this Redis (its
-- hash-max-listpack-value, which a script cannot read: probed once per length class and
-- script call on a scratch key of the hash's tag, "<tag>:ckp", deleted at once)? Values are
-- chunked only where Redis needs it: with hash-max-listpack-value 2048 (docs/operations.md
-- "Redis memory") a hash stays whole, and chunks would only cost bytes.
local chunks_ok, chunks_bad = 64, nil
function chunks.fits(k, n)
  if n <= chunks_ok then
    return true
  elseif chunks_bad and n >= chunks_bad then
    return false
  end
  local t = (string.match(k, '^(.*):req:') or k) .. ':ckp'
  redis.call('DEL', t)
  redis.call('HSET', t, 'v', string.rep('x', n))
  local e = redis.call('OBJECT', 'ENCODING', t)
  redis.call('DEL', t)
  if e == 'listpack' or e == 'ziplist' then
    chunks_ok = n
    return true
  end
  chunks_bad = n
  return false
end

-- The rewrite of an ended watch's hash (store/rec_put.lua, after its checks): every value of
-- a chunkable field over 64 B split (its first 62 bytes in the field, the rest in the stream)
-- when Redis would not keep the hash a listpack with its largest value (chunks.fits), every
-- field drop(f, v) says is not needed removed, DEL and one HSET (the key's TTL kept); when
-- nothing needs chunks and the hash is compact already, only the dropped fields go (HDEL).
-- Not rewritten (false) when it could not be a listpack anyway (a value over 64 B of another
-- field, more than 128 entries) or nothing would change. Returns true when written.
function chunks.pack(k, drop)
  local raw, all = chunks_all(k)
  local c = all.ck
  local out, list, rest, n, gone = {}, {}, {}, 0, {}
  local big = 0
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    if f ~= 'ck' and not chunks_part(c, f) then
      big = math.max(big, #chunks.join(k, f, v, c, all))
    end
  end
  local whole = chunks.fits(k, big)
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    if f == 'ck' or chunks_part(c, f) then
      -- the old stream: the values are rebuilt whole below
    elseif drop and drop(f, v) then
      gone[#gone + 1] = f
    else
      v = chunks.join(k, f, v, c, all)
      if whole or #v <= chunks.max then
        out[#out + 1] = f
        out[#out + 1] = v
        n = n + 1
      elseif chunks.chunkable(f) then
        out[#out + 1] = f
        out[#out + 1] = '\0' .. string.sub(v, 1, chunks.head)
        list[#list + 1] = f .. ':' .. #v
        rest[#rest + 1] = string.sub(v, chunks.head + 1)
        n = n + 1
      else
        return false
      end
    end
  end
  if #list > 0 then
    local cv = table.concat(list, ' ')
    local s = table.concat(rest)
    local parts = math.ceil(#s / chunks.part)
    if #cv > chunks.max or n + parts + 1 > chunks.entries then
      return false
    end
    for j = 1, parts do
      local at = (j - 1) * chunks.part + 1
      out[#out + 1] = tostring(j)
      out[#out + 1] = string.sub(s, at, at + chunks.part - 1)
    end
    out[#out + 1] = 'ck'
    out[#out + 1] = cv
    n = n + parts + 1
  end
  if n > chunks.entries or n == 0 then
    return false
  end
  if #list == 0 and not c then
    local e = redis.call('OBJECT', 'ENCODING', k)
    if e == 'listpack' or e == 'ziplist' then
      if #gone == 0 then
        return false
      end
      redis.call('HDEL', k, unpack(gone))
      return true
    end
  end
  local ttl = redis.call('PTTL', k)
  redis.call('DEL', k)
  redis.call('HSET', k, unpack(out))
  if ttl > 0 then
    redis.call('PEXPIRE', k, ttl)
  end
  return true
end
