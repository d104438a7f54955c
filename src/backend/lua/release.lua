-- release.lua: give up one hold; when the owner's count reaches zero its hold
-- ends and the waiters that can now acquire are woken. KEYS: see prelude/1-layout.lua.
--
-- ARGV[1] owner: the owner digest
-- ARGV[2] history_cap: the history cap (0 or absent: none)
-- ARGV[3..] event: the event's fields, recorded in KEYS[8] when the hold ends
--         (see add_event); or, after a cap of 0, "retract" and the id of the
--         hold's `acquired` event, which goes (a hold given back in the round
--         that took it: no run held it), or "fence:N" for the event of a hold
--         a release handed over, found by its fence
--
-- REPLY done {reply, outbox, next}: through done() in prelude/1-layout.lua,
-- with the outbox; reply is -1 when ARGV[1] does not hold the lock (nothing
-- changed), otherwise the owner's hold count left (0 = its hold ended).

local token = ARGV[1]

-- The fast path: nobody waits, and the caller is the only holder, once: its
-- hold ends and every key of the lock but the fence goes, as prune(), wake()
-- and settle() below would have it, in three commands. Its lease has not run
-- out, since Redis has not expired the holds' key: it is given the life of
-- its longest lease (here the caller's own) by every script that changes a
-- lease. (PEXPIRE counts from when it runs, a few microseconds after the
-- script read TIME: the key may outlive the lease by that much, a margin far
-- inside the one the holder keeps on its own clock.) One write and nothing
-- before it, so no ACL check first: a refused DEL writes nothing, and is
-- reported as the check would have. HGETALL is read with redis.pcall: a key
-- of another type (an earlier rlock's hold) takes the path below.
if redis.call('EXISTS', K_WAITERS, K_XWAIT, K_WEXP, K_WKIND) == 0 then
    local held = redis.pcall('HGETALL', K_HOLDS)
    if #held == 2 and held[1] == token and string.match(held[2], '^1|%d+|%a%d*|') then
        local dropped = redis.pcall('DEL', K_HOLDS, K_MINE)
        if type(dropped) == 'table' and string.find(dropped.err or '', '^NOPERM') then
            return redis.error_reply('NOPERM rlock: the user may not run DEL on ' .. K_HOLDS ..
                ', which this lock needs; nothing was written')
        end
        if type(dropped) == 'table' then return dropped end
        add_event(2, nil)
        return done(0)
    end
end

local H, refused = begin(acl_refusal)
if not H then return refused end
H.prune()
local h = H.find(token)
if not h then
    return done(-1)
end
if h.count > 1 then
    h.count = h.count - 1
    H.store(h)
    return done(h.count)
end
-- (Its wake-up list goes too: nothing more will be handed to this token.)
H.drop_holder(token)
-- First the release, then the holds it hands over.
add_event(2, nil)
H.wake()
H.settle()
return done(0)
