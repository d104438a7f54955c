-- redisson_renew.lua: Redisson's watchdog renewal (renewExpirationAsync), but
-- never shortening a lease a nested holder set longer.
--
-- KEYS[1] NAME
-- ARGV[1] lease_ms: the lease in ms
-- ARGV[2] field: the owner field
-- Returns 1 when the field still holds the lock, else 0.

if redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then
    if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('PEXPIRE', KEYS[1], ARGV[1])
    end
    return 1
end
return 0
