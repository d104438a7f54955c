-- busy_alone.lua: acquire.lua's answer for a lock another owner holds, read
-- from the holds' key alone, for a lock whose Cluster slot is being migrated
-- (see renew_alone.lua: no script that declares every key of the lock runs
-- until the migration ends). It takes nothing and registers no waiter: when
-- the lock may be free, or held by the caller, it answers TRYAGAIN, and the
-- caller tries the full script again. KEYS[1]: the holds (see
-- prelude/1-layout.lua).
--
-- ARGV[1] kind: the kind asked for: x, s or m (semaphore)
-- ARGV[2..] owners: the caller's owner digest and its ancestors' (re-entry)
--
-- Returns acquire.lua's reply for a lock that is taken, with an empty outbox
-- and no next waiters:
-- REPLY done {reply, outbox, next}
-- REPLY taken {0, wait_ms, holder, place?}: wait_ms until the soonest of the
--   holds' leases ends, place false;
-- REPLY holder {host, pid, command, held_ms, note?, earlier?}: one holder (or
--   false), never earlier.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function tryagain()
    return redis.error_reply('TRYAGAIN the lock\'s slot is being migrated')
end
local mine = {}
for i = 2, #ARGV do mine[ARGV[i]] = true end
local flat = redis.call('HGETALL', KEYS[1])
local wait, holder, blocks = nil, false, false
for i = 1, #flat, 2 do
    local ends, kind, info = string.match(flat[i + 1], '^%d+|(%d+)|(%a)%d*|(.*)$')
    ends = tonumber(ends)
    if ends and ends > now then
        if mine[flat[i]] then return tryagain() end
        -- Only an exclusive hold, or any hold against an exclusive request,
        -- is sure to be in the way (shared holds and semaphores may admit us).
        if kind == 'x' or ARGV[1] == 'x' then blocks = true end
        wait = math.min(wait or ends - now, ends - now)
        if not holder then
            local ok, h = pcall(cjson.decode, info)
            if ok and type(h) == 'table' then
                holder = {tostring(h.host or ''), tostring(h.pid or ''), tostring(h.command or ''),
                    math.max(0, now - (tonumber(h.since) or now)), tostring(h.note or '')}
            end
        end
    end
end
if not blocks then return tryagain() end
return {{0, wait, holder, false}, {}, {}}
