-- tl_lib.lua - a request's timeline while it is short: the stream ids of its events in one
-- field of its hash, "tl" (issue 24, Redis memory per request: no key of its own). Pasted by
-- relay/common/embed.pl where a script has the line "-- #include tl_lib.lua" (watch_lib.lua,
-- which apply.lua and the watch scripts include; events_by_request.lua, req_gc.lua); it needs
-- nothing defined before it. store/history.c decodes the field the same way (tl_decode).
--
-- The field: the ids in order, separated by ","; each is "<ms>" or "<ms>-<seq>" (seq left
-- out when 0), both in base 36 (digits, then a-z), the first one's ms absolute and every
-- later one's ms the difference to the one before it. A stream id 1764197395123-0 is
-- "miglku5v"; a second event 40 s later adds ",uv4", one a day after that ",1ffuo0", a
-- fourth in the same ms ",0-1". The field stays at most TL_FIELD_MAX (64) bytes, so that it
-- never pushes a hash out of its listpack encoding where hash-max-listpack-value >= 64
-- (docs/operations.md "Redis memory"): 9 events a day apart, 15 seconds apart. The event
-- after that moves the ids into the list {P}:tl:<id> (tl_push,
-- watch_lib.lua), as every event did before: a request has its field or its list.
-- Older layouts stay readable (tl_merge): the field "tl1" (0d1e783: the one stream id of a
-- request with one event, decimal) and a list written by any older version; during a rolling
-- upgrade an older process may add "tl1" or a list next to a "tl" field (it does not know
-- it), so a reader takes the ids of all three, in stream order.
local TL_FIELD_MAX = 64
local TL_DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz'

-- n (an integer >= 0) in base 36
local function tl_b36(n)
  if n == 0 then
    return '0'
  end
  local s = ''
  while n > 0 do
    local d = n % 36
    s = string.sub(TL_DIGITS, d + 1, d + 1) .. s
    n = (n - d) / 36
  end
  return s
end

-- a stream id "ms-seq" as two numbers (nil for text that is not one)
local function tl_split(sid)
  local ms, sq = string.match(sid, '^(%d+)%-(%d+)$')
  return tonumber(ms), tonumber(sq)
end

-- The stream ids ("ms-seq") a "tl" field holds, in order; a malformed entry ends the list.
local function tl_ids(f)
  local out, ms = {}, 0
  for e in string.gmatch(f, '[^,]+') do
    local d, q = string.match(e, '^(%w+)%-?(%w*)$')
    local dn = d and tonumber(d, 36)
    if not dn then
      break
    end
    ms = ms + dn
    out[#out + 1] = string.format('%d-%d', ms, q == '' and 0 or (tonumber(q, 36) or 0))
  end
  return out
end

-- The "tl" field of the stream ids ids (in stream order), or false when it would be longer
-- than TL_FIELD_MAX.
local function tl_enc(ids)
  local parts, prev = {}, 0
  for i, sid in ipairs(ids) do
    local ms, sq = tl_split(sid)
    local e = tl_b36(ms - prev)
    if sq ~= 0 then
      e = e .. '-' .. tl_b36(sq)
    end
    parts[i] = e
    prev = ms
  end
  local f = table.concat(parts, ',')
  return #f <= TL_FIELD_MAX and f
end

-- f (a "tl" field) with stream id sid appended (sid comes after every id of f: the newest of
-- the stream), or false when it would be longer than TL_FIELD_MAX (or f is not one of ours).
-- Only the ms parts of f are read: the common write costs no decode of the ids.
local function tl_append(f, sid)
  local last = 0
  for d in string.gmatch(f, '(%w+)[^,]*') do
    last = last + tonumber(d, 36)
  end
  local ms, sq = tl_split(sid)
  if ms < last then
    return false
  end
  local e = f .. ',' .. tl_b36(ms - last)
  if sq ~= 0 then
    e = e .. '-' .. tl_b36(sq)
  end
  return #e <= TL_FIELD_MAX and e
end

-- a sorts before b (stream ids)
local function tl_before(a, b)
  local am, aq = tl_split(a)
  local bm, bq = tl_split(b)
  return am < bm or (am == bm and aq < bq)
end

-- ids (stream ids, any order, repeats allowed) in stream order without repeats
local function tl_sort(ids)
  table.sort(ids, tl_before)
  local out = {}
  for _, sid in ipairs(ids) do
    if sid ~= out[#out] then
      out[#out + 1] = sid
    end
  end
  return out
end

-- The stream ids of a timeline kept in up to three places (any may be nil or empty): the
-- hash's "tl" field f, its "tl1" one and the list's ids list; one place is returned as it
-- is (each is in order), several are merged into stream order without repeats.
local function tl_merge(f, one, list)
  local ids = f and tl_ids(f) or {}
  if not one and (not list or #list == 0) then
    return ids
  end
  if #ids == 0 and not one then
    return list
  end
  if one then
    ids[#ids + 1] = one
  end
  for _, sid in ipairs(list or {}) do
    ids[#ids + 1] = sid
  end
  return tl_sort(ids)
end
