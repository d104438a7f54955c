-- prelude/3-fence.lua: the server's clock and the fencing counter.

-- How long a fence counter outlives the last fence handed out: 30 days, in ms.
-- Fences stay increasing without it (a fence is never below the server's clock
-- in microseconds), unless the server's clock is set back by more than this.
local FENCE_IDLE = '2592000000'

-- The server's time in ms and in us, read by clock() (one TIME per script, and
-- none on a path that needs no time); NOW as digits, set by helpers().
local NOW, NOW_US, NOW_TEXT
local function clock()
    local t = redis.call('TIME')
    NOW_US = tonumber(t[1]) * 1000000 + tonumber(t[2])
    NOW = (NOW_US - NOW_US % 1000) / 1000
end

-- Notes whether a fence handed out now (NOW_US) falls on a later UTC day than
-- `last`, the one before it: fences are never below the clock in
-- microseconds, so the last fence tells when the last hold began.
local function note_day(last)
    if math.floor(last / DAY_US) < math.floor(NOW_US / DAY_US) then NEW_DAY = true end
end

-- Fences stay below 2^53, where a double holds every integer exactly: Lua's
-- numbers here, and JSON and JavaScript readers of RLOCK_FENCE or `status`.
local FENCE_END = 9007199254740992

-- A fence as digits. tostring, `..` and cjson keep only 14 significant digits
-- of a Lua number, and fences have 16.
local fence_text = digits

-- The counter's value from its text (0 when absent), or nil when it holds
-- anything rlock could not have written (not digits, or not below 2^53).
local function counter_value(text)
    if not text then return 0 end
    local n = string.match(text, '^%d+$') and tonumber(text)
    if n and n < FENCE_END then return n end
    return nil
end

local function not_a_counter()
    return redis.error_reply('WRONGTYPE key ' .. K_FENCE ..
        ' holds a value that is not a fencing counter; rlock will not overwrite it')
end

local function counter_full()
    return redis.error_reply('WRONGTYPE key ' .. K_FENCE ..
        ' holds a fencing counter at its largest value (fences stay below 2^53);' ..
        ' rlock will not overwrite it')
end

