-- renew.lua: extend a hold's lease (the watchdog's renewal). KEYS: see prelude/1-layout.lua.
--
-- ARGV[1] owner: the owner digest
-- ARGV[2] lease_ms: the lease in ms
-- ARGV[3] exact: "exact" (optional): the lease lasts exactly ARGV[2] ms from
--         now, even when that shortens it (the caller saw the server's clock
--         step back, which made every lease on the server longer), unless the
--         hold was re-entered (a nested run may need the longer lease)
--
-- REPLY done {reply, outbox, next}: through done() in prelude/1-layout.lua,
-- with the outbox, and the waiters first in line when it holds; reply is
-- REPLY renewed {held, now}: held 1 when ARGV[1] still holds the lock (its
--   lease now lasts at least ARGV[2] ms from the moment the server ran this
--   script), 0 when it does not (released, forced, flushed, or its lease ran
--   out); now is the server's clock in ms, by which the caller tells a step
--   of that clock.
-- Only lengthens (unless "exact"): a nested holder with a shorter lease never
-- cuts an enclosing holder's lease short.

local H, refused = begin(acl_refusal)
if not H then return refused end
H.prune()
local h = H.find(ARGV[1])
if not h then
    return done({0, NOW})
end
local until_ms = NOW + tonumber(ARGV[2])
-- Exact only for a hold held once: a nested run renews the same hold, and
-- its shorter lease must not cut the enclosing run's short.
if h.ends < until_ms or (ARGV[3] == 'exact' and h.count == 1 and h.ends ~= until_ms) then
    h.ends = until_ms
    H.store(h)
end
H.settle()
return done({1, NOW}, H.next_waiters())
