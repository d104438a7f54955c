-- redisson_renew.lua: Redisson's watchdog renewal (renewExpirationAsync), but
-- never shortening a lease a nested holder set longer, and reading the
-- server's clock for the renewing holder to tell a step of it.
--
-- KEYS[1] NAME
-- ARGV[1] lease_ms: the lease in ms
-- ARGV[2] field: the owner field
-- ARGV[3] exact: "exact" (optional): the lease lasts exactly ARGV[1] ms from
--   now, even if that shortens it (after the server's clock stepped back)
--
-- REPLY renewed {held, now}: held 1 when the field still holds the lock, else
--   0; now is the server's clock in ms.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
    if ARGV[3] == 'exact' or redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('PEXPIRE', KEYS[1], ARGV[1])
    end
    return {1, now}
end
return {0, now}
