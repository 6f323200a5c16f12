-- anon_lib.lua - anonymous watches: a request watched because a dashboard connection
-- without the stream token subscribed to it (relay/ingest/anon.c). Pasted after
-- watch_lib.lua where a script has the line "-- #include anon_lib.lua" (the script defines
-- tag and now, as for watch_lib.lua).
--
-- An anonymous watch lasts while a process holds it: each process that has a subscriber
-- keeps one holder "<id>|<instance id>" with a lease (STATUSRELAY_WS_ANON_LEASE), refreshed
-- while subscribed and removed when its last subscriber leaves; the watch ends when the
-- last holder is gone (released, or its lease expired: a killed process). A request tracked
-- through the API (trk = "1") is never ended here: API tracking wins and persists.
-- A request the upstream answers 404 for ANON_TRIES times ends at once and is not watched
-- anonymously again until its negative-cache entry expires.
-- Keys ({P}:..., store/keys.h):
--   anonh    zset  holders "<id>|<instance>", score 0 (lexical range: the holders of one id;
--                  "|" sorts after every request id character)
--   anonx    zset  the same holders by lease expiry (ms)
--   anon404  zset  ids the upstream does not know, by the end of their negative cache (ms);
--                  bounded (expired entries and the oldest beyond a cap are dropped)
-- Request hash fields: anon ("1" watched anonymously, "0" not), miss (404 answers so far).
local anon_h, anon_x, anon_nf = tag .. ':anonh', tag .. ':anonx', tag .. ':anon404'

-- True when some process still holds id.
local function anon_held(id)
  return #redis.call('ZRANGEBYLEX', anon_h, '[' .. id .. '|', '[' .. id .. '|\255',
                     'LIMIT', 0, 1) > 0
end

-- Drop every holder of id.
local function anon_drop_holders(id)
  local hs = redis.call('ZRANGEBYLEX', anon_h, '[' .. id .. '|', '[' .. id .. '|\255')
  for _, m in ipairs(hs) do
    redis.call('ZREM', anon_h, m)
    redis.call('ZREM', anon_x, m)
  end
end

-- End the anonymous watch of id when nobody holds it any more (force: even so) and the
-- API does not track it. A request never observed leaves nothing behind (its hash goes).
-- Returns true when a watch ended.
local function anon_end(id, force)
  if not force and anon_held(id) then
    return false
  end
  local k = tag .. ':req:' .. id
  local o = watch_read(k, id)
  if not o.anon then
    return false
  end
  local fields = watch_move(id, o, {phase = 'ended', wu = false, st = o.st}, {'anon', '0'})
  if redis.call('HEXISTS', k, 'rec') == 0 then
    redis.call('DEL', k)
  else
    redis.call('HSET', k, unpack(fields))
  end
  return watched(o.phase)
end
