-- events_by_request.lua - a request's events from the event stream, oldest first, strictly
-- after a stream id. The timeline list holds the stream ids of the request's events in
-- append order; ids whose entry was trimmed from the stream (by count in apply.lua, by age
-- in wh_gc.lua) are skipped, and the leading ones older than the stream's first entry are
-- cut from the list (the only write: the index repairs itself as it is read; a timeline of
-- a request whose events are all gone is deleted). A request with few events has no list: its
-- stream ids are the hash's "tl" field (store/tl_lib.lua, written by tl_push in
-- store/watch_lib.lua), cut the same way (rewritten without them, dropped when none is left);
-- a hash of an older version may hold "tl1" (one id) instead, or next to a list, and during a
-- rolling upgrade any two of the three: their ids are read together, in stream order.
-- KEYS: 1 timeline list {P}:tl:<id>, 2 event stream {P}:events, 3 request hash {P}:req:<id>
-- ARGV: 1 after: ms part of a stream id ("" = from the start), 2 after: sequence part,
--       3 maximum entries
-- Returns entries in XRANGE form: {{stream id, {field, value, ...}}, ...}.
-- #include tl_lib.lua
local ams, aseq, lim = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
local list = redis.call('LRANGE', KEYS[1], 0, -1)
local h = redis.call('HMGET', KEYS[3], 'tl', 'tl1')
local ids = tl_merge(h[1], h[2], list)
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
local fms, fsq = math.huge, 0
if #first > 0 then
  fms, fsq = tl_split(first[1][1])
end
-- an id older than the stream's first entry: its event was trimmed (all of them come first)
local function older(ms, sq)
  return ms < fms or (ms == fms and sq < fsq)
end
local function stale(sid)
  return older(tl_split(sid))
end
local nstale = 0
for _, sid in ipairs(ids) do
  local ms, sq = tl_split(sid)
  if older(ms, sq) then
    nstale = nstale + 1
  elseif ams == nil or ms > ams or (ms == ams and sq > aseq) then
    local e = redis.call('XRANGE', KEYS[2], sid, sid)
    if #e > 0 then
      out[#out + 1] = e[1]
      if #out >= lim then
        break
      end
    end
  end
end
if nstale > 0 then
  -- the list: its stale ids are a prefix of it; the fields: rewritten without theirs
  local cut = 0
  while cut < #list and stale(list[cut + 1]) do
    cut = cut + 1
  end
  if cut > 0 and cut == #list then
    redis.call('DEL', KEYS[1])
  elseif cut > 0 then
    redis.call('LTRIM', KEYS[1], cut, -1)
  end
  if h[2] and stale(h[2]) then
    redis.call('HDEL', KEYS[3], 'tl1')
  end
  if h[1] then
    local keep = {}
    for _, sid in ipairs(tl_ids(h[1])) do
      if not stale(sid) then
        keep[#keep + 1] = sid
      end
    end
    if #keep == 0 then
      redis.call('HDEL', KEYS[3], 'tl')
    else
      redis.call('HSET', KEYS[3], 'tl', tl_enc(keep))
    end
  end
end
return out
