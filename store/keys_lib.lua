-- keys_lib.lua - key checks shared by scripts that test many keys at once (wh_held.lua,
-- wh_fanout.lua). relay/common/embed.pl pastes this file where a script has the line
-- "-- #include keys_lib.lua"; it needs nothing defined before it.

-- Whether any of the keys ks exists: one EXISTS per 1000 keys (unpack's limit stays far),
-- stopping at the first chunk that has one.
local function any_exists(ks)
  for s = 1, #ks, 1000 do
    if redis.call('EXISTS', unpack(ks, s, math.min(s + 999, #ks))) > 0 then
      return true
    end
  end
  return false
end
