-- wh_lib.lua - the delivery-queue steps shared by wh_fanout.lua, wh_claim.lua and
-- wh_done.lua. relay/common/embed.pl pastes this file where a script has the line
-- "-- #include wh_lib.lua"; the script defines the locals tag (key prefix: the partition's
-- tag), dtag (the deployment's tag: endpoint hashes; the same as tag with one partition), now
-- (ms) and ttl (retention ms of finished deliveries) before that line.
-- Invariant kept here: of the unfinished deliveries of one request to one endpoint (the
-- order set {P}:order:<wh>:<rid>, by seq), exactly one is queued at a time (q = "1": in the
-- endpoint's queue {P}:dq:<wh> or in flight).
local touched = {} -- endpoints whose queue head may have moved: fix_touched() at the end
-- store/wh_health.lua (several partitions) sets this to its outbox key: an endpoint.disabled
-- record is queued there ("<webhook id> <record>") instead of written to a stream
local disabled_outbox = false
local modes = {}

-- With several partitions (dtag ~= tag) a script touches its partition's keys only (one
-- Redis Cluster slot): the endpoints come from the caller's copy of the endpoint set, vs =
-- "id[:flags],..." (flags: l = latest mode, d = disabled; an id absent is not known to the
-- caller: its deliveries are left alone), and the health outcomes are handed back in
-- `health` (endpoint id, outcome pairs: retry, dead, gone, then ok) for store/wh_health.lua
-- to apply to the deployment's endpoint hashes.
local view = nil
local health = {}
if dtag ~= tag then
  view = {}
  for id, f in string.gmatch(vs or '', '([^,:]+):?([ld]*)') do
    view[id] = f
  end
end

-- "1" enabled, "0" disabled, false unknown (deleted: its hash is gone)
local function wh_enabled(wh)
  if view then
    local f = view[wh]
    if not f then
      return false
    end
    return string.find(f, 'd', 1, true) and '0' or '1'
  end
  return redis.call('HGET', dtag .. ':wh:' .. wh, 'enabled') or false
end

-- an endpoint that answered ok in this run: its failing period ends
local function note_healthy(wh)
  if view then
    health[#health + 1] = wh
    health[#health + 1] = 'ok'
  else
    redis.call('HDEL', dtag .. ':wh:' .. wh, 'failSince')
  end
end

-- {P}:due holds every endpoint with a queue at the due time of the queue's head.
local function fix_due(due, wh)
  local f = redis.call('ZRANGE', tag .. ':dq:' .. wh, 0, 0, 'WITHSCORES')
  if #f == 0 then
    redis.call('ZREM', due, wh)
  else
    redis.call('ZADD', due, f[2], wh)
  end
end

local function fix_touched(due)
  for wh in pairs(touched) do
    fix_due(due, wh)
  end
end

-- delivery mode "latest" of an endpoint (read once per script run)
local function is_latest(wh)
  if modes[wh] == nil then
    if view then
      modes[wh] = string.find(view[wh] or '', 'l', 1, true) and 'latest' or 'all'
    else
      modes[wh] = redis.call('HGET', dtag .. ':wh:' .. wh, 'mode') or 'all'
    end
  end
  return modes[wh] == 'latest'
end

local function enqueue(did, wh, at)
  redis.call('HSET', tag .. ':dl:' .. did, 'q', '1', 'next', at)
  redis.call('ZADD', tag .. ':dq:' .. wh, at, did)
  touched[wh] = true
end

-- a newer state of the request makes this delivery pointless (latest mode)
local function supersede(did, wh, ok)
  local dl = tag .. ':dl:' .. did
  redis.call('HSET', dl, 'state', 'superseded', 'done', now)
  redis.call('HDEL', dl, 'q', 'next')
  redis.call('ZREM', ok, did)
  redis.call('ZREM', tag .. ':dq:' .. wh, did)
  redis.call('PEXPIRE', dl, ttl)
  touched[wh] = true
end

-- Queue the next delivery of an order set unless one is queued already: the lowest seq, or
-- in latest mode the newest (the older ones are superseded); due at its retry time when
-- that is later than now.
local function ensure_active(ok, wh)
  local mem = redis.call('ZRANGE', ok, 0, -1)
  if #mem == 0 then
    return
  end
  for _, m in ipairs(mem) do
    if redis.call('HGET', tag .. ':dl:' .. m, 'q') == '1' then
      return
    end
  end
  if is_latest(wh) then
    for i = 1, #mem - 1 do
      supersede(mem[i], wh, ok)
    end
    mem = {mem[#mem]}
  end
  local nx = tonumber(redis.call('HGET', tag .. ':dl:' .. mem[1], 'next') or '0') or 0
  enqueue(mem[1], wh, math.max(now, nx))
end
-- An attempt's outcome on its endpoint's health: a failure starts (or continues) the
-- failing period, an endpoint failing for disable_after ms or answering 410 is disabled
-- (whv = the endpoints version key, bumped so every process reloads); a success ends it.
-- Disabled endpoints are appended to the caller's list as (endpoint id, reason) pairs.
-- The endpoint.disabled event of endpoint wh (protocol/event.h "Other event types"), decided
-- in the same script that flips enabled to "0", so it exists exactly once per disable: no
-- request, ordered by the webhook id (the entry's "rid"), seq = the how-many-th disable of that
-- endpoint (its hash's "disSeq"), its event id derived from (webhook id, seq, at). Delivered to the other endpoints whose filters.events name it (the
-- disabled one receives nothing any more). One partition: written to the stream here. Several:
-- the flip happens in store/wh_health.lua on deployment keys, where no partition's stream can
-- be written; the record goes to the outbox {P}:wdisq in the same step, and
-- store/wh_disabled.lua moves it to the webhook id's partition (once: a dedupe key there).
local function endpoint_disabled_event(wh, whk, reason)
  local url = redis.call('HGET', whk, 'url') or ''
  local at = string.format('%d', now)
  local seq = redis.call('HINCRBY', whk, 'disSeq', 1)
  local rec = '{"event":{"type":"endpoint.disabled","seq":' .. seq .. ',"createdAt":' .. at ..
              ',"webhookId":' .. cjson.encode(wh) .. ',"url":' .. cjson.encode(url) ..
              ',"reason":"' .. reason .. '","at":' .. at .. '}}'
  if disabled_outbox then
    redis.call('RPUSH', disabled_outbox, wh .. ' ' .. rec)
  else
    redis.call('XADD', tag .. ':events', '*', 'rid', wh, 'seq', seq, 'type',
               'endpoint.disabled', 'rec', rec)
  end
end

local function note_outcome(wh, outcome, whv, disable_after, disabled)
  local whk = dtag .. ':wh:' .. wh
  if outcome == 'ok' then
    return true -- the caller clears failSince once per endpoint
  end
  if view then -- several partitions: applied by store/wh_health.lua
    health[#health + 1] = wh
    health[#health + 1] = outcome
    return false
  end
  if redis.call('EXISTS', whk) == 0 then
    return false
  end
  redis.call('HSETNX', whk, 'failSince', now)
  local since = tonumber(redis.call('HGET', whk, 'failSince'))
  local reason
  if outcome == 'gone' then
    reason = 'gone'
  elseif now - since >= disable_after then
    reason = 'failing'
  end
  if reason and redis.call('HGET', whk, 'enabled') == '1' then
    redis.call('HSET', whk, 'enabled', '0', 'disabledReason', reason, 'disabledAt', now)
    redis.call('INCR', whv)
    endpoint_disabled_event(wh, whk, reason)
    disabled[#disabled + 1] = wh
    disabled[#disabled + 1] = reason
  end
  return false
end
-- end of wh_lib.lua
