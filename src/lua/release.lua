-- release.lua: give up one hold; at zero free the lock and wake one waiter.
--
-- KEYS[1] lock     hash  owner-token -> hold count
-- KEYS[2] holders  hash  owner-token -> holder metadata
-- KEYS[3] waiters  zset  owner-token -> registration expiry (server ms)
-- KEYS[4] wake     list  at most one wake-up token
-- ARGV[1] owner token
-- ARGV[2] how long an unconsumed wake-up token may live, in ms
--
-- Returns -1 when ARGV[1] does not hold the lock (nothing changed), otherwise
-- the hold count left (0 = the lock is free now).
--
-- Wakes one waiter, not all: it pushes a single token to KEYS[4], and only when a
-- live waiter is registered and no token is pending. A waiter blocks on KEYS[4]
-- with BLPOP, so exactly one of them receives it (no thundering herd).

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
    return -1
end
local count = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if count > 0 then
    return count
end
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], ARGV[1])

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if redis.call('ZCARD', KEYS[3]) > 0 and redis.call('LLEN', KEYS[4]) == 0 then
    redis.call('RPUSH', KEYS[4], '1')
    redis.call('PEXPIRE', KEYS[4], tonumber(ARGV[2]))
end
return 0
