-- wh_fanout.lua - record the deliveries of a batch of events, idempotently, and XACK the
-- batch in the same atomic step (a crash before this script leaves the entries pending in
-- the consumer group; after it, everything is written: never lost, never doubled). Also used
-- by replays (ARGV[7] = "1": no lease or XACK, terminal deliveries are queued again).
-- The delivery id is deterministic: "<event id>.<endpoint id>".
-- Most deliveries were already attempted once by the caller before this script runs (the
-- delivery log of issue 17: the first attempt needs no record); the script records only
-- what is not finished (a retry, a request held back, an attempt still in flight), what
-- went dead, and a compact entry in the endpoint's delivered log
-- ({P}:dlh:<wh>, capped with the listing) for each delivered one.
-- KEYS: 1 events stream, 2 endpoints version, 3 fanout lease, 4 inflight, 5 dead
-- ARGV: 1 tag, 2 endpoints version the caller matched against, 3 instance id, 4 now ms,
--       5 consumer group, 6 retention ms of finished deliveries and bodies, 7 replay flag,
--       8 per-endpoint listing cap, 9 disable after ms (continuous failure), then per event:
--       stream id, event id, request id, seq, status, event time ms, body, n, then n quads
--       (endpoint id, kind, attempt JSON, number). Kinds: "p" pending (queued, or held
--       behind an earlier delivery of the request), "s" skipped (endpoint disabled), and
--       outcomes of a first attempt made by the caller: "o" delivered, "r" retry (number =
--       next attempt ms), "d" dead, "g" gone (410: dead, endpoint disabled), "f" still in
--       flight (number = lease end ms; the caller's dispatcher reports it via wh_done.lua).
--       The body may be "" when no kind of the event needs it later (o, d, g).
-- Returns {1, deliveries created or queued again, then (endpoint id, reason) pairs of
-- endpoints disabled now}, {-1, version} when the endpoint set changed (the caller reloads
-- and matches again; version "*" skips the check: the live fan-out matched against a
-- version wh_held.lua checked before the first attempts), {-2} when this process lost the
-- fanout lease.
-- ARGV[1] is the partition's tag, or "<partition tag> <deployment tag> <endpoint view>" in a
-- deployment with several partitions (docs/partitions.md; the view: wh_lib.lua)
local tag, dtag, vs = string.match(ARGV[1], '^(%S+) (%S+) ?(.*)$')
if not tag then
  tag, dtag, vs = ARGV[1], ARGV[1], ''
end
local ver = redis.call('GET', KEYS[2]) or '0'
if ARGV[2] ~= '*' and ver ~= ARGV[2] then
  return {-1, ver}
end
local replay = ARGV[7] == '1'
if not replay and redis.call('GET', KEYS[3]) ~= ARGV[3] then
  return {-2}
end
local now = tonumber(ARGV[4])
local ttl = ARGV[6]
local cap = tonumber(ARGV[8])
local disable_after = tonumber(ARGV[9])
local disabled = {}
local healthy = {}

-- #include wh_lib.lua
-- #include keys_lib.lua

local capped = {}
local count = 0

-- the endpoint's listing (capped: the oldest entries are trimmed once per script run, with
-- their compact delivered entries)
local function list(wh, did)
  local dls = tag .. ':dls:' .. wh
  redis.call('ZADD', dls, now, did)
  if cap > 0 and not capped[wh] then
    capped[wh] = true
    local over = redis.call('ZCARD', dls) - cap
    while over > 0 do
      local old = redis.call('ZRANGE', dls, 0, math.min(over, 1000) - 1)
      redis.call('ZREM', dls, unpack(old))
      redis.call('HDEL', tag .. ':dlh:' .. wh, unpack(old))
      over = over - #old
    end
  end
