-- rec_lib.lua - the record pass's rewrite of an ended watch's hash (store/rec.h "The compact
-- hash"; rec_put.lua after deflating its record, rec_scan.lua for one deflated before).
-- relay/common/embed.pl pastes this file where a script has the line
-- "-- #include rec_lib.lua", after chunk_lib.lua.

-- The fields an ended watch no longer needs, dropped by the rewrite (a request watched again
-- writes them as before, store/watch_lib.lua watch_move): its empty watch deadline and poll
-- tier ("wu", "pt": written "" when the watch ended, read only as "unset").
local function rec_drop(f, v)
  return (f == 'wu' or f == 'pt') and v == ''
end

-- The hash k of an ended watch (phase) whose record rec is deflated ('r'), no typed event
-- waiting (rzev) and not packed yet (c: its "ck"): packed (chunk_lib.lua chunks.pack).
local function rec_repack(k, rec, phase, rzev, c)
  if rec and string.byte(rec) == 114 and phase ~= 'active' and phase ~= 'settled' and
     not rzev and not c then
    return chunks.pack(k, rec_drop)
  end
  return false
end
