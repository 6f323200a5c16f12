-- wh_put.lua - create or update a webhook endpoint and bump the endpoints version (every
-- process reloads its copy of the endpoint set when the version moves).
-- KEYS: 1 endpoint hash, 2 endpoint index zset, 3 endpoints version
-- ARGV: 1 endpoint id, 2 "create" | "update", 3 now ms, then field/value pairs; a value of
--       "\0del" deletes the field
-- Returns the new version, or 0 when updating an endpoint that does not exist (or creating
-- one that does).
local exists = redis.call('EXISTS', KEYS[1]) == 1
if (ARGV[2] == 'create') == exists then
  return 0
end
for i = 4, #ARGV, 2 do
  if ARGV[i + 1] == '\0del' then
    redis.call('HDEL', KEYS[1], ARGV[i])
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
if ARGV[2] == 'create' then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
end
return redis.call('INCR', KEYS[3])
