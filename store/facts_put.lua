-- facts_put.lua - store a request's facts (store/facts.h) if nobody changed them meanwhile:
-- a compare-and-set on the field fx of {P}:req:<id>. The facts live in the request's hash, so
-- the retention sweep (req_gc.lua) deletes them with the request; a request without a hash
-- (never applied, or swept) gets none: no key outside the sweep's reach is created.
-- KEYS: 1 {P}:req:<id>
-- ARGV: 1 the value read before ("" = the request had no facts), 2 the new value
-- Returns 1 written, 0 the stored value is no longer ARGV[1] (read, merge and try again),
-- -1 the request has no hash.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local cur = redis.call('HGET', KEYS[1], 'fx')
if (cur or '') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'fx', ARGV[2])
return 1
