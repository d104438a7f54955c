-- leave.lua: a waiter gives up (wait elapsed, signal) and leaves nothing
-- behind. KEYS: see prelude/1-layout.lua (KEYS[7] is the leaving waiter's list).
--
-- ARGV[1] waiter: the waiter's owner digest
--
-- REPLY done {reply, outbox, next}: through done() in prelude/1-layout.lua,
-- with the outbox; reply is 1. Waiters its departure unblocks (it was an
-- exclusive request ahead of shared ones, or it had consumed a wake-up) are
-- woken. A hold it was
-- handed while giving up (see admit in prelude/5-helpers.lua) is given back: the waiter
-- never ran anything under it.

local H, refused = begin(acl_refusal)
if not H then return refused end
H.prune()
H.drop_holder(ARGV[1])
H.drop_waiter(ARGV[1])
H.wake()
H.settle()
return done(1)
