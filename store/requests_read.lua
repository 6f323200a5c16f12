-- requests_read.lua - the REST view of several requests at once (read only, one snapshot).
-- KEYS: one {P}:req:<id> hash per request. ARGV: none.
-- Returns one array per key: {rec, seq, status, meta, first, trk, src, watch,
-- wu} (nil when absent; values whole: a packed hash's chunks joined, chunk_lib.lua).
-- #include chunk_lib.lua
local out = {}
for i = 1, #KEYS do
  out[i] = chunks.hmget(KEYS[i], {'rec', 'seq', 'status', 'meta', 'first', 'trk', 'src',
                                  'watch', 'wu'})
end
return out
