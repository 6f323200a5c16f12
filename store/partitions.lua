-- partitions.lua - the deployment's partition count and tag scheme (docs/partitions.md),
-- checked by the store once per connection before it reports ready (store/store.c).
-- KEYS: 1 the deployment record {P}:config (hash), 2.. keys that exist only in a deployment
--       laid out with one partition ({P}:ct, {P}:events, an older version's {P}:all, ...: same
--       slot as KEYS[1])
-- ARGV: 1 the count this process runs with (STATUSRELAY_PARTITIONS)
--       2 the suffix a new record gets: "/spread" (the spread tags {P:p<k>.<x>})
-- A recorded value is returned as it is: "<N>" is a deployment recorded before the spread
-- tags (it keeps the plain tags {P:p<k>}), "<N>/spread" one recorded since (a process of an
-- older version refuses it: it is no count to it). Without a record, a 1-partition
-- deployment (today's layout) writes nothing and gets "1"; a count above 1 gets "1" when
-- 1-partition data exists (refused by the caller, nothing written), else records itself
-- (HSETNX: of two processes racing on an empty Redis the first one wins, the other reads it
-- back).
local rec = redis.call('HGET', KEYS[1], 'partitions')
if rec then
    return rec
end
if ARGV[1] == '1' then
    return '1'
end
for i = 2, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then
        return '1'
    end
end
redis.call('HSETNX', KEYS[1], 'partitions', ARGV[1] .. (ARGV[2] or ''))
return redis.call('HGET', KEYS[1], 'partitions')
