-- req_get.lua - HMGET of one request hash {P}:req:<id> with whole values: a hash the record
-- pass packed keeps values over 64 B in chunks (chunk_lib.lua), joined here (store/requests.c
-- store_request_get, store/history.c store_history_record).
-- KEYS: 1 the hash. ARGV: the field names. Returns their values in order (nil when absent).
-- #include chunk_lib.lua
return chunks.hmget(KEYS[1], ARGV)
