-- feed_mark.lua - a request the changes feed returned is "of the key" (req field fk = "1"):
-- while the feed is healthy the poll claims skip it (store/poll_claim.lua, poll_take.lua).
-- KEYS: 1 req hash. Returns 1 when marked, 0 when the request is not stored.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'fk', '1')
return 1
