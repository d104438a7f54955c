-- raise_fence.lua: Redlock: lift this server's fencing counter to ARGV[1]
-- (the largest fence of the quorum that just took the lock), so that the next
-- quorum, which shares at least one server with this one, hands out a larger
-- fence. Never lowers it; never overwrites a value that is not a counter.
--
-- KEYS[1] the lock's fence counter     ARGV[1] the fence to raise it to
-- Returns the counter's value afterwards.

local current = redis.call('GET', KEYS[1])
if current and not string.match(current, '^%d+$') then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[1] ..
        ' holds a value that is not a fencing counter; rlock will not overwrite it')
end
local wanted = tonumber(ARGV[1])
if tonumber(current or '0') < wanted then
    redis.call('SET', KEYS[1], ARGV[1])
    return wanted
end
return tonumber(current)
