-- release.lua: give up one hold; when the owner's count reaches zero its hold
-- ends and the waiters that can now acquire are woken. KEYS: see common.lua.
--
-- ARGV[1] owner token
--
-- Returns -1 when ARGV[1] does not hold the lock (nothing changed), otherwise
-- the owner's hold count left (0 = its hold ended).

prune()
if redis.call('HEXISTS', K_LOCK, ARGV[1]) == 0 then
    settle()
    return -1
end
local count = redis.call('HINCRBY', K_LOCK, ARGV[1], -1)
if count > 0 then
    return count
end
drop_holder(ARGV[1])
-- Nothing more will be handed to this token.
redis.call('DEL', K_MINE)
wake()
settle()
return 0
