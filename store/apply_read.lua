-- apply_read.lua - the last-known states of a batch of requests of one partition
-- (store/apply.c: the observations the process's cache could not decide).
-- KEYS: req hashes. Returns their "rec" fields in the same order (false where none).
local r = {}
for i = 1, #KEYS do
  r[i] = redis.call('HGET', KEYS[i], 'rec') or false
end
return r
