-- status.lua: a read-only look at one lock (`status`, `list`). KEYS: see
-- prelude/1-layout.lua (KEYS[7] is unused). Writes nothing: holders whose lease has run
-- out and waiters whose registration lapsed are left out, not pruned.
--
-- No ARGV.
--
-- REPLY status {kind, limit, fence, waiting, holders, waiters}: kind "" when
--   nobody holds the lock, holders a list of holdings, waiters the first
--   WAITERS_SHOWN live waiters in arrival order (as their registration
--   recorded them); never owner digests.
-- REPLY holding {host, pid, command, since_ms, ttl_ms, note?, earlier?, lease_ms?, renewed_ms?}:
--   ttl_ms is the lease left; lease_ms the lease each renewal sets (the
--   holder's ttl, recorded with the hold) and renewed_ms how long ago the
--   holder last renewed (a renewal sets the lease's end to its time plus
--   lease_ms), both "" when not known or not renewed since the hold was
--   taken. The hold of an earlier rlock version (see read_holds in
--   prelude/4-holds.lua) is one exclusive holding {"", "", "", 0, ttl_ms,
--   "", "earlier"}: this layout does not read that version's details.
-- REPLY waiting {host, pid, note, waiting_ms}

clock()
local now_text = digits(NOW)

-- What this script reads comes first, with redis.pcall: a key read is absent
-- or of rlock's type, and a read that fails is explained by foreign_key() (the
-- first key of another type, with its TYPEs, off the happy path). The keys
-- it does not otherwise read are counted (HLEN, and ZCOUNT over every score:
-- the README's ACL rules list it, not ZCARD), which also checks their types.
local holds, unread = read_holds()
if not holds then return unread end
if not EARLIER and redis.call('EXISTS', K_BASE) == 1 then return foreign_key() end
local fence_value = redis.pcall('GET', K_FENCE)
local waiting = redis.pcall('ZCOUNT', K_WEXP, '(' .. now_text, '+inf')
local xwaiting = redis.pcall('ZCOUNT', K_XWAIT, '-inf', '+inf')
-- Enough to see who waits without a read that grows with a crowd.
local WAITERS_SHOWN = 50
local queue = redis.pcall('ZRANGE', K_WAITERS, '0', tostring(WAITERS_SHOWN * 2 - 1), 'WITHSCORES')
local kinds = redis.pcall('HLEN', K_WKIND)
for _, v in ipairs({fence_value, waiting, xwaiting, queue, kinds}) do
    if type(v) == 'table' and v.err then return foreign_key() or v end
end
if not counter_value(fence_value) then return not_a_counter() end

local function text(v) if type(v) == 'string' then return v end return '' end
local holders, kind, limit = {}, '', 1
if EARLIER then
    local ms = redis.call('PTTL', K_HOLDS)
    holders[1] = {'', '', '', 0, math.max(0, ms), '', 'earlier'}
    kind = 'x'
end
-- Soonest lease end first, then by owner (HGETALL lists a hash's fields in
-- no set order).
table.sort(holds, function(a, b)
    return a.ends < b.ends or (a.ends == b.ends and a.token < b.token)
end)
for _, hold in ipairs(holds) do
    if hold.ends > NOW then
        local ok, h = pcall(cjson.decode, hold.info)
        if not (ok and type(h) == 'table') then h = {} end
        if kind == '' then
            kind = hold.kind
            limit = hold.limit
        else
            limit = math.min(limit, hold.limit)
        end
        -- The last renewal, derived: no renewal writes more than the lease's end.
        local lease, renewed = tonumber(h.ttl), ''
        local since = tonumber(h.since) or 0
        if lease and hold.ends - lease > since then renewed = NOW - (hold.ends - lease) end
        holders[#holders + 1] = {text(h.host), tostring(tonumber(h.pid) or ''),
            text(h.command), since, hold.ends - NOW, text(h.note), '', lease or '',
            renewed}
    end
end
local fence = counter_value(fence_value)

local waiters = {}
for i = 1, #queue, 2 do
    if #waiters >= WAITERS_SHOWN then break end
    local token = queue[i]
    local until_ms = tonumber(redis.call('ZSCORE', K_WEXP, token) or '')
    if until_ms and until_ms > NOW then
        local spec = redis.call('HGET', K_WKIND, token) or ''
        local ok, w = pcall(cjson.decode, string.match(spec, '^[^|]*|=?[%dh]*|(.*)$') or '')
        if not (ok and type(w) == 'table') then w = {} end
        local arrived_ms = math.floor((tonumber(queue[i + 1]) or NOW_US) / 1000)
        waiters[#waiters + 1] = {text(w.host), tostring(tonumber(w.pid) or ''), text(w.note),
            math.max(0, NOW - arrived_ms)}
    end
end
return {kind, limit, fence, waiting, holders, waiters}
