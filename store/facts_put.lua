-- facts_put.lua - store a request's facts (store/facts.h) if nobody changed them meanwhile:
-- a compare-and-set on the newest version, the field fx of {P}:req:<id>. The facts live in the
-- request's hash, so the retention sweep (req_gc.lua) deletes them with the request; a
-- request without a hash (never applied, or swept) gets none: no key outside the sweep's
-- reach is created.
-- Versions (docs/facts.md "Facts in event bodies"): fx is the newest, carried by the events
-- from seq fxs on (fxs absent: a value written before versions, carried by every event);
-- older versions still carried by some event are fx<seq> fields, their seqs in fxo
-- ("3,5", ascending). The new value is the version of seq cur + 1 (the next event; cur is
-- the hash's seq): it replaces a version no event carries yet, else the old newest moves to
-- fx<fxs>. At most 4 versions: the oldest is dropped first. A version never changes once an
-- event of its seq exists, so every attempt and replay of an event renders the same facts.
-- The follow-up event: when the request has events and none followed up the current status
-- change yet (fxf = the hash's chg, the time of that change, once claimed), the claim is
-- taken here and the stored record returned: the caller appends one event of the same
-- status flagged "facts" (seq cur + 1, carrying this version) through the apply step.
-- Older versions are stored as deltas ('d': compressed with the text of the next newer
-- version as the dictionary, store/facts.h): the old newest is kept in its delta form against
-- the new text (ARGV[3]); when it is replaced instead, the newest older version, a delta
-- against it, is written again against the new text (ARGV[4], prepared from facts_get.lua).
-- KEYS: 1 {P}:req:<id>
-- ARGV: 1 the value read before ("" = the request had no facts), 2 the new value, 3 the value
-- read before as a delta against the new text ("" = none: kept as it is), 4 the newest older
-- version written again against the new text ("" = none), 5 its seq, 6 the status of the
-- observation these facts came with, applied right after ("" = none): while the stored status
-- differs, that observation's event carries this version and no follow-up is claimed
-- Returns {1, record or false (false: no follow-up)} written, {0} the stored value is no
-- longer ARGV[1] (read, merge and try again), {-1} the request has no hash.
-- #include chunk_lib.lua
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {-1}
end
local h = chunks.hmget(KEYS[1],
                      {'fx', 'fxs', 'fxo', 'seq', 'chg', 'fxf', 'status', 'ck'})
local cur = h[1]
if (cur or '') ~= ARGV[1] then
  return {0}
end
-- a hash the record pass packed (an ended watch): whole values again before the writes
chunks.unpack(KEYS[1], h[8])
local seq = tonumber(h[4]) or 0
local n = seq + 1
local fxs = tonumber(h[2]) or 0
if cur and seq >= 1 and fxs <= seq then -- an event carries the old newest: keep it
  local old = {}
  for s in string.gmatch(h[3] or '', '%d+') do
    old[#old + 1] = s
  end
  old[#old + 1] = tostring(fxs)
  redis.call('HSET', KEYS[1], 'fx' .. fxs, ARGV[3] ~= '' and ARGV[3] or cur)
  while #old > 3 do
    redis.call('HDEL', KEYS[1], 'fx' .. table.remove(old, 1))
  end
  redis.call('HSET', KEYS[1], 'fxo', table.concat(old, ','))
elseif cur and h[3] then -- replaced: the newest older version may be a delta against it
  local last = string.match(h[3], '(%d+)$')
  local lv = last and redis.call('HGET', KEYS[1], 'fx' .. last)
  if lv and string.sub(lv, 1, 1) == 'd' then
    if ARGV[5] ~= last or ARGV[4] == '' then
      return {0} -- not prepared: read again (store_facts_get says what to prepare)
    end
    redis.call('HSET', KEYS[1], 'fx' .. last, ARGV[4])
  end
end
redis.call('HSET', KEYS[1], 'fx', ARGV[2], 'fxs', n)
if seq < 1 or not h[5] or h[5] == h[6] or (ARGV[6] ~= '' and ARGV[6] ~= h[7]) then
  return {1, false}
end
redis.call('HSET', KEYS[1], 'fxf', h[5])
return {1, chunks.get(KEYS[1], 'rec') or false}
