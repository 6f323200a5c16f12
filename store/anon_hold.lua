-- anon_hold.lua - hold anonymous watches for this process (store/anon_lib.lua): the first
-- subscriber of an id here (start = "1"), or the periodic refresh of every id held here.
-- KEYS: 1 anonh zset. ARGV: 1 now ms, 2 lease ms, 3 instance id, 4 key tag "{P}", 5 waiting
--       TTL ms, 6 settled watch ms, 7 failure tail ms, 8 start ("1": a request nobody
--       watches starts an anonymous watch, polled at once; a larger number: the same, its
--       first poll due at that ms - a status read's lease, relay/ingest/anon.c anon_read,
--       whose read just saw the state; "0", the refresh: only holds), 9.. ids
-- A request the API tracks, or that some watch already covers, is only held (not
-- counted, not changed). An id in the negative cache is not held.
-- Returns {started count, id the upstream does not know, ...}.
local tag, now = ARGV[4], tonumber(ARGV[1])
local wcfg = {wttl = tonumber(ARGV[5]), settled = tonumber(ARGV[6]), ftail = tonumber(ARGV[7])}
-- #include watch_lib.lua
-- #include anon_lib.lua
local until_ms, proc, start = now + tonumber(ARGV[2]), ARGV[3], ARGV[8] ~= '0'
local due = ARGV[8] == '1' and now or tonumber(ARGV[8])
local out = {0}
for i = 9, #ARGV do
  local id = ARGV[i]
  local nf = tonumber(redis.call('ZSCORE', anon_nf, id) or '0')
  if nf > now then
    out[#out + 1] = id
  else
    local m = id .. '|' .. proc
    redis.call('ZADD', anon_h, 0, m)
    redis.call('ZADD', anon_x, until_ms, m)
    if start then
      local k = tag .. ':req:' .. id
      local o = watch_read(k, id)
      if o.trk ~= '1' and not watched(o.phase) then
        local fields = {'anon', '1', 'miss', '0'}
        watch_start(id, o, now, ARGV[1], o.first or now, 'n', true, fields)
        redis.call('HSET', k, unpack(fields))
        if due ~= now then
          redis.call('ZADD', tiers.n, 'XX', due, id) -- watch_start made it due now
        end
        out[1] = out[1] + 1
      end
    end
  end
end
return out
