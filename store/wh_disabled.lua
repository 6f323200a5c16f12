-- wh_disabled.lua - write one queued endpoint.disabled record (store/wh_health.lua put it in
-- the deployment's outbox {P}:wdisq, several partitions only) into the event stream of the
-- webhook id's partition, once: a dedupe key per record (its SHA-1) in that partition's slot
-- makes a second run (a crash before the caller removed the entry, two processes flushing the
-- outbox at once) write nothing. The caller then removes the entry from the outbox (LREM).
-- KEYS: 1 the partition's events stream. ARGV: 1 the partition's tag, 2 webhook id, 3 record
-- (its "seq": the entry's seq).
-- Returns 1 when written now, 0 when it had been written before.
local dk = ARGV[1] .. ':wdis:' .. redis.sha1hex(ARGV[3])
if not redis.call('SET', dk, '1', 'NX', 'EX', 604800) then
  return 0
end
local seq = string.match(ARGV[3], '"seq":(%d+)') or '1'
redis.call('XADD', KEYS[1], '*', 'rid', ARGV[2], 'seq', seq, 'type', 'endpoint.disabled', 'rec',
           ARGV[3])
return 1
