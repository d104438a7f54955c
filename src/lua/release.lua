-- release.lua: give up one hold; when the owner's count reaches zero its hold
-- ends and the waiters that can now acquire are woken. KEYS: see common.lua.
--
-- ARGV[1] owner token
--
-- Returns -1 when ARGV[1] does not hold the lock (nothing changed), otherwise
-- the owner's hold count left (0 = its hold ended).

local refused = acl_refusal()
if refused then return refused end
prune()
local held = tonumber(redis.call('HGET', K_LOCK, ARGV[1]))
if not held then
    return -1
end
if held > 1 then
    return redis.call('HINCRBY', K_LOCK, ARGV[1], -1)
end
drop_holder(ARGV[1])
-- Nothing more will be handed to this token.
redis.call('DEL', K_MINE)
wake()
settle()
return 0
