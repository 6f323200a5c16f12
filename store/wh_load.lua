-- wh_load.lua - read every webhook endpoint with the endpoints version, atomically.
-- KEYS: 1 endpoint index zset, 2 endpoints version
-- ARGV: 1 tag
-- Returns {version, {id, field, value, ...}, ...}.
local out = {redis.call('GET', KEYS[2]) or '0'}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local h = redis.call('HGETALL', ARGV[1] .. ':wh:' .. id)
  if #h > 0 then
    table.insert(h, 1, id)
    out[#out + 1] = h
  end
end
return out
