-- renew.lua: extend a hold's lease (the watchdog's renewal).
--
-- KEYS[1] lock     hash  owner-token -> hold count
-- KEYS[2] holders  hash  owner-token -> holder metadata
-- ARGV[1] owner token
-- ARGV[2] lease in ms
--
-- Returns 1 when ARGV[1] still holds the lock (its lease now lasts at least
-- ARGV[2] ms from the moment the server ran this script), 0 when it does not.
-- Only lengthens: a nested holder with a shorter lease never cuts an outer
-- holder's lease short.

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
    return 0
end
local ttl = tonumber(ARGV[2])
for i = 1, 2 do
    if redis.call('PTTL', KEYS[i]) < ttl then
        redis.call('PEXPIRE', KEYS[i], ttl)
    end
end
return 1
