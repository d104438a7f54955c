-- force.lua: `release --force`: end every hold of the lock, whoever owns it,
-- and wake the waiters that can now acquire. KEYS: see common.lua.
--
-- Returns (as common.lua's done(), with the outbox) the number of holds removed (0: nothing held the lock). A removed
-- holder's next renewal finds it gone (renew.lua returns 0), so its `rlock
-- run` stops COMMAND and exits 70.

clock()
local H = helpers()
local foreign = foreign_key() or acl_refusal()
if foreign then return foreign end

H.prune()
local holders = redis.call('HKEYS', K_LOCK)
for _, token in ipairs(holders) do H.drop_holder(token) end
H.wake()
H.settle()
return done(#holders)
