-- acquire.lua: take an exclusive, re-entrant lease lock (Redisson's RLock layout).
--
-- KEYS[1] lock     hash  owner-token -> hold count
-- KEYS[2] holders  hash  owner-token -> JSON {host, pid, command, since}
-- KEYS[3] fence    string, fencing counter (never expires)
-- KEYS[4] waiters  zset  owner-token -> registration expiry (server ms)
-- ARGV[1] fresh owner token of this caller
-- ARGV[2] inherited owner tokens, comma-separated (RLOCK_TOKENS of the
--         ancestor rlock runs), or ""
-- ARGV[3] lease in ms
-- ARGV[4] host   ARGV[5] pid   ARGV[6] command   (holder metadata)
-- ARGV[7] waiter registration in ms: 0 = do not register as a waiter on failure
--
-- Returns {1, token, fence, count} when held: token is the owner that now holds
-- (the inherited one on re-entry), count its hold count after this call;
-- {0, pttl, holder} when someone else holds the lock, holder being
-- {host, pid, command, held-for-ms} of the current owner, or false if unknown.
--
-- Invariants: only the owner of the single field in KEYS[1] holds the lock; a
-- new hold increments KEYS[3]; a re-entry never does and never shortens the
-- lease (PEXPIRE only lengthens it); keys of another type are never touched.

for i = 1, 4 do
    local t = redis.call('TYPE', KEYS[i])['ok']
    local want = ({'hash', 'hash', 'string', 'zset'})[i]
    if t ~= 'none' and t ~= want then
        return redis.error_reply('WRONGTYPE key ' .. KEYS[i] .. ' holds a ' .. t ..
            ' (expected ' .. want .. '); rlock will not overwrite it')
    end
end

-- Check everything before the first write: a script that fails halfway keeps
-- its earlier writes.
local fence_value = redis.call('GET', KEYS[3])
if fence_value and not string.match(fence_value, '^%d+$') then
    return redis.error_reply('WRONGTYPE key ' .. KEYS[3] ..
        ' holds a value that is not a fencing counter; rlock will not overwrite it')
end

local ttl = tonumber(ARGV[3])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function lengthen(key)
    local pttl = redis.call('PTTL', key)
    if pttl < ttl then
        redis.call('PEXPIRE', key, ttl)
    end
end

-- A repeated request (a retry after an interrupted reply) by the token that
-- already holds the lock changes nothing.
local own = redis.call('HGET', KEYS[1], ARGV[1])
if own then
    return {1, ARGV[1], tonumber(fence_value or '0'), tonumber(own)}
end

for inherited in string.gmatch(ARGV[2], '[^,]+') do
    if redis.call('HEXISTS', KEYS[1], inherited) == 1 then
        local count = redis.call('HINCRBY', KEYS[1], inherited, 1)
        lengthen(KEYS[1])
        lengthen(KEYS[2])
        local fence = tonumber(fence_value or '0')
        return {1, inherited, fence, count}
    end
end

if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], ARGV[1], 1)
    redis.call('PEXPIRE', KEYS[1], ttl)
    local fence = redis.call('INCR', KEYS[3])
    redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({
        host = ARGV[4], pid = tonumber(ARGV[5]), command = ARGV[6], since = now }))
    redis.call('PEXPIRE', KEYS[2], ttl)
    if redis.call('ZREM', KEYS[4], ARGV[1]) == 1 and redis.call('ZCARD', KEYS[4]) == 0 then
        redis.call('DEL', KEYS[4])
    end
    return {1, ARGV[1], fence, 1}
end

local holder = false
local owner = redis.call('HKEYS', KEYS[1])[1]
local raw = owner and redis.call('HGET', KEYS[2], owner)
if raw then
    local ok, h = pcall(cjson.decode, raw)
    if ok and type(h) == 'table' then
        holder = {tostring(h.host or '?'), tostring(h.pid or '?'),
                  tostring(h.command or '?'), now - (tonumber(h.since) or now)}
    end
end
local register = tonumber(ARGV[7])
if register > 0 then
    redis.call('ZADD', KEYS[4], now + register, ARGV[1])
    local last = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
    redis.call('PEXPIREAT', KEYS[4], tonumber(last[2]))
end
return {0, redis.call('PTTL', KEYS[1]), holder}
