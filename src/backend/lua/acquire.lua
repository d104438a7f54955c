-- acquire.lua: take or re-enter a hold (exclusive, shared or semaphore), or
-- register as a waiter. KEYS: see prelude/1-layout.lua.
--
-- ARGV[1] owner: the digest of this caller's fresh owner token
-- ARGV[2] inherited: the digests of the inherited owner tokens (RLOCK_TOKENS),
--         comma-separated, or ""
-- ARGV[3] lease_ms: the lease in ms
-- ARGV[4] host: the holder's host (holder metadata)
-- ARGV[5] pid: the holder's pid
-- ARGV[6] command: the holder's command
-- ARGV[7] register_ms: waiter registration in ms: 0 = do not register as a
--         waiter on failure
-- ARGV[8] kind: x, s or m
-- ARGV[9] limit: the semaphore's limit (m)
-- ARGV[10] fair: "1" for --fair
-- ARGV[11] grant: "1": a registered waiter may be handed the lock directly (a
--          release makes it the holder and pushes "g<fence>" to its list)
-- ARGV[12] note: the holder's note (--note, a CI job's URL), or ""
-- ARGV[13] history_cap: the history cap (0 or absent: none)
-- ARGV[14..] event: the `acquired` event's fields, recorded in KEYS[8] with
--          the fence when a new hold is made (see add_event)
--
-- REPLY done {reply, outbox, next}: through done() in prelude/1-layout.lua,
-- with the outbox and the next waiters; reply is one of:
-- REPLY held {1, owner, fence, count, event?} when held: owner is the digest
--   that now holds (an inherited one on re-entry), count its hold count after
--   this call, and event there when a new hold was made: the id of its
--   `acquired` event in the history (when ARGV[13] gave a cap and the write
--   succeeded), else 1; or "handed" for the caller's own hold made earlier
--   (handed over by a release, or taken by a request whose reply was lost),
--   whose event, if any, was written then: found by its fence;
-- REPLY taken {0, wait_ms, holder, place?} when not: wait_ms is how long until
--   a holder's lease or another waiter's registration could run out (-1:
--   neither), holder a current holder or false, place the caller's place
--   among the registered waiters (1: first) or false;
-- REPLY holder {host, pid, command, held_ms, note?, earlier?}: a holder,
--   held_ms how long it has held, earlier "earlier" for an earlier rlock's
--   hold (whose details this layout does not read);
-- REPLY weaker {2, kind} when an enclosing run holds the lock as a weaker
--   kind (no upgrade).
--
-- Invariants: holders are compatible (one exclusive; or any number of shared;
-- or semaphore holders fewer than every one's limit); a new hold gets a fence
-- larger than the counter's and no smaller than the server's clock in
-- microseconds (see next_fence); re-entry never shortens a lease; keys of
-- another type are never touched; nothing is written before every check
-- passed.

local token, ttl = ARGV[1], tonumber(ARGV[3])
local kind, limit, fair = ARGV[8], tonumber(ARGV[9]), ARGV[10] == '1'
-- The kind as a hold's field keeps it: x, s, or m<limit>.
local kind_code = kind == 'm' and (kind .. limit) or kind

-- The fast path: no key of this lock exists but its fence counter (no holder,
-- no waiter, nothing on the caller's list), so nothing needs pruning, every
-- kind is compatible and the queue lets anyone go: the same hold as below, in
-- six commands. A key of another type exists, so it is never taken here;
-- the counter is read with redis.pcall, and a read that fails is explained by
-- foreign_key() (WRONGTYPE) or passed on.
if redis.call('EXISTS', K_HOLDS, K_WAITERS, K_XWAIT, K_WEXP, K_WKIND, K_MINE, K_BASE) == 0 then
    local text = redis.pcall('GET', K_FENCE)
    if type(text) == 'table' then return foreign_key() or text end
    local last = counter_value(text)
    if not last then return not_a_counter() end
    local refused = acl_refusal()
    if refused then return refused end
    clock()
    note_day(last)
    local fence = math.max(last + 1, NOW_US)
    if fence >= FENCE_END then return counter_full() end
    local info = {host = ARGV[4], pid = tonumber(ARGV[5]), command = ARGV[6], since = NOW,
                  fence = fence_text(fence), ttl = ttl}
    if ARGV[12] and ARGV[12] ~= '' then info.note = ARGV[12] end
    redis.call('SET', K_FENCE, info.fence, 'PX', FENCE_IDLE)
    redis.call('HSET', K_HOLDS, token,
        hold_value('1', digits(NOW + ttl), kind_code, cjson.encode(info)))
    -- The key lives as long as its longest lease: this one. (The release
    -- fast path relies on it: a hold there is a lease not run out.)
    redis.call('PEXPIRE', K_HOLDS, digits(math.max(1, ttl)))
    return done({1, token, fence, 1, add_event(13, fence) or 1})
end

local H, unread = begin()
if not H then return unread end

-- Past the fast path, what this script reads comes first, with redis.pcall:
-- a key read is absent or of rlock's type; the keys it does not read are
-- asked their TYPE. Any other answer is explained by foreign_key() (the first
-- key of another type) before anything is written.
local fence_value = redis.pcall('GET', K_FENCE)
local gone = redis.pcall('ZRANGEBYSCORE', K_WEXP, '-inf', NOW_TEXT)
local mine = redis.pcall('ZSCORE', K_WAITERS, token) -- the caller's arrival, if it waits
local function ours(key, want)
    local t = redis.call('TYPE', key)['ok']
    return t == 'none' or t == want
end
for _, v in ipairs({fence_value, gone, mine}) do
    if type(v) == 'table' and v.err then return foreign_key() or v end
end
if not (ours(K_XWAIT, 'zset') and ours(K_WKIND, 'hash') and ours(K_MINE, 'list')) then
    return foreign_key()
end
if not counter_value(fence_value) then return not_a_counter() end
local refused = acl_refusal()
if refused then return refused end

local info = {host = ARGV[4], pid = tonumber(ARGV[5]), command = ARGV[6]}
if ARGV[12] and ARGV[12] ~= '' then info.note = ARGV[12] end
-- Pruned: the caller's own registration may be gone.
if H.prune(gone) then mine = redis.call('ZSCORE', K_WAITERS, token) end

-- A repeated request (a retry after an interrupted reply, or a waiter that
-- was handed the lock as it gave up blocking) by the owner that already holds
-- the lock changes nothing; its wake-up list is done with.
local function lengthen(h)
    local until_ms = NOW + ttl
    if h.ends < until_ms then h.ends = until_ms end
    H.store(h)
end

-- The fence of a hold, from its metadata.
local function fence_of(h)
    return tonumber(string.match(h.info, '"fence":"(%d+)"')) or tonumber(fence_value or '0')
end

local own = H.find(token)
if own then
    redis.call('DEL', K_MINE)
    -- The caller counts the lease from this request; a hold handed over while
    -- it was not reading began earlier: start the lease again.
    lengthen(own)
    H.settle()
    return done({1, token, fence_of(own), own.count, 'handed'}, H.next_waiters())
end

for inherited in string.gmatch(ARGV[2], '[^,]+') do
    local h = H.find(inherited)
    if h then
        if h.kind ~= 'x' and h.kind ~= kind then
            return done({2, h.kind})
        end
        h.count = h.count + 1
        lengthen(h)
        H.settle()
        return done({1, inherited, fence_of(h), h.count}, H.next_waiters())
    end
end

-- Whether the queue lets this request go now. A shared request never goes
-- before an exclusive or semaphore request that is already waiting (writer
-- preference: a stream of readers cannot starve a writer), with or without
-- --fair. A --fair request also waits for every earlier waiter; other
-- exclusive and semaphore requests may overtake the queue.
local function queue_allows()
    local before = mine and ('(' .. mine) or '+inf'
    if kind == 's' then
        return redis.call('ZCOUNT', K_XWAIT, '-inf', before) == 0
    end
    if fair then
        return redis.call('ZCOUNT', K_WAITERS, '-inf', before) == 0
    end
    return true
end

local hkind, hn, hcap, record = H.holders_state()
if H.compatible(kind, limit, hkind, hn, hcap) and queue_allows() then
    -- A new hold is never taken beside another program's key at KEYS[9].
    if redis.call('EXISTS', K_BASE) == 1 then return foreign_key() end
    local fence, err = H.hold(token, ttl, kind, limit, info)
    if not fence then return err end
    local was_waiting = mine
    H.drop_waiter(token)
    redis.call('DEL', K_MINE)
    -- A semaphore waiter leaving the head can let the next one in beside it
    -- (a fair one woken at the same time may have tried first and been sent
    -- back): pass the wake-up along. Shared waiters are woken as a batch.
    if was_waiting and kind == 'm' then H.wake() end
    H.settle()
    return done({1, token, fence, 1, add_event(13, fence) or 1}, H.next_waiters())
end

-- Who holds it, for the caller's message: a holder's details, or an earlier
-- rlock's hold (whose details this layout does not read), marked "earlier".
local holder = false
local decoded, h = pcall(cjson.decode, record and record.info or '')
if decoded and type(h) == 'table' then
    holder = {tostring(h.host or '?'), tostring(h.pid or '?'),
              tostring(h.command or '?'), NOW - (tonumber(h.since) or NOW),
              type(h.note) == 'string' and h.note or ''}
elseif EARLIER then
    holder = {'', '', '', 0, '', 'earlier'}
end
local register = tonumber(ARGV[7])
local place = false
if register > 0 then
    -- Holding nothing here, whatever is on the caller's list predates this look.
    redis.call('DEL', K_MINE)
    -- Its arrival: when it first registered, or now.
    local now_us = digits(NOW_US)
    local arrived = mine or now_us
    redis.call('ZADD', K_WAITERS, 'NX', now_us, token)
    if kind ~= 's' then redis.call('ZADD', K_XWAIT, 'NX', now_us, token) end
    redis.call('ZADD', K_WEXP, digits(NOW + register), token)
    local spec = (fair and 'F' or '') .. kind_code
    -- A waiter that may be handed the lock registers its lease, its history
    -- cap and metadata after "=" (which an earlier rlock's release does not
    -- read, and so only wakes it); any other registers who it is (host, pid, note) for
    -- `status`, with an empty lease, which admit() reads as "wake it, do not
    -- hand it over".
    if ARGV[11] == '1' then
        local cap = ARGV[13]
        spec = spec .. '|=' .. ttl .. ((cap and cap ~= '0') and ('h' .. cap) or '') .. '|' ..
            cjson.encode(info)
    else
        spec = spec .. '||' .. cjson.encode({host = info.host, pid = info.pid, note = info.note})
    end
    redis.call('HSET', K_WKIND, token, spec)
    -- Its place: one after every waiter that arrived before it (arrivals are
    -- distinct microseconds). ZCOUNT, not ZRANK: the README's ACL rules allow
    -- the one and not the other.
    place = redis.call('ZCOUNT', K_WAITERS, '-inf', '(' .. arrived) + 1
    H.settle_waiters()
end
-- Look again no later than when a holder's lease or another waiter's
-- registration could run out: either may be what stands in the way.
local wait = H.soonest_expiry()
local soonest = redis.call('ZRANGE', K_WEXP, '0', '1', 'WITHSCORES')
for i = 1, #soonest, 2 do
    if soonest[i] ~= token then
        local ms = math.max(0, tonumber(soonest[i + 1]) - NOW)
        wait = wait and math.min(wait, ms) or ms
        break
    end
end
return done({0, wait or -1, holder, place})
