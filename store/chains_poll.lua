-- chains_poll.lua - one process's periodic look at the cached upstream chain list: is a
-- refresh due (and is it this process's to do), and has the list changed since it last looked?
-- KEYS: 1 chain list hash (body, at), 2 refresh lease (string, PX)
-- ARGV: 1 now ms, 2 refresh period ms, 3 lease ms, 4 holder (instance id), 5 the `at` this
--       process last saw ("" = none)
-- Returns {fetch, at, body?}: fetch = 1 when the list is missing or older than the period and
-- this call took the lease (so one process at a time calls the upstream); at = the cached
-- list's fetch time ("" when none); body only when at differs from ARGV[5].
local now = tonumber(ARGV[1])
local at = redis.call('HGET', KEYS[1], 'at')
local fetch = 0
if (not at or now - tonumber(at) >= tonumber(ARGV[2])) and
    redis.call('SET', KEYS[2], ARGV[4], 'NX', 'PX', ARGV[3]) then
  fetch = 1
end
if at and at ~= ARGV[5] then
  return {fetch, at, redis.call('HGET', KEYS[1], 'body')}
end
return {fetch, at or ''}
