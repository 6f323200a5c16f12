-- apply.lua - the atomic apply step (compare-and-set on the request's seq), for a batch of
-- observations of one partition (store/apply.c: every key below carries its hash tag).
-- protocol/lifecycle.c decided that each observation is a new event with seq = expected + 1;
-- this script writes it only if nobody else wrote an event for the request meanwhile, and
-- moves the watch of a tracked request to the phase of its new status (watch_lib.lua).
-- Items are applied in order, each on its own: a conflict answers that item only.
-- Batch KEYS: 1 events stream, 2 creation-time zset {P}:ct, 3 poll zset (active tier); then 4
--       per item: req hash, new status zset, old status zset, timeline list
-- Batch ARGV: 1 stream maxlen, 2 now ms, 3 timeline cap, 4 key tag "{P}", 5 waiting TTL ms,
--       6 settled watch ms, 7 failure tail ms, 8 search index cap, 9 item count; then per
--       item: the count c of its values, then its c values: expected seq, new seq, record,
--       status, event id, request id, next poll ms, source, track, poll tier, the event's
--       createdAt (ms: the time of a status change, "chg", so that request.stuck's stuckSince
--       is the status event's own timestamp), search entries
-- apply_one sees one item as KEYS/ARGV in the layout of the single-observation script:
-- KEYS: 1 req hash, 2 events stream, 3 {P}:ct, 4 new status zset, 5 old status zset,
--       6 timeline list (written only once a request's stream ids outgrow the hash's "tl"
--       field: tl_push, watch_lib.lua; store/tl_lib.lua), 7 poll zset (active tier)
-- ARGV: 1 expected seq (0 = unknown request), 2 new seq, 3 record JSON, 4 status,
--       5 event id, 6 request id, 7 stream maxlen, 8 now ms, 9 next poll ms, 10 source,
--       11 timeline cap, 12 "1" = start tracking an untracked request, 13 poll tier
--       ("u" urgent, "a" active, "s" settled), 14 key tag "{P}", 15 waiting TTL ms,
--       16 settled watch ms, 17 failure tail ms, 18 search index cap, 19.. search index
--       entries the record adds (store/search.h: its new hashes, referrer, deposit address)
-- The request's tracking metadata (the hash's "meta", track.lua) travels in the event: it is
-- appended to the record as its last key, "metadata", exactly where proto_event_record puts
-- it (protocol/event.h), so the record the stream and the hash keep carries it and every
-- body and frame rendered from it does too. A value track.lua marked as checked ("mdok") goes
-- in as it is; one an older version stored is checked here first (meta_ok, slower) and one
-- proto_metadata_parse would refuse stays out: the record must stay readable.
-- Every observation is the upstream's word, so an applied one also sets the hash's "cf" (when
-- the upstream last confirmed the stored state, ms: relay/api/compat.c's fresh status reads);
-- one that repeats the stored state sets it through store/apply_confirm.lua.
-- Returns one result per item: {1, stream id, metadata or false, facts} when applied (facts:
-- 1 when the hash holds request facts (fx) as the event is written, else 0 - then the event
-- can never carry any: a later facts version is of seq > this one, store/facts_put.lua, so
-- the fan-out skips its facts_at read), {0, current record or false} on a seq conflict.
local tag, now = ARGV[4], tonumber(ARGV[2])
local wcfg = {wttl = tonumber(ARGV[5]), settled = tonumber(ARGV[6]),
              ftail = tonumber(ARGV[7])}
-- #include watch_lib.lua
-- #include search_lib.lua
-- Metadata stored by an older version (no "mdok"): JSON object text within
-- proto_metadata_parse's bounds, PROTO_MAX_METADATA bytes and PROTO_MAX_JSON_DEPTH levels (the
-- count of opening brackets bounds the depth; only a larger count is scanned).
local function meta_ok(m)
  if #m > 4096 or string.sub(m, 1, 1) ~= '{' or string.sub(m, -1) ~= '}' then
    return false
  end
  if not pcall(cjson.decode, m) then
    return false
  end
  local _, opens = string.gsub(m, '[{%[]', '')
  if opens <= 32 then
    return true
  end
  local d, i, instr = 0, 1, false
  while true do
    local j = string.find(m, instr and '["\\]' or '["{}%[%]]', i)
    if not j then
      return true
    end
    local ch = string.sub(m, j, j)
    i = j + 1
    if instr then
      if ch == '\\' then
        i = j + 2
      else
        instr = false
      end
    elseif ch == '"' then
      instr = true
    elseif ch == '{' or ch == '[' then
      d = d + 1
      if d > 32 then
        return false
      end
    else
      d = d - 1
    end
  end
end
local function apply_one(KEYS, ARGV, created)
local id, st = ARGV[6], ARGV[4]
-- one read of the hash: the watch (watch_read) and meta, mdok, ix, tl1, cx, fx, tl, ck
local more = {'meta', 'mdok', 'ix', 'tl1', 'cx', 'fx', 'tl', 'ck'}
local o = watch_read(KEYS[1], id, more)
if o.seq ~= tonumber(ARGV[1]) then
  return {0, chunks.get(KEYS[1], 'rec') or false}
end
-- a hash the record pass packed (an ended watch: chunk_lib.lua): whole values again first
if o.x[8] and chunks.unpack(KEYS[1], o.x[8]) then
  o = watch_read(KEYS[1], id, more)
end
local rec = ARGV[3]
local meta = o.x[1]
if meta and (o.x[2] == '1' or meta_ok(meta)) then
  rec = string.sub(rec, 1, -2) .. ',"metadata":' .. meta .. '}'
else
  meta = false
end
local first, trk = o.first, o.trk
local fields = {'seq', ARGV[2], 'rec', rec, 'status', st, 'src', ARGV[10], 'cf', ARGV[8]}
if not first then
  first = ARGV[8]
  fields[#fields + 1] = 'first'
  fields[#fields + 1] = first
end
if not trk and ARGV[12] == '1' then
  trk = '1'
  fields[#fields + 1] = 'trk'
  fields[#fields + 1] = '1'
end
local chg, wb = o.chg, o.wb
if o.st ~= st or not chg then
  chg = (created and created > 0) and created or now
  fields[#fields + 1] = 'chg'
  fields[#fields + 1] = ARGV[8]
end
if o.st ~= st or not wb then
  wb = now
  fields[#fields + 1] = 'wb'
  fields[#fields + 1] = ARGV[8]
end
if trk == '1' or o.anon then -- tracked, or watched anonymously (store/anon_lib.lua)
  local phase, u = watch_phase(st, wb)
  watch_move(id, o, {phase = phase, wu = u, st = st, chg = chg, first = first,
                     tier = ARGV[13], at = ARGV[9], anon = trk ~= '1', lean = true}, fields)
end
-- The creation-time index {P}:ct (store/search.h): every request by creation time, first seen
-- until its facts say (store/search_index.lua moves it). The hash's "cx" is the id's score
-- there, written with it and moved with it, so an event needs no lookup of it: the status
-- set's score and the search entries' come from it. "1" (an older version's mark: in ct,
-- score not kept) is read from ct once, when a score is needed, and replaced by the score. A
-- hash without it (first event, or written by a version before ct) adds the id (NX: a
-- score search_index.lua gave it stays).
local cs = o.x[5]
if not cs then
  if redis.call('ZADD', KEYS[3], 'NX', first, id) == 1 then
    cs = first
  else
    cs = redis.call('ZSCORE', KEYS[3], id)
  end
  fields[#fields + 1] = 'cx'
  fields[#fields + 1] = cs
end
local function ct_score()
  if cs == '1' then
    cs = redis.call('ZSCORE', KEYS[3], id)
    if not cs then
      cs = first
      redis.call('ZADD', KEYS[3], cs, id)
    end
    fields[#fields + 1] = 'cx'
    fields[#fields + 1] = cs
  end
  return cs
end
if #ARGV > 18 then
  local ents = {}
  for i = 19, #ARGV do
    ents[#ents + 1] = ARGV[i]
  end
  local _, ix = search_add(tag, id, ct_score(), ents, tonumber(ARGV[18]), o.x[3] or '')
  if ix then
    fields[#fields + 1] = 'ix'
    fields[#fields + 1] = ix
  end
end
local sid = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], '*',
                       'id', ARGV[5], 'rid', id, 'seq', ARGV[2], 'rec', rec)
-- the timeline (tl_push, watch_lib.lua), its reads folded into the one above: while the
-- request's stream ids fit its hash's "tl" field they go into the HSET below (a request's
-- first event: no event yet, so no list, every event raises seq)
tl_push(KEYS[1], KEYS[6], sid, tonumber(ARGV[11]), o.x[7], o.x[4], o.seq == 0, fields)
-- the status set, by creation time (the listing's order, store/requests_page.lua): written
-- when the status changes (a request's first event included); the same status keeps its
-- member. A member an older version wrote (scored by first seen) takes the creation time
-- with the request's next status change (or its facts, search_index.lua).
if o.st ~= st then
  if KEYS[5] ~= KEYS[4] then
    redis.call('ZREM', KEYS[5], id)
  end
  redis.call('ZADD', KEYS[4], ct_score(), id)
end
redis.call('HSET', KEYS[1], unpack(fields))
return {1, sid, meta, o.x[6] and 1 or 0}
end

local res, k, a = {}, 4, 10
for i = 1, tonumber(ARGV[9]) do
  local c = tonumber(ARGV[a])
  local v = {ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6],
             ARGV[1], ARGV[2], ARGV[a + 7], ARGV[a + 8], ARGV[3], ARGV[a + 9], ARGV[a + 10],
             ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]}
  for j = 12, c do
    v[#v + 1] = ARGV[a + j]
  end
  res[i] = apply_one({KEYS[k], KEYS[1], KEYS[2], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[3]},
                     v, tonumber(ARGV[a + 11]))
  k, a = k + 4, a + c + 1
end
return res
