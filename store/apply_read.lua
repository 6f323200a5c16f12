-- apply_read.lua - the last-known states of a batch of requests of one partition
-- (store/apply.c: the observations the process's cache could not decide).
-- KEYS: req hashes. Returns their "rec" fields in the same order (false where none), whole
-- (a packed hash's chunks joined: chunk_lib.lua).
-- #include chunk_lib.lua
local r = {}
for i = 1, #KEYS do
  r[i] = chunks.get(KEYS[i], 'rec') or false
end
return r
