-- feed_mark.lua - a request the changes feed returned is "of the key" (req field fk = "1"):
-- while the feed is healthy the poll claims skip it (store/poll_claim.lua, poll_take.lua), and
-- a watched one (not anonymously) leaves its poll tier at once when the feed is healthy
-- ({P}:feedok): pt = "" (watch_lib.lua "Feed-covered requests"). relay/ingest/feed.c marks
-- every item it applied and, once per id and process, those that made no event (the state
-- came first through polls or the websocket). A request marked already and in no tier costs
-- the HMGET only.
-- KEYS: 1 req hash. ARGV: 1 the request's key tag "{P}", 2 request id (both absent from an
-- older caller: only the mark). Returns 1 when marked, 0 when the request is not stored.
local h = redis.call('HMGET', KEYS[1], 'seq', 'fk', 'pt', 'anon', 'trk')
if not h[1] and redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local pt = h[3]
if h[2] == '1' and (not pt or pt == '') then
  return 1 -- marked already, in no tier: nothing to write
end
if h[2] ~= '1' then
  redis.call('HSET', KEYS[1], 'fk', '1')
end
local tag, id = ARGV[1], ARGV[2]
if tag and id and pt and pt ~= '' and (h[4] ~= '1' or h[5] == '1') and
   redis.call('EXISTS', tag .. ':feedok') == 1 then
  local tiers = {u = tag .. ':pollu', a = tag .. ':poll', s = tag .. ':polls', n = tag .. ':polln'}
  if tiers[pt] then
    redis.call('ZREM', tiers[pt], id)
    redis.call('HSET', KEYS[1], 'pt', '')
  end
end
return 1
