-- track.lua - start tracking request ids (idempotent).
-- KEYS: 1 poll zset, 2 the creation-time zset {P}:ct, 3.. one req hash per id
-- ARGV: 1 now ms, 2 metadata JSON or "", 3 key tag "{P}", 4 waiting TTL ms, 5 settled watch
--       ms, 6 failure tail ms, 7.. ids (same order as KEYS[3..])
-- Metadata given here passed proto_metadata_parse (relay/ingest/track.h): it is stored with
-- "mdok" = "1", which lets apply.lua put it into events without checking it again.
-- A newly tracked request, or a tracked one whose watch had ended, starts a watch now
-- (watch_lib.lua: its phase follows its last status, its window starts now) and is due for
-- a poll at once. A request watched anonymously (store/anon_lib.lua) becomes tracked: API
-- tracking wins, its watch stays when the last anonymous subscriber leaves. Returns the
-- count of newly tracked ids.
local tag, now = ARGV[3], tonumber(ARGV[1])
local wcfg = {wttl = tonumber(ARGV[4]), settled = tonumber(ARGV[5]), ftail = tonumber(ARGV[6])}
-- #include watch_lib.lua
-- #include chunk_lib.lua
local created = 0
for i = 3, #KEYS do
  local k, id = KEYS[i], ARGV[i + 4]
  local o = watch_read(k, id)
  local fields = {}
  if o.trk ~= '1' or not watched(o.phase) then
    if o.trk ~= '1' then
      created = created + 1
      fields[#fields + 1] = 'trk'
      fields[#fields + 1] = '1'
      if o.anon then
        fields[#fields + 1] = 'anon'
        fields[#fields + 1] = '0'
      end
    end
    local first = o.first
    if not first then
      first = ARGV[1]
      fields[#fields + 1] = 'first'
      fields[#fields + 1] = first
      -- listed from now on (GET /v1/requests pages {P}:ct), by first seen until its facts
      -- say; "cx" is its score there (store/apply.lua)
      if redis.call('ZADD', KEYS[2], 'NX', first, id) == 1 then
        fields[#fields + 1] = 'cx'
        fields[#fields + 1] = first
      end
    end
    watch_start(id, o, now, ARGV[1], first, 'u', nil, fields)
  end
  if ARGV[2] ~= '' then
    chunks.unpack(k) -- a packed hash (chunk_lib.lua): whole values before "meta" is written
    fields[#fields + 1] = 'meta'
    fields[#fields + 1] = ARGV[2]
    fields[#fields + 1] = 'mdok'
    fields[#fields + 1] = '1'
  end
  if #fields > 0 then
    redis.call('HSET', k, unpack(fields))
  end
end
return created
