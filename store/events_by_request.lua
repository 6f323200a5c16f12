-- events_by_request.lua - a request's events from the event stream, oldest first, strictly
-- after a stream id (read only). The timeline list holds the stream ids of the request's
-- events in append order; ids whose entry was trimmed from the stream are skipped.
-- KEYS: 1 timeline list {P}:tl:<id>, 2 event stream {P}:events
-- ARGV: 1 after: ms part of a stream id ("" = from the start), 2 after: sequence part,
--       3 maximum entries
-- Returns entries in XRANGE form: {{stream id, {field, value, ...}}, ...}.
local ams, aseq, lim = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {}
for _, sid in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local dash = string.find(sid, '-', 1, true)
  local ms, sq = tonumber(string.sub(sid, 1, dash - 1)), tonumber(string.sub(sid, dash + 1))
  if ams == nil or ms > ams or (ms == ams and sq > aseq) then
    local e = redis.call('XRANGE', KEYS[2], sid, sid)
    if #e > 0 then
      out[#out + 1] = e[1]
      if #out >= lim then
        break
      end
    end
  end
end
return out