end
-- One EXISTS for the delivery records of every pair of the run first (chunks of 1000 keys):
-- when none exists (a live fan-out's first commit, the common case) no pair needs its own
-- HGET of the record's state; a record made earlier in this run (seen) is still read.
local norec = true
do
  local ks, j = {}, 10
  while j <= #ARGV do
    local ev, n = ARGV[j + 1], tonumber(ARGV[j + 7])
    j = j + 8
    for q = 0, n - 1 do
      ks[#ks + 1] = tag .. ':dl:' .. ev .. '.' .. ARGV[j + 4 * q]
    end
    j = j + 4 * n
  end
  norec = not any_exists(ks)
end
local seen = {}
local i = 10
local sids = {}
while i <= #ARGV do
  local sid, ev, rid, seq, st, et, body, n =
    ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6],
    tonumber(ARGV[i + 7])
  sids[#sids + 1] = sid
  i = i + 8
  if n > 0 and body ~= '' then
    redis.call('SET', tag .. ':body:' .. ev, body, 'PX', ttl)
  end
  for j = 0, n - 1 do
    local wh, kind, att, num = ARGV[i + 4 * j], ARGV[i + 4 * j + 1], ARGV[i + 4 * j + 2],
      ARGV[i + 4 * j + 3]
    local did = ev .. '.' .. wh
    local dl = tag .. ':dl:' .. did
    local state = nil
    if not norec or seen[did] then
      state = redis.call('HGET', dl, 'state')
    end
    seen[did] = true
    local ok = tag .. ':order:' .. wh .. ':' .. rid
    if not state and (kind == 'p' or kind == 's') then
      count = count + 1
      local latest = is_latest(wh)
      -- the common case: no other unfinished delivery of this request to this endpoint, so
      -- this one is queued at once (written in the same HSET)
      local alone = false
      if kind ~= 's' then
        redis.call('ZADD', ok, seq, did)
        alone = redis.call('ZCARD', ok) == 1
      end
      if alone then
        redis.call('HSET', dl, 'ev', ev, 'wh', wh, 'rid', rid, 'seq', seq, 'st', st, 'sid', sid,
                   'et', et, 'ct', now, 'att', 0, 'nlog', 0, 'rp', replay and '1' or '0',
                   'state', 'pending', 'q', '1', 'next', now)
        redis.call('ZADD', tag .. ':dq:' .. wh, now, did)
        touched[wh] = true
      else
        redis.call('HSET', dl, 'ev', ev, 'wh', wh, 'rid', rid, 'seq', seq, 'st', st, 'sid', sid,
                   'et', et, 'ct', now, 'att', 0, 'nlog', 0, 'rp', replay and '1' or '0',
                   'state', kind == 's' and 'skipped' or 'pending')
      end
      list(wh, did)
      if kind == 's' then
        redis.call('ZADD', tag .. ':skipped', now, did)
      elseif not alone then
        if latest then
          -- supersede waiting older states, and the active one unless it is in flight
          local mem = redis.call('ZRANGEBYSCORE', ok, '-inf', '(' .. seq)
          for _, m in ipairs(mem) do
            if not redis.call('ZSCORE', KEYS[4], m) then
              supersede(m, wh, ok)
            end
          end
        end
        ensure_active(ok, wh)
      end
    elseif not state and kind ~= 'p' and kind ~= 's' then
      -- a first attempt the caller already made (never in replays). A commit written again
      -- carries the same kinds: r/d/f find their record above, o its entry (HSETNX)
      if kind ~= 'o' then
        count = count + 1
      end
      local base = {'ev', ev, 'wh', wh, 'rid', rid, 'seq', seq, 'st', st, 'sid', sid, 'et', et,
                    'ct', now, 'att', 1, 'rp', '0'}
      if kind == 'o' then
        -- delivered at the first attempt: no record of its own, one compact entry in the
        -- endpoint's delivered log (read back by wh_list.lua; fields in that order)
        count = count + redis.call('HSETNX', tag .. ':dlh:' .. wh, did,
                                   table.concat({ev, rid, seq, st, sid, et, now, att}, '\n'))
        healthy[wh] = true
      elseif kind == 'f' then
        redis.call('HSET', dl, 'nlog', 0, 'state', 'pending', 'q', '1', 'next', now,
                   unpack(base))
        redis.call('ZADD', ok, seq, did)
        redis.call('ZADD', KEYS[4], num, did)
      elseif kind == 'r' then
        redis.call('HSET', dl, 'nlog', 1, 'a1', att, 'state', 'pending', 'next', num,
                   unpack(base))
        redis.call('ZADD', ok, seq, did)
        note_outcome(wh, 'retry', KEYS[2], disable_after, disabled)
        ensure_active(ok, wh)
      else -- 'd' dead, 'g' gone
        redis.call('HSET', dl, 'nlog', 1, 'a1', att, 'state', 'dead', 'done', now,
                   unpack(base))
        redis.call('ZADD', KEYS[5], now, did)
        note_outcome(wh, kind == 'g' and 'gone' or 'dead', KEYS[2], disable_after, disabled)
      end
      list(wh, did)
    elseif replay and state ~= 'pending' and kind ~= 's' then
      count = count + 1
      redis.call('HSET', dl, 'state', 'pending', 'att', 0, 'rp', '1')
      redis.call('HDEL', dl, 'done')
      redis.call('PERSIST', dl)
      redis.call('ZREM', tag .. ':dead', did)
      redis.call('ZREM', tag .. ':skipped', did)
      redis.call('ZADD', ok, seq, did)
      ensure_active(ok, wh)
    end
  end
  i = i + 4 * n
end
for wh in pairs(healthy) do
  note_healthy(wh)
end
fix_touched(tag .. ':due')
if not replay and #sids > 0 then
  redis.call('XACK', KEYS[1], ARGV[5], unpack(sids))
end
local out = {1, count}
for _, v in ipairs(view and health or disabled) do
  out[#out + 1] = v
end
return out
