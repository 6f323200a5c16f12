-- watch_lib.lua - the watch of a tracked request: its phase, kept in the request's hash and
-- in the watch indexes, the same for every process. relay/common/embed.pl pastes this file where a
-- script has the line "-- #include watch_lib.lua"; the script defines the locals tag (key
-- prefix, "{P}"), now (ms) and wcfg = {wttl, settled, ftail} (STATUSRELAY_WAITING_TTL,
-- STATUSRELAY_SETTLED_WATCH, STATUSRELAY_FAILURE_TAIL in ms) before that line.
--
-- Phases (README "Watch"): active (not settled: subscribed upstream, polled), settled
-- (success/refund/fallback: still subscribed, polled slowly), ended (neither; the last state stays
-- readable). A phase's window starts at the request hash's "wb" (window base, ms): the last
-- status change, or when an ended request was tracked again.
--   waiting / no status yet  active until wb + wttl, then ended
--   failure                  active until wb + ftail (a refund may follow), then ended
--   success / refund /       settled until wb + settled, then ended (fallback: settled like
--   fallback                 refund, DESIGN "More upstream rules": never stuck; a change out
--                            of it is no reversal, protocol/event.h)
--   anything else            active, no end (stuck requests are reported, never dropped)
--
-- Hash fields written here: watch (phase), wu (watch until ms, "" = none), wb, pt (poll tier:
-- "u" urgent, "a" active, "s" settled, "n" anonymous, "" none).
-- Anonymous watches (anon = "1", trk not "1": started by a dashboard subscription without the
-- stream token, store/anon_lib.lua) are polled in their own tier "n" whatever their urgency:
-- store/poll_claim.lua serves it last and with at most half of the budget left.
-- Indexes ({P}:... keys, see store/keys.h):
--   watch   zset  watched ids (active or settled) by change version: the upstream websocket
--                 holder subscribes them (watch_sync.lua reads changes after a version)
--   unwatch zset  ids whose watch ended, by change version: kept while a process may still
--                 need them (the last 30 s) or the record pass has not read them; watch_sync.lua
--                 trims the rest, bump below caps it (wlow: the newest version trimmed)
--   wver    string the change version counter;  wlow  string  newest version unwatch lost
--   wend    zset  watched ids with an end, by watch-until ms (watch_expire.lua ends them)
--   pollu / poll / polls / polln  zsets  poll schedule by due ms, one per tier, claimed in
--                 that order
--   act     zset  active ids other than waiting, by the time of their last status change
--                 (stuck = older than STATUSRELAY_STUCK_AFTER)
--   unset   zset  the same ids by first-seen time (oldest unsettled request)
local UNWATCH_CAP = 100000
local tiers = {u = tag .. ':pollu', a = tag .. ':poll', s = tag .. ':polls', n = tag .. ':polln'}

-- Feed-covered requests (req field fk = "1", store/feed_mark.lua, not watched anonymously) have
-- no poll-tier member while the changes feed is healthy ({P}:feedok exists; with several
-- partitions no partition tag holds it, so they keep their tiers): pt = "", the feed reports
-- their changes (an event moves nothing: watch_move keeps pt = ""). When {P}:feedok expires,
-- store/feed_restore.lua puts them back into their tiers; poll_take_due (poll_lib.lua),
-- poll_set.lua and feed_mark.lua take them out again once it is back. feed_ok() reads the key
-- once per script call.
local feed_ok_v
local function feed_ok()
  if feed_ok_v == nil then
    feed_ok_v = redis.call('EXISTS', tag .. ':feedok') == 1
  end
  return feed_ok_v
end

-- The phase of a request in status st ("" = none yet) whose window started at wb.
-- Returns phase, until (ms, or false for no end).
local function watch_phase(st, wb)
  local u
  if st == 'success' or st == 'refund' or st == 'fallback' then
    u = wb + wcfg.settled
    if u <= now then
      return 'ended', false
    end
    return 'settled', u
  elseif st == 'failure' then
    u = wb + wcfg.ftail
  elseif st == 'waiting' or st == '' then
    u = wb + wcfg.wttl
  else
    return 'active', false
  end
  if u <= now then
    return 'ended', false
  end
  return 'active', u
