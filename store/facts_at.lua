-- facts_at.lua - the facts version each event carries (store/facts.h store_facts_at; the
-- versions are described in facts_put.lua): for an event of seq s, the newest fx when its
-- fxs <= s (or fxs is absent: a value written before versions), else the older version
-- fx<o> with the largest o <= s in fxo, else none. One HMGET per request, one HGET more per
-- older version asked for.
-- KEYS: request hashes {P}:req:<id> (one partition)
-- ARGV: pairs (index into KEYS, seq)
-- Returns one value per pair: the stored value, or false (no facts for that event).
local memo, out = {}, {}
for i = 1, #ARGV, 2 do
  local k, s = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  local m = memo[k]
  if not m then
    local h = redis.call('HMGET', KEYS[k], 'fx', 'fxs', 'fxo')
    m = {fx = h[1], fxs = tonumber(h[2]) or 0, fxo = h[3], got = {}}
    memo[k] = m
  end
  local v = false
  if m.fx and m.fxs <= s then
    v = m.fx
  elseif m.fxo then
    local best
    for o in string.gmatch(m.fxo, '%d+') do
      if tonumber(o) <= s then
        best = o
      end
    end
    if best then
      if m.got[best] == nil then
        m.got[best] = redis.call('HGET', KEYS[k], 'fx' .. best) or false
      end
      v = m.got[best]
    end
  end
  out[#out + 1] = v
end
return out
