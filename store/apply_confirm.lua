-- apply_confirm.lua - the upstream repeated the stored state of a request (an observation the
-- lifecycle found a duplicate, store/apply.c): note when, in the hash's "cf" (ms the upstream
-- last confirmed the stored state; apply.lua sets it on every applied observation). Only a
-- request with a record: nothing is created for an id that has none (or lost it meanwhile).
-- KEYS: 1 req hash. ARGV: 1 now ms
-- Returns 1 when noted, 0 when the request has no record.
if redis.call('HEXISTS', KEYS[1], 'rec') == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'cf', ARGV[1])
return 1