end

local function watched(phase)
  return phase == 'active' or phase == 'settled'
end

-- A change of request id's watch: a new version, id in into and out of from. unwatch above
-- UNWATCH_CAP loses its oldest 1,000 whatever the record pass read (the hard bound; at steady
-- state watch_sync.lua keeps it far below).
local function bump(id, into, from)
  local v = redis.call('INCR', tag .. ':wver')
  redis.call('ZADD', tag .. ':' .. into, v, id)
  redis.call('ZREM', tag .. ':' .. from, id)
  if into == 'unwatch' and redis.call('ZCARD', tag .. ':unwatch') > UNWATCH_CAP then
    local gone = redis.call('ZPOPMIN', tag .. ':unwatch', 1000)
    redis.call('SET', tag .. ':wlow', gone[#gone])
  end
end

-- Move request id from its old watch o = {phase, wu, pt, st} to the new one n = {phase, wu,
-- st, chg, first, tier, at}: indexes only where something changed. Returns the hash fields
-- to write (the caller HSETs them with its own fields).
--   n.chg   ms of the last status change (act score), n.first first-seen ms (unset score)
--   n.tier / n.at  poll tier and due ms chosen by the caller for a watched request
--   n.anon  true: the request is watched anonymously (its poll tier is "n" whatever n.tier)
--   n.lean  true: of watch, wu and pt only those that differ from the stored ones are
--           appended (the caller's fields are never empty: apply.lua)
local function watch_move(id, o, n, fields)
  local was, is = watched(o.phase), watched(n.phase)
  if is and not was then
    bump(id, 'watch', 'unwatch')
  elseif was and not is then
    bump(id, 'unwatch', 'watch')
  end
  local wu = n.wu and tostring(n.wu) or ''
  if wu ~= (o.wu or '') then
    if n.wu then
      redis.call('ZADD', tag .. ':wend', n.wu, id)
    else
      redis.call('ZREM', tag .. ':wend', id)
    end
  end
  local pt = is and n.tier or ''
  if pt ~= '' and n.anon then
    pt = 'n'
  elseif pt ~= '' and o.fk == '1' and ((was and (o.pt or '') == '') or feed_ok()) then
    -- feed-covered while the feed is healthy: no tier member. One that has none stays so
    -- without looking at the feed's health (no command): while the feed is down
    -- feed_restore.lua's pass gives it its tier (it gives every such one a tier)
    pt = ''
  end
  if (o.pt or '') ~= '' and o.pt ~= pt then
    redis.call('ZREM', tiers[o.pt], id)
  end
  if pt ~= '' then
    redis.call('ZADD', tiers[pt], n.at, id)
  end
  local stuckable = n.phase == 'active' and n.st ~= 'waiting' and n.st ~= ''
  local was_stuckable = o.phase == 'active' and o.st ~= 'waiting' and (o.st or '') ~= ''
  if stuckable then
    if not was_stuckable or o.st ~= n.st then
      redis.call('ZADD', tag .. ':act', n.chg, id)
      -- an old change (a request watched again): watch_stuck.lua's cursor may be past it
      if n.chg < now then
        local c = tonumber(redis.call('GET', tag .. ':stkc') or '')
        if c and n.chg <= c then
          redis.call('SET', tag .. ':stkc', n.chg)
        end
      end
    end
    if not was_stuckable then
      redis.call('ZADD', tag .. ':unset', n.first, id)
    end
  elseif was_stuckable then
    redis.call('ZREM', tag .. ':act', id)
    redis.call('ZREM', tag .. ':unset', id)
  end
  -- n.lean: only the fields that change (o.h: as stored), else all three
  local sh = n.lean and o.h or {}
  if sh[1] ~= n.phase then
    fields[#fields + 1] = 'watch'
    fields[#fields + 1] = n.phase
  end
  if sh[2] ~= wu then
    fields[#fields + 1] = 'wu'
    fields[#fields + 1] = wu
  end
  if sh[3] ~= pt then
    fields[#fields + 1] = 'pt'
    fields[#fields + 1] = pt
  end
  return fields
end

-- Start the watch of request id, read as o (watch_read), at now (nows: the same ms as it
-- is written): its window begins now, a request without a last change gets now, and it
-- moves to the phase its status gives on poll tier tier, due at once; anon marks an
-- anonymous watch. The hash fields to write are appended to fields.
local function watch_start(id, o, now, nows, first, tier, anon, fields)
  fields[#fields + 1] = 'wb'
  fields[#fields + 1] = nows
  local chg = o.chg
  if not chg then
    chg = now
    fields[#fields + 1] = 'chg'
    fields[#fields + 1] = nows
  end
  local phase, u = watch_phase(o.st, now)
  watch_move(id, o, {phase = phase, wu = u, st = o.st, chg = chg, first = first, tier = tier,
                     at = now, anon = anon}, fields)
end

-- #include tl_lib.lua
-- Append stream id sid (the newest of the partition's stream) to the timeline of the request
-- whose hash is k (store/keys.h; the layout: store/tl_lib.lua). f, one: the hash's "tl" and
-- "tl1" as read (nil when absent); first: true when the request has had no event yet (so no
-- list either). While the ids fit the "tl" field, the field to write goes into fields (the
-- caller's one HSET): no command of its own. The event that no longer fits moves them all into
-- the list tl and drops the field; a request with a list (and no field) just grows it, as
-- does a list of an older version. cap: the list's length at most.
local function tl_push(k, tl, sid, cap, f, one, first, fields)
  if not f then
    -- no field: a list (of an older version: next to a "tl1" of an older one still) grows
    if not first then
      local n = redis.call('RPUSHX', tl, sid)
      if n > 0 then
        if n > cap then
          redis.call('LTRIM', tl, -cap, -1)
        end
        return
      end
    end
    if not one then
      fields[#fields + 1] = 'tl'
      fields[#fields + 1] = sid -- tl_enc({sid})
      return
    end
  end
  -- the field, or the "tl1" of an older version without a list (a list an older process
  -- adds next to the field during an upgrade is merged by every reader)
  if f and not one then
    local e = tl_append(f, sid)
    if e then
      fields[#fields + 1] = 'tl'
      fields[#fields + 1] = e
      return
    end
  end
  local ids = tl_merge(f, one, nil)
  ids[#ids + 1] = sid
  if one then
    redis.call('HDEL', k, 'tl1')
  end
  local e = tl_enc(ids)
  if e then
    fields[#fields + 1] = 'tl'
    fields[#fields + 1] = e
    return
  end
  local n = redis.call('RPUSH', tl, unpack(ids))
  if n > #ids then
    -- a list was there already (an older process's): one list, in stream order
    local all = tl_sort(redis.call('LRANGE', tl, 0, -1))
    redis.call('DEL', tl)
    redis.call('RPUSH', tl, unpack(all, math.max(1, #all - cap + 1)))
  elseif n > cap then
    redis.call('LTRIM', tl, -cap, -1)
  end
  if f then
    redis.call('HDEL', k, 'tl')
  end
end

-- A typed event of request id (protocol/event.h "Other event types"): written once, by the
-- script that decided it, atomically with the change that caused it. The record is the
-- request's state record with ,"event":{"type","seq","createdAt"<extra>} appended; it takes
-- the request's next seq (after its last status event, so it never overtakes it) and goes
-- into the request's hash ("rec", "seq"; "tev" = "<seq>:<length of the state record>" says
-- the stored record is typed, so the next typed event appends to the state record and not to
-- the typed one) and into the event stream and the request's timeline (tl_push) like a status
-- event.
-- k: the request's hash; typ: the type name; extra: the type's fields, JSON text starting
-- with "," (or ""); maxlen: the stream's MAXLEN (STATUSRELAY_EVENT_RETENTION).
-- A record deflated by the record pass (store/rec.h: its watch had ended; Lua cannot inflate
-- it) is no base: the event waits in the hash's "rzev" ("<ms>|<type>|<extra>" lines, in
-- order) and the id in {P}:rzq until the pass has made the record plain again and written it
-- (store/rec_put.lua, within a pass step: seconds); so does any later one while one waits.
-- Returns the stream id, "deferred" for one that waits, or false when the request has no
-- record yet (nothing to say).
local function watch_event(id, k, typ, extra, maxlen)
  local h = redis.call('HMGET', k, 'rec', 'seq', 'tev', 'tl', 'tl1', 'rzev')
  if not h[1] then
    return false
  end
  if h[6] or string.byte(h[1]) ~= 123 then
    local ev = string.format('%d', now) .. '|' .. typ .. '|' .. extra
    redis.call('HSET', k, 'rzev', h[6] and (h[6] .. '\n' .. ev) or ev)
    redis.call('ZADD', tag .. ':rzq', 'NX', now, id)
    return 'deferred'
  end
  local seq = tonumber(h[2] or '0') + 1
  local base = h[1]
  if h[3] then
    local tseq, blen = string.match(h[3], '^(%d+):(%d+)$')
    if tonumber(tseq) == seq - 1 then
      base = string.sub(base, 1, tonumber(blen))
    end
  end
  local rec = string.sub(base, 1, -2) .. ',"event":{"type":"' .. typ .. '","seq":' ..
              string.format('%d', seq) .. ',"createdAt":' .. string.format('%d', now) ..
              extra .. '}}'
  local sid = redis.call('XADD', tag .. ':events', 'MAXLEN', '~', maxlen, '*', 'rid', id,
                         'seq', seq, 'type', typ, 'rec', rec)
  local fields = {'rec', rec, 'seq', seq, 'tev', string.format('%d:%d', seq, #base)}
  tl_push(k, tag .. ':tl:' .. id, sid, 200, h[4], h[5], false, fields)
  redis.call('HSET', k, unpack(fields))
  return sid
end

-- The reason of a request.watch.ended for a window that passed, by the status it ended in.
local function watch_end_reason(st)
  if st == 'success' or st == 'refund' or st == 'fallback' then
    return 'final'
  elseif st == 'failure' then
    return 'failure_tail'
  end
  return 'abandoned'
end

-- The watch of request id as stored: {phase, wu, pt, st, wb, chg, first, trk, seq, anon,
-- legacy, h} (anon: true when watched anonymously and not tracked through the API). A
-- request written before watches existed has no phase: it counts as ended (so that the next
-- move adds it to every index), with its poll tier found in the old poll set; legacy is
-- true when it was polled there (tracked and not final in the old model: only a hash with
-- trk = "1" was ever in that set, so no other request costs the ZSCORE). more: optional
-- names of further hash fields read in the same HMGET, their values in o.x (same order).
-- o.h: the stored watch, wu and pt as they are (nil when absent), so that watch_move
-- may write only those that change (n.lean). o.fk: the feed mark (read after more).
local function watch_read(key, id, more)
  local h
  if more then
    h = redis.call('HMGET', key, 'watch', 'wu', 'pt', 'status', 'wb', 'chg', 'first', 'trk',
                   'seq', 'anon', 'fk', unpack(more))
  else
    h = redis.call('HMGET', key, 'watch', 'wu', 'pt', 'status', 'wb', 'chg', 'first', 'trk',
                   'seq', 'anon', 'fk')
  end
  local o = {phase = h[1], wu = h[2], pt = h[3], st = h[4] or '', wb = tonumber(h[5]),
             chg = tonumber(h[6]), first = h[7], trk = h[8], seq = tonumber(h[9] or '0'),
             anon = h[10] == '1' and h[8] ~= '1', h = {h[1], h[2], h[3]}}
  if not o.anon then
    o.fk = h[11]
  end
  if more then
    o.x = {}
    for i = 1, #more do
      o.x[i] = h[11 + i]
    end
  end
  if not o.phase then
    o.phase = 'ended'
    if h[8] == '1' and redis.call('ZSCORE', tiers.a, id) then
      o.pt, o.legacy = 'a', true
    end
  end
  return o
end
