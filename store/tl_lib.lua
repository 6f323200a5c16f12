-- tl_lib.lua - a request's timeline while it is short: the stream ids of its events in one
-- field of its hash, "tl" (issue 24, Redis memory per request: no key of its own). Pasted by
-- relay/common/embed.pl where a script has the line "-- #include tl_lib.lua" (watch_lib.lua,
-- which apply.lua and the watch scripts include; events_by_request.lua, req_gc.lua); it needs
-- nothing defined before it. store/history.c decodes the field the same way (tl_decode).
--
-- The field: the ids in order, separated by ","; the first as the stream id itself
-- ("<ms>-<seq>", decimal: a request's first event writes it as it comes, as 0d1e783 wrote
-- "tl1"), every later one as "<d>" or "<d>-<seq>" in hexadecimal (lower case), d its ms less
-- the first id's ms, seq left out when 0. Stream id 1764197395123-0, then one 40 s later,
-- one a day after the first and one more in that ms: "1764197395123-0,9c40,5265c00,5265c00-1".
-- The field stays at most TL_FIELD_MAX (64) bytes, so that it never pushes a hash out of its
-- listpack encoding where hash-max-listpack-value >= 64 (docs/operations.md "Redis memory"):
-- 6 events a day apart fit, 9 forty seconds apart, 11 four seconds apart, 22 at most. The event after that moves the ids
-- into the list {P}:tl:<id> (tl_push, watch_lib.lua), as every event did before: a request
-- has its field or its list. Appending reads the first id only, and encoding and decoding use
-- only string.format, string.match and tonumber (C in Lua): the write path stays cheap
-- (BENCHMARKS.md "Timeline in the request hash").
-- Older layouts stay readable (tl_merge): the field "tl1" (0d1e783: the one stream id of a
-- request with one event) and a list written by any older version; during a rolling
-- upgrade an older process may add "tl1" or a list next to a "tl" field (it does not know
-- it), so a reader takes the ids of all three, in stream order.
local TL_FIELD_MAX = 64

-- a stream id "ms-seq" as two numbers (nil for text that is not one)
local function tl_split(sid)
  local ms, sq = string.match(sid, '^(%d+)%-(%d+)$')
  return tonumber(ms), tonumber(sq)
end

-- f (a "tl" field) with stream id sid appended (sid comes after every id of f: the newest of
-- the stream), or false when it would be longer than TL_FIELD_MAX (or f is not one of ours).
local function tl_append(f, sid)
  local first = tonumber(string.match(f, '^(%d+)%-'))
  local ms, sq = tl_split(sid)
  if not first or ms < first then
    return false
  end
  local e = sq ~= 0 and string.format('%s,%x-%x', f, ms - first, sq) or
            string.format('%s,%x', f, ms - first)
  return #e <= TL_FIELD_MAX and e
end

-- The stream ids ("ms-seq") a "tl" field holds, in order; a malformed entry ends the list.
local function tl_ids(f)
  local first = string.match(f, '^%d+%-%d+')
  if not first then
    return {}
  end
  local out, ms = {first}, tl_split(first)
  for d, q in string.gmatch(string.sub(f, #first + 1), ',(%x+)%-?(%x*)') do
    out[#out + 1] = string.format('%d-%d', ms + tonumber(d, 16), q == '' and 0 or tonumber(q, 16))
  end
  return out
end

-- The "tl" field of the stream ids ids (in stream order), or false when it would be longer
-- than TL_FIELD_MAX.
local function tl_enc(ids)
  local f = ids[1]
  for i = 2, #ids do
    f = tl_append(f, ids[i])
    if not f then
      return false
    end
  end
  return f
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
