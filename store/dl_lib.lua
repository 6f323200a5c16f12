-- dl_lib.lua - deleting a delivery record together with the one key only the record names:
-- its order set {P}:order:<wh>:<rid> (the request id is a field of the record; once the
-- record is gone nothing leads to the order set). Shared by wh_claim.lua (a deleted
-- endpoint's queue) and wh_gc.lua (the purge of a deleted endpoint). relay/common/embed.pl
-- pastes this file where a script has the line "-- #include dl_lib.lua"; the script defines
-- the local tag (the partition's key prefix) before that line.
local function dl_delete(wh, did)
  local dl = tag .. ':dl:' .. did
  local rid = redis.call('HGET', dl, 'rid')
  if rid then
    redis.call('DEL', tag .. ':order:' .. wh .. ':' .. rid)
  end
  redis.call('DEL', dl)
end
