-- facts_get.lua - a request's stored facts for a merge (store/facts.h store_facts_get): the
-- newest version fx, what the next write does with it (facts_put.lua: replaced when no event
-- carries it yet, fxs > seq), and the newest older version (fx<last of fxo>), whose 'd' form
-- is compressed against fx's text and must be written again against the new text when fx is
-- replaced.
-- KEYS: 1 {P}:req:<id>
-- Returns {fx or false, 1 when the next write replaces fx else 0, last older seq or false,
-- its value or false}.
-- #include chunk_lib.lua
local h = chunks.hmget(KEYS[1], {'fx', 'fxs', 'fxo', 'seq'})
local seq, fxs = tonumber(h[4]) or 0, tonumber(h[2]) or 0
local replaces = 0
if h[1] and not (seq >= 1 and fxs <= seq) then
  replaces = 1
end
local last = h[3] and string.match(h[3], '(%d+)$')
local lv = false
if last then
  lv = chunks.get(KEYS[1], 'fx' .. last) or false
end
return {h[1] or false, replaces, last or false, lv}
