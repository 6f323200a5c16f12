-- leader_release.lua - give the lease up on shutdown (only if still ours).
-- KEYS: 1 leader key, 2 ws-health key. ARGV: 1 instance id.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
return 0
