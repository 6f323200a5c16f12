-- budget_give.lua - give calls taken by budget_take.lua and not used back to the shared
-- upstream budget (budget_lib.lua; never above the burst).
-- KEYS: 1 budget bucket {P}:budget. ARGV: 1 now ms, 2 calls given back, 3 budget per minute
-- Returns the whole tokens now available.
-- #include budget_lib.lua
local now = tonumber(ARGV[1])
local b = bucket_read(KEYS[1], now, tonumber(ARGV[3]))
bucket_write(KEYS[1], now, b, -tonumber(ARGV[2]))
return math.floor(math.min(b.burst, b.tokens + tonumber(ARGV[2])))
