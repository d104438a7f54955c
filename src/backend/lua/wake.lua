-- wake.lua: delivers the messages another script could not (its outbox: they
-- were for wake-up lists it was not given). KEYS: see prelude/1-layout.lua; KEYS[10..]
-- are the lists of the waiters named in ARGV.
--
-- ARGV[1..] outbox: digest, message, digest, message, ... as an outbox holds them.
--
-- Returns the number of messages delivered. Each is checked against the lock
-- as it is now, since the script that wrote it ran: a wake-up ("w") only for
-- a waiter still registered (its list lives as long as the registration); a
-- handoff ("g<fence>...") only to the holder of that fence (its list lives as
-- long as that lease); "d" (the holder's hold was ended) empties the list.
-- A list not among KEYS is never touched.

local H, unread = begin()
if not H then return unread end
local sent = 0
for i = 1, #ARGV - 1, 2 do
    local token, message = ARGV[i], ARGV[i + 1]
    local kind = string.sub(message, 1, 1)
    local ms
    if kind == 'w' then
        ms = tonumber(redis.call('ZSCORE', K_WEXP, token))
    elseif kind == 'g' then
        local fence = string.match(message, '^g(%d+)')
        local held = H.find(token)
        if fence and held and string.find(held.info, '"fence":"' .. fence .. '"', 1, true) then
            ms = held.ends
        end
    elseif kind == 'd' then
        ms = NOW + 1
    end
    if ms and ms > NOW then
        H.send(token, message, ms - NOW)
        sent = sent + 1
    end
end
return sent
