-- budget_take.lua - take up to ARGV[2] calls from the shared upstream budget (budget_lib.lua),
-- for the polls of a deployment with several partitions: the poller then claims that many
-- due polls partition by partition (store/poll_take.lua) and gives back what it did not use
-- (store/budget_give.lua).
-- KEYS: 1 budget bucket {P}:budget. ARGV: 1 now ms, 2 calls wanted, 3 budget per minute
-- Returns {calls granted, calls that were available (whole tokens, before taking)}.
-- With more than one token the round leaves one in the bucket: a round holds what it took
-- until its budget_give.lua, and the single calls reserved meanwhile (changes feed and gap
-- pages, reads: store/poll_claim.lua with "only reserve") must not find it empty every time.
-- #include budget_lib.lua
local now = tonumber(ARGV[1])
local b = bucket_read(KEYS[1], now, tonumber(ARGV[3]))
local avail = math.floor(b.tokens)
-- A reservation that found the bucket empty waits ({P}:budgetw, poll_claim.lua): the round
-- leaves it one call whatever the tokens.
local keep = (avail > 1 or redis.call('EXISTS', KEYS[1] .. 'w') == 1) and 1 or 0
local g = math.max(0, math.min(tonumber(ARGV[2]), avail - keep))
bucket_write(KEYS[1], now, b, g)
return {g, avail}
