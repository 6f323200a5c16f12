-- rec_scan.lua - one step of the record pass (store/rec.h): the plain records of requests
-- whose watch ended since the cursor, to be deflated (rec_put.lua then packs the hash), and the
-- records typed events wait for (watch_lib.lua watch_event), to be made plain. The one write
-- besides its cursor: the hash of an ended watch whose record is deflated already but which
-- is not packed (deflated by an older version, or written since: chunk_lib.lua chunks.unpack
-- queued it in {P}:rzq) is packed here (chunks.pack, rec_put.lua's drop rule), under the
-- same checks as rec_put.lua's "c".
-- KEYS: 1 {P}:unwatch, 2 {P}:rzq. ARGV: 1 key tag "{P}", 2 at most this many of each, 3 "1":
--       deflate (STATUSRELAY_COMPRESS_RECORDS; else only the waiting events are served).
-- The cursor {P}:rzk is the last unwatch version read: a request whose watch ends again later
-- gets a newer version and is read again; one watched again left unwatch (watch_lib.lua bump).
-- (It replaced {P}:rzc, the cursor of the versions that deflated without packing: a
-- deployment upgraded from them reads unwatch once more from the start, so that the hashes
-- they deflated are packed too; rzc, one number, is left to those versions.)
-- A record is deflated only while the watch is ended and no typed event waits ("rzev").
-- {P}:rzq: ids whose typed events wait, and those whose events went out (rec_put.lua keeps
-- them queued): read from here once more to be deflated when their watch has ended.
-- Returns {more (1: a full batch, step again), {id, seq, record, ...} plain records of ended
-- watches, {id, record, ...} of the queued requests whose events wait (deflated, or plain
-- already when an apply wrote since: rec_put.lua then only writes the waiting events)}.
local tag, max = ARGV[1], tonumber(ARGV[2])
-- #include chunk_lib.lua
-- #include rec_lib.lua
-- a plain record (JSON: '{') of a request whose watch ended (watch_lib.lua watched())
local function deflatable(rec, phase)
  return rec and string.byte(rec) == 123 and phase ~= 'active' and phase ~= 'settled'
end
local ck = tag .. ':rzk'
local got = {}
if ARGV[3] == '1' then
  local from = redis.call('GET', ck)
  got = redis.call('ZRANGEBYSCORE', KEYS[1], from and ('(' .. from) or '-inf', '+inf',
                   'WITHSCORES', 'LIMIT', 0, max)
end
local cz, rs = {}, {}
for i = 1, #got, 2 do
  local id = got[i]
  local k = tag .. ':req:' .. id
  local h = redis.call('HMGET', k, 'rec', 'seq', 'watch', 'rzev', 'ck')
  if deflatable(h[1], h[3]) and not h[4] then
    cz[#cz + 1] = id
    cz[#cz + 1] = h[2] or '0'
    cz[#cz + 1] = h[1]
  elseif ARGV[3] == '1' then
    rec_repack(k, h[1], h[3], h[4], h[5])
  end
end
if #got > 0 then
  redis.call('SET', ck, got[#got])
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, max - 1)) do
  local k = tag .. ':req:' .. id
  local h = chunks.hmget(k, {'rec', 'rzev', 'seq', 'watch', 'ck'})
  if h[1] and h[2] then
    rs[#rs + 1] = id
    rs[#rs + 1] = h[1]
  else
    -- swept, or its events went out (rec_put.lua): its watch ended again meanwhile (the
    -- cursor passed it while they waited), so it is deflated from here
    redis.call('ZREM', KEYS[2], id)
    if ARGV[3] == '1' and deflatable(h[1], h[4]) then
      cz[#cz + 1] = id
      cz[#cz + 1] = h[3] or '0'
      cz[#cz + 1] = h[1]
    elseif ARGV[3] == '1' then
      rec_repack(k, h[1], h[4], h[2], h[5])
    end
  end
end
return {#got / 2 >= max and 1 or 0, cz, rs}
