-- apply.lua - the atomic apply step (compare-and-set on the request's seq).
-- protocol/lifecycle.c decided that the observation is a new event with seq = expected + 1;
-- this script writes it only if nobody else wrote an event for the request meanwhile.
-- KEYS: 1 req hash, 2 events stream, 3 all zset, 4 new status zset, 5 old status zset,
--       6 timeline list, 7 poll zset
-- ARGV: 1 expected seq (0 = unknown request), 2 new seq, 3 record JSON, 4 status,
--       5 event id, 6 request id, 7 stream maxlen, 8 now ms, 9 next poll ms ("" = stop
--       polling), 10 source, 11 timeline cap, 12 "1" = start tracking an untracked request
-- Returns {1, stream id} when applied, {0, current record or false} on a seq conflict.
local h = redis.call('HMGET', KEYS[1], 'seq', 'first', 'trk')
if tonumber(h[1] or '0') ~= tonumber(ARGV[1]) then
  return {0, redis.call('HGET', KEYS[1], 'rec') or false}
end
local first, trk = h[2], h[3]
local fields = {'seq', ARGV[2], 'rec', ARGV[3], 'status', ARGV[4], 'src', ARGV[10]}
if not first then
  first = ARGV[8]
  fields[#fields + 1] = 'first'
  fields[#fields + 1] = first
  redis.call('ZADD', KEYS[3], first, ARGV[6])
end
if not trk and ARGV[12] == '1' then
  trk = '1'
  fields[#fields + 1] = 'trk'
  fields[#fields + 1] = '1'
end
redis.call('HSET', KEYS[1], unpack(fields))
if KEYS[5] ~= KEYS[4] then
  redis.call('ZREM', KEYS[5], ARGV[6])
end
redis.call('ZADD', KEYS[4], first, ARGV[6])
local sid = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], '*',
                       'id', ARGV[5], 'rid', ARGV[6], 'seq', ARGV[2], 'rec', ARGV[3])
if redis.call('RPUSH', KEYS[6], sid) > tonumber(ARGV[11]) then
  redis.call('LTRIM', KEYS[6], -tonumber(ARGV[11]), -1)
end
if trk == '1' then
  if ARGV[9] == '' then
    redis.call('ZREM', KEYS[7], ARGV[6])
  else
    redis.call('ZADD', KEYS[7], ARGV[9], ARGV[6])
  end
end
return {1, sid}
