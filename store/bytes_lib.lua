-- bytes_lib.lua - included by the page scripts that resume after a cursor (a line
-- "-- #include bytes_lib.lua"): zset members of one score sort by bytes (memcmp), which Lua's
-- locale-dependent string comparison does not promise.
-- bytes_after(a, b): a sorts after b in byte order.
local function bytes_after(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x > y
    end
  end
  return #a > #b
end
