-- wh_held.lua - before the fan-out makes the first attempts of a batch itself: check that
-- it matched against the current endpoint set, and which (endpoint, request) pairs are held
-- back because an earlier delivery of the request to that endpoint is unfinished (its order
-- set exists: retrying, queued, or in flight). A held pair is recorded as pending by
-- wh_fanout.lua instead, so per-request order per endpoint holds.
-- KEYS: 1 endpoints version (several partitions: a key of the partition, not read)
-- ARGV: 1 tag, 2 endpoints version the caller matched against ("*": not checked here),
--       then pairs (endpoint id, request id)
-- Returns {-1, version} when the endpoint set changed, else {1, flags}: one character per
-- pair, "1" held, "0" free.
-- ARGV[1] is the partition's tag, or "<partition tag> <deployment tag> <endpoint view>" in a
-- deployment with several partitions (docs/partitions.md; the view: wh_lib.lua)
-- #include keys_lib.lua
local tag, dtag, vs = string.match(ARGV[1], '^(%S+) (%S+) ?(.*)$')
if not tag then
  tag, dtag, vs = ARGV[1], ARGV[1], ''
end
if ARGV[2] ~= '*' then -- "*": several partitions, the caller read the version itself
  local ver = redis.call('GET', KEYS[1]) or '0'
  if ver ~= ARGV[2] then
    return {-1, ver}
  end
end
-- one EXISTS for every pair first (chunks of 1000 keys): when no order set exists (the common
-- case: nothing of these requests unfinished) every pair is free, without a call per pair
local ks = {}
for i = 3, #ARGV, 2 do
  ks[#ks + 1] = tag .. ':order:' .. ARGV[i] .. ':' .. ARGV[i + 1]
end
if not any_exists(ks) then
  return {1, string.rep('0', #ks)}
end
local flags = {}
for i = 1, #ks do
  flags[i] = redis.call('EXISTS', ks[i]) == 1 and '1' or '0'
end
return {1, table.concat(flags)}
