-- redisson_acquire.lua: take or re-enter an exclusive lock stored exactly as
-- Redisson's RLock stores it (--redisson), so Redisson clients and rlock
-- exclude each other. Same decision as Redisson's tryLockInnerAsync script.
--
-- KEYS[1] NAME             hash  "<uuid>:<thread-id>" -> hold count, PEXPIRE = lease
-- KEYS[2] {NAME}:rlock-fence string, rlock's fencing counter (same slot as NAME)
-- ARGV[1] lease in ms
-- ARGV[2] this caller's owner field ("<uuid>:1")
-- ARGV[3] inherited owner fields, comma-separated, or ""
--
-- Returns {1, field, fence, count} when held, {0, pttl, false} when not.

local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= 'hash' then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds a ' .. t ..
        ' (expected a Redisson lock hash); rlock will not overwrite it')
end
local fence_value = redis.call('GET', KEYS[2])
if fence_value and not string.match(fence_value, '^%d+$') then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[2] ..
        ' holds a value that is not a fencing counter; rlock will not overwrite it')
end
local ttl = tonumber(ARGV[1])

local own = redis.call('HGET', KEYS[1], ARGV[2])
if own then
    return {1, ARGV[2], tonumber(fence_value or '0'), tonumber(own)}
end
for field in string.gmatch(ARGV[3], '[^,]+') do
    if redis.call('HEXISTS', KEYS[1], field) == 1 then
        local count = redis.call('HINCRBY', KEYS[1], field, 1)
        if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
        return {1, field, tonumber(fence_value or '0'), count}
    end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
    redis.call('PEXPIRE', KEYS[1], ttl)
    return {1, ARGV[2], redis.call('INCR', KEYS[2]), 1}
end
return {0, redis.call('PTTL', KEYS[1]), false}
