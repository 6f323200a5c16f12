-- rec_put.lua - write back what the record pass (store/rec.h) made of rec_scan.lua's records,
-- each as a compare-and-set on the hash {P}:req:<id>:
--   "c" (deflate): only while rec is still the plain record read, seq is unchanged, the watch
--       is ended and no typed event waits: an apply, a typed event or a watch started in
--       between wins (the record stays as they left it); then the hash is packed
--       (rec_lib.lua rec_repack: its values over 64 B in chunks, its unneeded fields dropped,
--       so that it is a listpack with Redis defaults; chunk_lib.lua);
--   "r" (typed events wait, "rzev"): only while rec is still the value read: it becomes the
--       plain record (the same bytes as before it was deflated; a packed hash is unpacked
--       first, chunk_lib.lua chunks.unpack) and the waiting events are
--       written in order (watch_event, each with the time it was decided; one that what
--       happened since made stale is dropped, below); the id stays in
--       {P}:rzq for rec_scan.lua. A value that changed meanwhile is read again by the next step.
--   "x" (typed events wait on a record the daemon cannot read): only while rec is still the
--       value read: the waiting events are dropped (rec_scan.lua then takes the id off
--       {P}:rzq), not retried at every step.
-- KEYS: 1 {P}:rzq. ARGV: 1 key tag "{P}", 2 now ms, 3 event stream MAXLEN; then 5 per item:
--       op ("c" | "r"), id, seq read ("c"), the value read, the value to write.
-- Returns {deflated, restored}.
local tag, now = ARGV[1], tonumber(ARGV[2])
local wcfg = {wttl = 0, settled = 0, ftail = 0}
-- #include watch_lib.lua
-- #include chunk_lib.lua
-- #include rec_lib.lua
local nc, nr = 0, 0
for i = 4, #ARGV - 4, 5 do
  local op, id, seq, old, new = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local k = tag .. ':req:' .. id
  if op == 'c' then
    local h = chunks.hmget(k, {'rec', 'seq', 'watch', 'rzev', 'ck'})
    if h[1] == old and (h[2] or '0') == seq and not watched(h[3]) and not h[4] then
      redis.call('HSET', k, 'rec', new) -- an old chunked rec's chunks: gone with the rewrite
      rec_repack(k, new, h[3], false, false)
      nc = nc + 1
    end
  elseif op == 'x' then
    if chunks.get(k, 'rec') == old then
      redis.call('HDEL', k, 'rzev')
    end
  else
    local h = chunks.hmget(k, {'rec', 'rzev', 'watch', 'ck'})
    if h[1] == old and string.byte(new) == 123 then
      chunks.unpack(k, h[4])
      if new ~= old then
        redis.call('HSET', k, 'rec', new)
      end
      redis.call('HDEL', k, 'rzev')
      for ev in string.gmatch(h[2] or '', '[^\n]+') do
        local at, typ, extra = string.match(ev, '^(%d+)|([^|]+)|(.*)$')
        -- what happened since makes one stale: a watch.ended of a watch that started again
        -- (a new status event), a stuck of a status that changed or is no longer active
        -- (stuckSince is its score in {P}:act, watch_stuck.lua)
        local stale = typ == 'request.watch.ended' and watched(h[3])
        if typ == 'request.stuck' then
          local sc = redis.call('ZSCORE', tag .. ':act', id)
          stale = not sc or tonumber(sc) ~= tonumber(string.match(extra, '(%d+)$') or '')
        end
        if at and not stale then
          now = tonumber(at)
          watch_event(id, k, typ, extra, ARGV[3])
        end
      end
      nr = nr + 1 -- it stays in {P}:rzq: rec_scan.lua deflates it when its watch ended
    end
  end
end
return {nc, nr}
