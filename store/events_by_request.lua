-- events_by_request.lua - a request's events from the event stream, oldest first, strictly
-- after a stream id. The timeline list holds the stream ids of the request's events in
-- append order; ids whose entry was trimmed from the stream (by count in apply.lua, by age
-- in wh_gc.lua) are skipped, and the leading ones older than the stream's first entry are
-- cut from the list (the only write: the index repairs itself as it is read; a timeline of
-- a request whose events are all gone is deleted). A request with one event has no list: its
-- stream id is the hash's "tl1" (tl_push, store/watch_lib.lua), dropped the same way.
-- KEYS: 1 timeline list {P}:tl:<id>, 2 event stream {P}:events, 3 request hash {P}:req:<id>
-- ARGV: 1 after: ms part of a stream id ("" = from the start), 2 after: sequence part,
--       3 maximum entries
-- Returns entries in XRANGE form: {{stream id, {field, value, ...}}, ...}.
local ams, aseq, lim = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
local function split(sid)
  local dash = string.find(sid, '-', 1, true)
  return tonumber(string.sub(sid, 1, dash - 1)), tonumber(string.sub(sid, dash + 1))
end
local ids = redis.call('LRANGE', KEYS[1], 0, -1)
local one = redis.call('HGET', KEYS[3], 'tl1')
local both = false
if one and #ids > 0 then
  -- both: an older version (no tl1) wrote the second event into a new list; tl1 is the first
  table.insert(ids, 1, one)
  one, both = false, true
elseif #ids == 0 then
  ids = {one or nil}
end
local first = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
local fms, fsq = math.huge, 0
if #first > 0 then
  fms, fsq = split(first[1][1])
end
local stale = 0
for _, sid in ipairs(ids) do
  local ms, sq = split(sid)
  if ms < fms or (ms == fms and sq < fsq) then
    stale = stale + 1
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
if stale > 0 then
  if one or both then
    redis.call('HDEL', KEYS[3], 'tl1')
  end
  if not one then
    local n = both and stale - 1 or stale
    if n > 0 then
      redis.call('LTRIM', KEYS[1], n, -1)
    end
  end
end
return out
