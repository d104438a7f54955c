-- status.lua: a read-only look at one lock (`status`, `list`). KEYS: see
-- common.lua (KEYS[9] is unused). Writes nothing: holders whose lease has run
-- out and waiters whose registration lapsed are left out, not pruned.
--
-- Returns {kind, limit, fence, waiting, holders, waiters}, kind "" when nobody
-- holds the lock, holders a list of {host, pid, command, since-ms, ttl-ms,
-- note}, waiters the first WAITERS_SHOWN live waiters in arrival order as
-- {host, pid, note, waiting-ms} (as their registration recorded them); never
-- owner tokens.

clock()
local now_text = digits(NOW)

-- What this script reads comes first, with redis.pcall: a key read is absent
-- or of rlock's type, and a read that fails is explained by foreign_key() (the
-- first key of another type, with its nine TYPEs, off the happy path). The
-- keys it does not otherwise read are counted (HLEN, and ZCOUNT over every
-- score: the README's ACL rules list it, not ZCARD), which also
-- checks their types, and the counts give foreign_shape() what it needs.
local held = redis.pcall('HLEN', K_LOCK)
local detailed = redis.pcall('HLEN', K_HOLDERS)
local leased = redis.pcall('ZCOUNT', K_LEASES, '-inf', '+inf')
local fence_value = redis.pcall('GET', K_FENCE)
local live = redis.pcall('ZRANGEBYSCORE', K_LEASES, '(' .. now_text, '+inf', 'WITHSCORES')
local waiting = redis.pcall('ZCOUNT', K_WEXP, '(' .. now_text, '+inf')
local xwaiting = redis.pcall('ZCOUNT', K_XWAIT, '-inf', '+inf')
-- Enough to see who waits without a read that grows with a crowd.
local WAITERS_SHOWN = 50
local queue = redis.pcall('ZRANGE', K_WAITERS, '0', tostring(WAITERS_SHOWN * 2 - 1), 'WITHSCORES')
local kinds = redis.pcall('HLEN', K_WKIND)
for _, v in ipairs({held, detailed, leased, fence_value, live, waiting, xwaiting, queue, kinds}) do
    if type(v) == 'table' and v.err then return foreign_key() or v end
end
if not counter_value(fence_value) then return not_a_counter() end
local odd = foreign_shape(held, detailed, leased)
if odd then return odd end

local holders, kind, limit = {}, '', 1
for i = 1, #live, 2 do
    local ok, h = pcall(cjson.decode, redis.call('HGET', K_HOLDERS, live[i]) or '')
    if not (ok and type(h) == 'table') then h = {} end
    if kind == '' then
        kind = h.kind or 'x'
        limit = tonumber(h.limit) or 1
    elseif tonumber(h.limit) then
        limit = math.min(limit, tonumber(h.limit))
    end
    local function text(v) if type(v) == 'string' then return v end return '' end
    holders[#holders + 1] = {text(h.host), tostring(tonumber(h.pid) or ''),
        text(h.command), tonumber(h.since) or 0, tonumber(live[i + 1]) - NOW, text(h.note)}
end
local fence = counter_value(fence_value)

local waiters = {}
for i = 1, #queue, 2 do
    if #waiters >= WAITERS_SHOWN then break end
    local token = queue[i]
    local until_ms = tonumber(redis.call('ZSCORE', K_WEXP, token) or '')
    if until_ms and until_ms > NOW then
        local spec = redis.call('HGET', K_WKIND, token) or ''
        local ok, w = pcall(cjson.decode, string.match(spec, '^[^|]*|%d*|(.*)$') or '')
        if not (ok and type(w) == 'table') then w = {} end
        local function text(v) if type(v) == 'string' then return v end return '' end
        local arrived_ms = math.floor((tonumber(queue[i + 1]) or NOW_US) / 1000)
        waiters[#waiters + 1] = {text(w.host), tostring(tonumber(w.pid) or ''), text(w.note),
            math.max(0, NOW - arrived_ms)}
    end
end
return {kind, limit, fence, waiting, holders, waiters}
