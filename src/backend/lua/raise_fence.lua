-- raise_fence.lua: Redlock: lift this server's fencing counter to ARGV[1]
-- (the largest fence of the quorum that just took the lock), so that the next
-- quorum, which shares at least one server with this one, hands out a larger
-- fence. Never lowers it; never overwrites a value that is not a counter.
--
-- KEYS[1] the lock's fence counter
-- ARGV[1] fence: the fence to raise it to
-- Returns the counter's value afterwards.
--
-- Fences stay below 2^53, so tonumber compares them exactly; ARGV[1] is
-- stored as the caller's digits, never reformatted from a Lua number.

local FENCE_END = 9007199254740992
local current = redis.call('GET', KEYS[1])
local value = 0
if current then
    value = string.match(current, '^%d+$') and tonumber(current)
    if not (value and value < FENCE_END) then
        return redis.error_reply('WRONGTYPE key ' .. KEYS[1] ..
            ' holds a value that is not a fencing counter; rlock will not overwrite it')
    end
end
local wanted = tonumber(ARGV[1])
if value < wanted then
    -- Lives 30 days past the last fence handed out, as prelude/3-fence.lua has it.
    redis.call('SET', KEYS[1], ARGV[1], 'PX', '2592000000')
    return wanted
end
return value
