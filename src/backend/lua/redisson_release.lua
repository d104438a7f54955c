-- redisson_release.lua: Redisson's unlock (unlockInnerAsync): drop one hold;
-- at zero delete the lock and publish Redisson's unlock message (0) on its
-- channel, which wakes Redisson's waiters and rlock's alike.
--
-- On a Cluster it also publishes with SPUBLISH: Redisson on a Redis 7
-- Cluster subscribes with SSUBSCRIBE (its default shardedSubscriptionMode),
-- older Redisson versions and other modes with SUBSCRIBE. (redis.pcall: a
-- server before 7 has no SPUBLISH, and nobody there listens for it.)
--
-- KEYS[1] NAME   KEYS[2] redisson_lock__channel:{NAME}
-- ARGV[1] field: the owner field
-- ARGV[2] sharded: '1' on a Cluster
-- Returns -1 when the field does not hold the lock, else the count left.

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
    return -1
end
local count = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if count > 0 then
    return count
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], 0)
if ARGV[2] == '1' then
    redis.pcall('SPUBLISH', KEYS[2], 0)
end
return 0
