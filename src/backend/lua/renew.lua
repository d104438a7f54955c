-- renew.lua: extend a hold's lease (the watchdog's renewal). KEYS: see common.lua.
--
-- ARGV[1] owner token
-- ARGV[2] lease in ms
--
-- Returns (as common.lua's done(): the outbox, and the waiters first in
-- line when it holds) 1 when ARGV[1] still holds the lock (its lease now lasts at least
-- ARGV[2] ms from the moment the server ran this script), 0 when it does not
-- (released, forced, flushed, or its lease ran out). Only lengthens: a nested
-- holder with a shorter lease never cuts an enclosing holder's lease short.

clock()
local H = helpers()
local refused = acl_refusal()
if refused then return refused end
H.prune()
if redis.call('HEXISTS', K_LOCK, ARGV[1]) == 0 then
    return done(0)
end
local until_ms = NOW + tonumber(ARGV[2])
local current = tonumber(redis.call('ZSCORE', K_LEASES, ARGV[1]) or '0')
if current < until_ms then redis.call('ZADD', K_LEASES, digits(until_ms), ARGV[1]) end
H.settle()
return done(1, H.next_waiters())
