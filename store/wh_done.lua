-- wh_done.lua - record the outcome of a batch of delivery attempts.
-- KEYS: 1 due, 2 inflight, 3 endpoints version, 4 dead
-- ARGV: 1 tag, 2 now ms, 3 disable after ms (continuous failure), 4 retention ms, then per
--       attempt 5 items: delivery id, endpoint id, outcome ("ok" | "retry" | "dead" | "gone" |
--       "local"), attempt JSON, next attempt ms (retry, local)
-- "local" is not an attempt (a local resource ran out before anything was sent): the claim's
-- attempt count is given back, nothing is logged, the endpoint's health is not touched, and
-- the delivery is queued again for the given time.
-- An outcome for a delivery whose lease this process lost (the reaper gave it back, another
-- process has it) is still logged; "ok" still finishes it, "retry" leaves it to the new
-- holder. Returns a flat list of (endpoint id, reason) pairs of endpoints disabled now.
-- ARGV[1] is the partition's tag, or "<partition tag> <deployment tag> <endpoint view>" in a
-- deployment with several partitions (docs/partitions.md; the view: wh_lib.lua)
local tag, dtag, vs = string.match(ARGV[1], '^(%S+) (%S+) ?(.*)$')
if not tag then
  tag, dtag, vs = ARGV[1], ARGV[1], ''
end
local now = tonumber(ARGV[2])
local disable_after = tonumber(ARGV[3])
local ttl = ARGV[4]
local disabled = {}
local healthy = {}

-- #include wh_lib.lua

-- the delivery left its order set: queue the next one
local function finish(did, wh, rid, held)
  local ok = tag .. ':order:' .. wh .. ':' .. rid
  redis.call('ZREM', ok, did)
  if not held then
    redis.call('ZREM', tag .. ':dq:' .. wh, did)
    touched[wh] = true
  end
  ensure_active(ok, wh)
end

for i = 5, #ARGV, 5 do
  local did, wh, outcome, att, nx = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local dl = tag .. ':dl:' .. did
  local h = redis.call('HMGET', dl, 'state', 'rid', 'nlog')
  if h[1] then
    local held = redis.call('ZREM', KEYS[2], did) == 1
    local n = (tonumber(h[3]) or 0) + 1
    if outcome == 'local' then
      -- not held: the reaper gave it back (and its attempt count) already
      if held and h[1] == 'pending' then
        redis.call('HINCRBY', dl, 'att', -1)
        redis.call('HSET', dl, 'next', nx, 'q', '1')
        redis.call('ZADD', tag .. ':dq:' .. wh, nx, did)
        touched[wh] = true
      end
    elseif outcome == 'ok' then
      if h[1] == 'pending' then
        -- q "0" rather than deleted: one write (readers test q == "1"; next is only shown
        -- while pending)
        redis.call('HSET', dl, 'a' .. n, att, 'nlog', n, 'state', 'delivered', 'done', now,
                   'q', '0')
        redis.call('PEXPIRE', dl, ttl)
        finish(did, wh, h[2], held)
      else
        redis.call('HSET', dl, 'a' .. n, att, 'nlog', n)
      end
      healthy[wh] = true
    else
      redis.call('HSET', dl, 'a' .. n, att, 'nlog', n)
    end
    if outcome ~= 'ok' and outcome ~= 'local' and h[1] == 'pending' then
      note_outcome(wh, outcome, KEYS[3], disable_after, disabled)
      if outcome == 'retry' then
        if held then
          redis.call('HSET', dl, 'next', nx, 'q', '1')
          redis.call('ZADD', tag .. ':dq:' .. wh, nx, did)
          touched[wh] = true
        end
      else
        redis.call('HSET', dl, 'state', 'dead', 'done', now)
        redis.call('HDEL', dl, 'q', 'next')
        redis.call('ZADD', KEYS[4], now, did)
        finish(did, wh, h[2], held)
      end
    end
  end
end
for wh in pairs(healthy) do
  note_healthy(wh)
end
fix_touched(KEYS[1])
if view then
  return health
end
return disabled
