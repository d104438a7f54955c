-- force.lua: `release --force`: end every hold of the lock, whoever owns it,
-- and wake the waiters that can now acquire. KEYS: see prelude/1-layout.lua.
--
-- No ARGV.
--
-- REPLY done {reply, outbox, next}: through done() in prelude/1-layout.lua,
-- with the outbox; reply is the number of holds removed (0: nothing held the
-- lock). A removed holder's next renewal finds it gone (renew.lua's held is
-- 0), so its `rlock run` stops COMMAND and exits 70.

local H, refused = begin(function() return foreign_key() or acl_refusal() end)
if not H then return refused end
local holds = H.holds
-- An earlier rlock's hold is its own: this layout neither reads its owners
-- nor deletes its keys.
if EARLIER then
    return redis.error_reply('EARLIER the lock is held by an earlier rlock version; ' ..
        'that version\'s `release --force` removes it, or it ends with its lease')
end
H.prune()
local n = #holds
while #holds > 0 do H.drop_holder(holds[1].token) end
H.wake()
H.settle()
return done(n)
