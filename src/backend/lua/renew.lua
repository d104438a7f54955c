-- renew.lua: extend a hold's lease (the watchdog's renewal). KEYS: see prelude/1-layout.lua.
--
-- ARGV[1] owner token
-- ARGV[2] lease in ms
--
-- Returns (through done() in prelude/1-layout.lua: the outbox, and the waiters first in
-- line when it holds) 1 when ARGV[1] still holds the lock (its lease now lasts at least
-- ARGV[2] ms from the moment the server ran this script), 0 when it does not
-- (released, forced, flushed, or its lease ran out). Only lengthens: a nested
-- holder with a shorter lease never cuts an enclosing holder's lease short.

local H, refused = begin(acl_refusal)
if not H then return refused end
H.prune()
local h = H.find(ARGV[1])
if not h then
    return done(0)
end
local until_ms = NOW + tonumber(ARGV[2])
if h.ends < until_ms then
    h.ends = until_ms
    H.store(h)
end
H.settle()
return done(1, H.next_waiters())
