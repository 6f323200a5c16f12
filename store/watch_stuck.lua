-- watch_stuck.lua - request.stuck events: a request becomes stuck when it stays active (not
-- waiting, not settled) without a status change for STATUSRELAY_STUCK_AFTER (the "act" index,
-- watch_lib.lua; the same rule as GET /v1/requests?stuck=true and watch_stats.lua). Each
-- stuck episode (one last status change) is said once: the request's hash keeps "stk" = the
-- change time it was reported for, and a cursor ({P}:stkc, the cutoff reached) lets each run
-- read only the requests that became stuck since the last run, whichever process ran it
-- (watch_lib.lua moves the cursor back when a request enters the index with an older change:
-- watched again after its watch ended).
-- Any process may run it at any time.
-- KEYS: 1 act zset. ARGV: 1 now ms, 2 stuck cutoff ms (changed before it = stuck), 3 at most
--       this many requests, 4 key tag "{P}", 5 event stream MAXLEN.
-- Returns the number of request.stuck events written.
local tag, now = ARGV[4], tonumber(ARGV[1])
local wcfg = {wttl = 0, settled = 0, ftail = 0}
-- #include watch_lib.lua
local ck = tag .. ':stkc'
local from = redis.call('GET', ck) or '-inf'
local max = tonumber(ARGV[3])
local got = redis.call('ZRANGEBYSCORE', KEYS[1], from, '(' .. ARGV[2], 'WITHSCORES', 'LIMIT', 0,
                       max)
local n, last = 0, nil
for i = 1, #got, 2 do
  local id, chg = got[i], got[i + 1]
  local k = tag .. ':req:' .. id
  if redis.call('HGET', k, 'stk') ~= chg then
    redis.call('HSET', k, 'stk', chg)
    if watch_event(id, k, 'request.stuck', ',"stuckSince":' .. chg, ARGV[5]) then
      n = n + 1
    end
  end
  last = chg
end
-- a full batch: go on from its last score (inclusive: "stk" skips what was said); else the
-- cutoff is reached
redis.call('SET', ck, (#got / 2 >= max and last) and last or ARGV[2])
return n
