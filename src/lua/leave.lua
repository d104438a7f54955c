-- leave.lua: a waiter gives up (wait elapsed, signal) and leaves nothing behind.
--
-- KEYS[1] lock       hash  owner-token -> hold count
-- KEYS[2] waiters    zset  owner-token -> registration expiry (server ms)
-- KEYS[3] wake       list  at most one wake-up token
-- KEYS[4] interrupt  list  this waiter's private interrupt list
-- ARGV[1] the waiter's owner token
-- ARGV[2] how long a passed-on wake-up token may live, in ms
--
-- Returns 1. If the lock is free and other waiters remain, a wake-up this
-- waiter may have consumed is passed on, so its departure never strands them.

redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[4])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) == 0 then
    redis.call('DEL', KEYS[3])
elseif redis.call('EXISTS', KEYS[1]) == 0 and redis.call('LLEN', KEYS[3]) == 0 then
    redis.call('RPUSH', KEYS[3], '1')
    redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[2]))
end
return 1
