-- wh_claim.lua - claim due webhook deliveries with a lease, fairly across endpoints and
-- within each endpoint's free concurrency.
-- KEYS: 1 due (endpoints by earliest due time), 2 inflight, 3 endpoints version
-- ARGV: 1 tag, 2 now ms, 3 lease ms, 4 max deliveries, 5 default free slots per endpoint,
--       6 retention ms, then pairs (endpoint id, free slots) for endpoints below the default;
--       free slots "<n>r" mark a rate-limited endpoint (store/ratelimit.h): its due
--       deliveries left after this claim are counted in the reply
-- Returns {endpoints version, {endpoint id, due deliveries left, ...} of the rate-limited
-- endpoints with due deliveries left, then per delivery 7 items: delivery id, endpoint id, event id,
-- attempt number (1-based), replay "1"|"0", kind ("b" body follows | "=" the body is that of
-- the delivery whose 0-based index in this reply follows | "r" the event record follows: the
-- body key expired | "x" nothing: the event is gone), body/index/record/""}.
-- Deliveries of a deleted endpoint are dropped; those of a disabled endpoint are recorded
-- as skipped (replayable once it is enabled again).
-- ARGV[1] is the partition's tag, or "<partition tag> <deployment tag> <endpoint view>" in a
-- deployment with several partitions (docs/partitions.md; the view: wh_lib.lua)
local tag, dtag, vs = string.match(ARGV[1], '^(%S+) (%S+) ?(.*)$')
if not tag then
  tag, dtag, vs = ARGV[1], ARGV[1], ''
end
local now = tonumber(ARGV[2])
local ttl = ARGV[6]
local lease = tonumber(ARGV[3])
local max = tonumber(ARGV[4])
local def = tonumber(ARGV[5])
-- (several partitions: KEYS[3] is not read; "*" = the caller checks the version itself)
local due = {}
local out = {dtag ~= tag and '*' or (redis.call('GET', KEYS[3]) or '0'), due}
local lim = {}
local rl = {}
for i = 7, #ARGV, 2 do
  local f, r = string.match(ARGV[i + 1], '^(%-?%d+)(r?)$')
  lim[ARGV[i]] = tonumber(f)
  rl[ARGV[i]] = r == 'r'
end

-- #include wh_lib.lua
-- #include dl_lib.lua

local total = 0
local leased = {}
local bodies = {}
local whs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 2000)
for _, wh in ipairs(whs) do
  if total >= max then
    break
  end
  local dq = tag .. ':dq:' .. wh
  local en = wh_enabled(wh)
  if not en and view then
    -- not in the caller's copy (created since its last reload, or deleted: the retention
    -- sweep purges a deleted endpoint's queue): left for a claim that knows it; an entry
    -- whose queue is gone (purged) leaves the due set
    if redis.call('EXISTS', dq) == 0 then
      redis.call('ZREM', KEYS[1], wh)
    end
  elseif not en then
    -- everything of each delivery goes with its record (dl_delete: its order set too), at
    -- most 500 a claim: the rest on the next ones
    local ids = redis.call('ZRANGE', dq, 0, 499)
    for _, did in ipairs(ids) do
      dl_delete(wh, did)
      redis.call('ZREM', tag .. ':dls:' .. wh, did)
      redis.call('HDEL', tag .. ':dlh:' .. wh, did)
    end
    if #ids > 0 then
      redis.call('ZREM', dq, unpack(ids))
    end
    fix_due(KEYS[1], wh)
  elseif en ~= '1' then
    local ids = redis.call('ZRANGE', dq, 0, 199)
    for _, did in ipairs(ids) do
      local dl = tag .. ':dl:' .. did
      redis.call('ZREM', dq, did)
      redis.call('HSET', dl, 'state', 'skipped', 'done', now)
      redis.call('HDEL', dl, 'q', 'next')
      redis.call('ZADD', tag .. ':skipped', now, did)
      local rid = redis.call('HGET', dl, 'rid')
      if rid then
        local ok = tag .. ':order:' .. wh .. ':' .. rid
        redis.call('ZREM', ok, did)
        ensure_active(ok, wh)
      end
    end
    fix_due(KEYS[1], wh)
  else
    local n = math.min(lim[wh] or def, max - total)
    if n > 0 then
      local ids = redis.call('ZRANGEBYSCORE', dq, '-inf', now, 'LIMIT', 0, n)
      if #ids > 0 then
        redis.call('ZREM', dq, unpack(ids))
      end
      for _, did in ipairs(ids) do
        local dl = tag .. ':dl:' .. did
        local h = redis.call('HMGET', dl, 'ev', 'rp', 'sid', 'state')
        if h[1] and h[4] == 'pending' then
          local att = redis.call('HINCRBY', dl, 'att', 1)
          leased[#leased + 1] = now + lease
          leased[#leased + 1] = did
          local body
          local kind = 'b'
          if bodies[h[1]] then
            kind, body = '=', bodies[h[1]]
          else
            body = redis.call('GET', tag .. ':body:' .. h[1])
            if body then
              bodies[h[1]] = tostring(total)
            end
          end
          if not body then
            kind, body = 'x', ''
            local e = redis.call('XRANGE', tag .. ':events', h[3], h[3])
            if #e > 0 then
              local f = e[1][2]
              for k = 1, #f, 2 do
                if f[k] == 'rec' then
                  kind, body = 'r', f[k + 1]
                end
              end
            end
          end
          out[#out + 1] = did
          out[#out + 1] = wh
          out[#out + 1] = h[1]
          out[#out + 1] = att
          out[#out + 1] = h[2] or '0'
          out[#out + 1] = kind
          out[#out + 1] = body
          total = total + 1
        end
      end
      fix_due(KEYS[1], wh)
    end
    if rl[wh] then
      local left = redis.call('ZCOUNT', dq, '-inf', now)
      if left > 0 then
        due[#due + 1] = wh
        due[#due + 1] = left
      end
    end
  end
end
if #leased > 0 then
  redis.call('ZADD', KEYS[2], unpack(leased))
end
return out
