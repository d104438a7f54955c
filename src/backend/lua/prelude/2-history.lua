-- prelude/2-history.lua: the lock's history stream (`rlock history`).

-- The lock's history (K_HISTORY, written only when the caller passed a cap):
-- a stream capped at `cap` entries (exact MAXLEN: `~` trims only whole nodes
-- of 100 entries, so a cap of 5 would keep 100; trimming one entry off a small
-- stream costs next to nothing). `fields`: the event's field/value pairs. One
-- command per event: XADD NOMKSTREAM, which adds only to a stream that exists.
-- A missing one (or a server before 6.2, which knows no NOMKSTREAM) is created
-- with its expiry, so a holder that dies before its release leaves nothing for
-- good. The expiry (HISTORY_IDLE) is restarted by the first fence handed out
-- on each UTC day (NEW_DAY, set by note_day): one PEXPIRE a day rather than one
-- per release, and still at least 30 days past the last event. With
-- redis.pcall: a refused or failed write (a user without XADD, a key of
-- another type) costs the event, never the hold, and the expiry is set only on
-- a stream this script just wrote.
local HISTORY_IDLE = '2678400000'
local DAY_US = 86400000000
local NEW_DAY = false

local function history_add(cap, fields)
    local added = redis.pcall('XADD', K_HISTORY, 'NOMKSTREAM', 'MAXLEN', cap, '*',
        unpack(fields))
    if type(added) == 'string' then
        if NEW_DAY then
            redis.pcall('PEXPIRE', K_HISTORY, HISTORY_IDLE)
            NEW_DAY = false
        end
        return added
    end
    added = redis.pcall('XADD', K_HISTORY, 'MAXLEN', cap, '*', unpack(fields))
    if type(added) == 'string' then
        redis.pcall('PEXPIRE', K_HISTORY, HISTORY_IDLE)
        return added
    end
    return nil
end

-- Removes the entry `what` names: its id, or "fence:N", the `acquired` event
-- of the hold with fence N, which the release that handed the hold over
-- wrote without telling the new holder its id (among the last events: the
-- hold is given back as soon as its grant is read).
local function retract(what)
    local fence = string.match(what, '^fence:(%d+)$')
    if not fence then
        redis.pcall('XDEL', K_HISTORY, what)
        return
    end
    local last = redis.pcall('XREVRANGE', K_HISTORY, '+', '-', 'COUNT', 32)
    if type(last) ~= 'table' or last.err then return end
    for _, entry in ipairs(last) do
        local fields, event, its = entry[2], nil, nil
        for i = 1, #fields, 2 do
            if fields[i] == 'event' then event = fields[i + 1] end
            if fields[i] == 'fence' then its = fields[i + 1] end
        end
        if event == 'acquired' and its == fence then
            redis.pcall('XDEL', K_HISTORY, entry[1])
            return
        end
    end
end

-- The caller's event: when it passed a cap in ARGV[at] (not 0 or absent),
-- the field/value pairs in ARGV[at + 1] on, and the fence when given.
-- Returns the entry's id (nil when nothing was written). A cap of 0 followed
-- by "retract" and an id removes that entry instead, and by "retract" and
-- "fence:N" the `acquired` event of the hold with fence N (see release.lua).
local function add_event(at, fence)
    local cap = ARGV[at]
    if cap == '0' and ARGV[at + 1] == 'retract' and ARGV[at + 2] then
        retract(ARGV[at + 2])
        return nil
    end
    if not cap or cap == '0' then return nil end
    local fields = {}
    for i = at + 1, #ARGV do fields[#fields + 1] = ARGV[i] end
    if fence then
        fields[#fields + 1] = 'fence'
        fields[#fields + 1] = string.format('%d', fence)
    end
    return history_add(cap, fields)
end
