-- renew_alone.lua: renew.lua's work on the holds' key alone, for a lock whose
-- Cluster slot is being migrated. The importing node serves a script that
-- declares several keys only when it has every one of them (else TRYAGAIN),
-- and the migrating node only when it has all or none: rlock's scripts
-- declare every key of the lock, most of which do not exist, so none runs
-- until the migration ends. A script that declares the holds' key alone
-- runs wherever that key is (sent after ASKING). No waiter is pruned or
-- woken here (their keys may be on the other node): the next full renewal
-- does that. KEYS[1]: the holds (see prelude/1-layout.lua).
--
-- ARGV[1] owner: the owner digest
-- ARGV[2] lease_ms: the lease in ms
-- ARGV[3] exact: "exact" (optional): as renew.lua's
--
-- Returns renew.lua's reply, with an empty outbox and no next waiters:
-- REPLY done {reply, outbox, next}
-- REPLY renewed {held, now}: held 1 when ARGV[1] still holds the lock (its
--   lease now lasts at least ARGV[2] ms from now), 0 when it does not; now is
--   the server's clock in ms.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function reply(held)
    return {{held, now}, {}, {}}
end
local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value then return reply(0) end
local count, ends, rest = string.match(value, '^(%d+)|(%d+)|(.*)$')
if not count or tonumber(ends) <= now then return reply(0) end
local ms = tonumber(ARGV[2])
local until_ms = now + ms
if tonumber(ends) < until_ms
    or (ARGV[3] == 'exact' and tonumber(count) == 1 and tonumber(ends) ~= until_ms) then
    redis.call('HSET', KEYS[1], ARGV[1], count .. '|' .. string.format('%d', until_ms) .. '|' .. rest)
    -- The key lives as long as the longest lease: lengthened here, or
    -- (exact) set to the longest of the holds' leases.
    if ARGV[3] == 'exact' then
        local last = until_ms
        local flat = redis.call('HGETALL', KEYS[1])
        for i = 2, #flat, 2 do
            local e = tonumber(string.match(flat[i], '^%d+|(%d+)|'))
            if e and e > last then last = e end
        end
        redis.call('PEXPIRE', KEYS[1], string.format('%d', last - now))
    elseif redis.call('PTTL', KEYS[1]) < ms then
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
    end
end
return reply(1)
