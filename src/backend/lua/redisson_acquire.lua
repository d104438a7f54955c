-- redisson_acquire.lua: take or re-enter an exclusive lock stored exactly as
-- Redisson's RLock stores it (--redisson), so Redisson clients and rlock
-- exclude each other. Same decision as Redisson's tryLockInnerAsync script.
--
-- KEYS[1] NAME             hash  "<uuid>:<thread-id>" -> hold count, PEXPIRE = lease
-- KEYS[2] {NAME}:rlock-fence string, the last fence rlock handed out (same slot
--                            as NAME; next fence as in prelude/3-fence.lua's next_fence)
-- ARGV[1] lease_ms: the lease in ms
-- ARGV[2] field: this caller's owner field ("<uuid>:1")
-- ARGV[3] inherited: inherited owner fields, comma-separated, or ""
--
-- REPLY held {1, owner, fence, count} when held, owner the field that holds;
-- REPLY taken {0, wait_ms, holder} when not: wait_ms the lock's PTTL, holder
--   false.

local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= 'hash' then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[1] .. ' holds a ' .. t ..
        ' (expected a Redisson lock hash); rlock will not overwrite it')
end
-- Fences stay below 2^53 (exact as doubles, here and in JSON readers).
local FENCE_END = 9007199254740992
local fence_value = redis.call('GET', KEYS[2])
local last = 0
if fence_value then
    last = string.match(fence_value, '^%d+$') and tonumber(fence_value)
    if not (last and last < FENCE_END) then
        return redis.error_reply('WRONGTYPE key ' .. KEYS[2] ..
            ' holds a value that is not a fencing counter; rlock will not overwrite it')
    end
end
local ttl = tonumber(ARGV[1])
-- Redis does not undo a script's writes when a later command fails: a hold
-- written without its expiry would never end. So the user's ACL is asked
-- first (Redis 7's redis.acl_check_cmd).
if redis.acl_check_cmd then
    for _, w in ipairs({{'HINCRBY', KEYS[1], 'f', '0'}, {'PEXPIRE', KEYS[1], '1'},
            {'SET', KEYS[2], '0'}}) do
        if not redis.acl_check_cmd(unpack(w)) then
            return redis.error_reply('NOPERM rlock: the user may not run ' .. w[1] ..
                ' on ' .. w[2] .. ', which this lock needs; nothing was written')
        end
    end
end

local own = redis.call('HGET', KEYS[1], ARGV[2])
if own then
    return {1, ARGV[2], last, tonumber(own)}
end
for field in string.gmatch(ARGV[3], '[^,]+') do
    if redis.call('HEXISTS', KEYS[1], field) == 1 then
        local count = redis.call('HINCRBY', KEYS[1], field, 1)
        if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
        return {1, field, last, count}
    end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
    -- Never below the server's clock in microseconds, so that a counter lost
    -- with the server's data does not start again below earlier fences.
    local time = redis.call('TIME')
    local fence = math.max(last + 1, tonumber(time[1]) * 1000000 + tonumber(time[2]))
    if fence >= FENCE_END then
        return redis.error_reply('WRONGTYPE key ' .. KEYS[2] ..
            ' holds a fencing counter at its largest value (fences stay below 2^53);' ..
            ' rlock will not overwrite it')
    end
    -- %d: tostring would keep only 14 of the fence's 16 digits. The counter
    -- lives 30 days past the last fence handed out (as in prelude/3-fence.lua).
    redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', '2592000000')
    redis.call('HINCRBY', KEYS[1], ARGV[2], 1)
    redis.call('PEXPIRE', KEYS[1], ttl)
    return {1, ARGV[2], fence, 1}
end
return {0, redis.call('PTTL', KEYS[1]), false}
