-- wh_health.lua - apply the endpoint health outcomes that the delivery scripts of a
-- deployment with several partitions handed back (wh_lib.lua: a partition script touches its
-- own slot only; endpoint hashes are deployment keys): a failure starts or continues an
-- endpoint's failing period and disables it after the disable-after time or on 410 (gone),
-- bumping the endpoints version; an "ok" ends the failing period. The same steps a
-- 1-partition deployment takes inside wh_fanout.lua / wh_done.lua (note_outcome).
-- KEYS: 1 endpoints version {P}:whv
-- ARGV: 1 deployment tag "{P}", 2 now ms, 3 disable after ms, then pairs (endpoint id,
--       outcome: retry | dead | gone | ok), in the order the attempts were recorded
-- An endpoint disabled here queues its endpoint.disabled record in {P}:wdisq (wh_lib.lua),
-- which store/wh_disabled.lua then writes into a partition's stream.
-- Returns a flat list of (endpoint id, reason) pairs of endpoints disabled now.
local tag, dtag, vs = ARGV[1], ARGV[1], ''
local now = tonumber(ARGV[2])
local disable_after = tonumber(ARGV[3])
local ttl = 0
local disabled = {}

-- #include wh_lib.lua
disabled_outbox = dtag .. ':wdisq'

for i = 4, #ARGV, 2 do
  local wh, outcome = ARGV[i], ARGV[i + 1]
  if outcome == 'ok' then
    note_healthy(wh)
  else
    note_outcome(wh, outcome, KEYS[1], disable_after, disabled)
  end
end
return disabled
