-- status.lua: a read-only look at one lock (`status`, `list`). KEYS: see
-- common.lua (KEYS[9] is unused). Writes nothing: holders whose lease has run
-- out and waiters whose registration lapsed are left out, not pruned.
--
-- Returns {kind, limit, fence, waiting, holders}, kind "" when nobody holds
-- the lock, holders a list of {host, pid, command, since-ms, ttl-ms, note}; never
-- owner tokens.

clock()
local H = helpers()
local foreign = foreign_key()
if foreign then return foreign end

local live = redis.call('ZRANGEBYSCORE', K_LEASES, '(' .. NOW_TEXT, '+inf', 'WITHSCORES')
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
local fence = H.fence_counter()
local waiting = redis.call('ZCOUNT', K_WEXP, '(' .. NOW_TEXT, '+inf')
return {kind, limit, fence, waiting, holders}
