-- facts_at.lua - the facts version each event carries (store/facts.h store_facts_at; the
-- versions are described in facts_put.lua): for an event of seq s, the newest fx when its
-- fxs <= s (or fxs is absent: a value written before versions), else the older version
-- fx<o> with the largest o <= s in fxo, else none. An older version is a delta against the
-- next newer one ('d'), so it comes with every newer value up to fx, newest last: the caller
-- decodes from fx back. One HMGET per request, one HGET per older value used.
-- KEYS: request hashes {P}:req:<id> (one partition)
-- ARGV: pairs (index into KEYS, seq)
-- Returns one entry per pair: false (no facts for that event), or the values of the version
-- and of every newer one, oldest first ({fx} for the newest).
-- #include chunk_lib.lua
local memo, out = {}, {}
for i = 1, #ARGV, 2 do
  local k, s = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  local m = memo[k]
  if not m then
    local h = chunks.hmget(KEYS[k], {'fx', 'fxs', 'fxo'})
    m = {fx = h[1], fxs = tonumber(h[2]) or 0, old = {}, got = {}}
    for o in string.gmatch(h[3] or '', '%d+') do
      m.old[#m.old + 1] = o
    end
    memo[k] = m
  end
  local v = false
  if m.fx and m.fxs <= s then
    v = {m.fx}
  elseif m.fx then
    local best
    for j = 1, #m.old do
      if tonumber(m.old[j]) <= s then
        best = j
      end
    end
    if best then
      v = {}
      for j = best, #m.old do
        local o = m.old[j]
        if m.got[o] == nil then
          m.got[o] = chunks.get(KEYS[k], 'fx' .. o) or false
        end
        if not m.got[o] then
          v = false -- a version missing from the chain: none
          break
        end
        v[#v + 1] = m.got[o]
      end
      if v then
        v[#v + 1] = m.fx
      end
    end
  end
  out[#out + 1] = v
end
return out
