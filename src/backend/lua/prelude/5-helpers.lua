-- prelude/5-helpers.lua: everything past the scripts' fast paths.

-- Everything past the fast paths, as a table of functions (H.prune() and so
-- on): helpers() builds it when a script leaves its fast path, after clock(),
-- from the holds the script read (read_holds), which it keeps up to date as
-- it writes them.
local function helpers(holds)
    -- Its own copies of the keys, the clock (read before) and the limits: a
    -- function captures each outer local it uses, at every run of a script.
    local K_HOLDS, K_FENCE, K_WAITERS, K_XWAIT = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
    local K_WEXP, K_WKIND = KEYS[5], KEYS[6]
    NOW_TEXT = digits(NOW)
    local NOW, NOW_US, NOW_TEXT = NOW, NOW_US, NOW_TEXT
    -- Most waiters one wake-up pass looks at (a batch of shared waiters).
    local WAKE_BATCH = '100'
    -- The wake-up lists' common start: the caller's own list is BASE:w:<digest>.
    local BASE = string.match(KEYS[7], '^(.*):w:[^:]*$')

    -- The counter's value (0 when absent), or nil when it holds anything rlock
    -- could not have written.
    local function fence_counter()
        return counter_value(redis.call('GET', K_FENCE))
    end

    -- The fence of a new hold, or nil and an error reply. Above every fence the
    -- counter handed out, and never below the server's clock in microseconds: a
    -- counter lost with the server's data (a restart without persistence, a
    -- failover that lost writes) starts again above every earlier fence, as long
    -- as the clock was not set back.
    local function next_fence()
        local last = fence_counter()
        if not last then return nil, not_a_counter() end
        note_day(last)
        local fence = math.max(last + 1, NOW_US)
        if fence >= FENCE_END then return nil, counter_full() end
        return fence
    end

    local function wake_list(token)
        return BASE .. ':w:' .. token
    end

    -- The wake-up lists this script was given: the caller's own and KEYS[10..].
    local declared = {[KEYS[7]] = true}
    for i = 10, #KEYS do declared[KEYS[i]] = true end

    -- Puts message on token's list, which lives ms more ("w": a wake-up, only
    -- onto an empty list; "g<fence>...": a handoff; "d": the list goes), when
    -- this script was given that list; else into OUTBOX, for wake.lua.
    local function send(token, message, ms)
        local list = wake_list(token)
        if not declared[list] then
            OUTBOX[#OUTBOX + 1] = token
            OUTBOX[#OUTBOX + 1] = message
            return
        end
        if message == 'd' then
            redis.call('DEL', list)
            return
        end
        if message == 'w' and redis.call('LLEN', list) ~= 0 then return end
        redis.call('RPUSH', list, message)
        redis.call('PEXPIRE', list, digits(math.max(1, ms)))
    end

    -- The first waiters, whom a release by the caller may wake: their lists
    -- are the ones the caller gives its next script.
    local function next_waiters()
        return redis.call('ZRANGE', K_WAITERS, '0', '3')
    end

    -- "Fm3" (or "Fm3|...") -> kind "m", limit 3, fair true
    local function parse_kind(text)
        text = string.match(text or 'x', '^[^|]*')
        local fair = string.sub(text, 1, 1) == 'F'
        if fair then text = string.sub(text, 2) end
        local kind = string.sub(text, 1, 1)
        local limit = tonumber(string.sub(text, 2)) or 1
        return kind, limit, fair
    end

    -- The hold of token (nil when it holds nothing), and its place in holds.
    local function find(token)
        for i, h in ipairs(holds) do
            if h.token == token then return h, i end
        end
        return nil
    end

    -- Writes h's field after its count or lease changed.
    local function store(h)
        redis.call('HSET', K_HOLDS, h.token,
            hold_value(digits(h.count), digits(h.ends), h.kind .. (h.kind == 'm' and h.limit or ''), h.info))
    end

    -- lapsed: its lease ran out, and so did any handoff on its list (the
    -- list lives no longer than the lease it announces).
    local function drop_holder(token, lapsed)
        local _, i = find(token)
        if i then
            table.remove(holds, i)
            redis.call('HDEL', K_HOLDS, token)
        end
        -- A handoff not yet read must never be read after its hold is gone.
        if not lapsed then send(token, 'd') end
    end

    local function drop_waiter(token)
        redis.call('ZREM', K_WAITERS, token)
        redis.call('ZREM', K_XWAIT, token)
        redis.call('ZREM', K_WEXP, token)
        redis.call('HDEL', K_WKIND, token)
    end

    -- The live holders' kind, count and smallest limit (kind nil when free;
    -- an earlier rlock's hold counts as one exclusive holder), and the hold
    -- that has been held longest, the one with the smallest fence (nil for an
    -- earlier rlock's): HGETALL lists a hash's fields in no set order. Its
    -- JSON is left to the caller that shows it (a handoff needs none).
    local function holders_state()
        if EARLIER then return 'x', 1, 1, nil end
        if #holds == 0 then return nil, 0, nil, nil end
        local kind, cap, oldest, first_fence = nil, nil, holds[1], nil
        for _, h in ipairs(holds) do
            local k = h.kind
            if kind and k ~= kind then k = 'x' end
            kind = k
            cap = cap and math.min(cap, h.limit) or h.limit
            local fence = tonumber(string.match(h.info, '"fence":"(%d+)"'))
            if fence and (not first_fence or fence < first_fence) then
                oldest, first_fence = h, fence
            end
        end
        return kind, #holds, cap, oldest
    end

    local function compatible(kind, limit, hkind, hn, hcap)
        if hn == 0 then return true end
        if kind == 'x' or hkind ~= kind then return false end
        if kind == 's' then return true end
        return hn < math.min(limit, hcap)
    end

    local function push_wake(token)
        -- Lives no longer than the waiter's registration.
        local until_ms = tonumber(redis.call('ZSCORE', K_WEXP, token) or NOW)
        send(token, 'w', until_ms - NOW)
    end

    -- Gives the holds' key the life of their longest lease (which the release
    -- fast path relies on), or deletes it. An earlier rlock's hold is its own.
    local function settle_holders()
        if EARLIER then return end
        local last
        for _, h in ipairs(holds) do
            if not last or h.ends > last then last = h.ends end
        end
        if last then
            redis.call('PEXPIRE', K_HOLDS, digits(math.max(1, last - NOW)))
        else
            redis.call('DEL', K_HOLDS)
        end
    end

    -- After a waiter registered (or registered again): the waiters' keys live
    -- as long as the last registration.
    local function settle_waiters()
        local last = redis.call('ZRANGE', K_WEXP, '-1', '-1', 'WITHSCORES')[2]
        if not last then
            redis.call('DEL', K_WAITERS, K_XWAIT, K_WEXP, K_WKIND)
            return
        end
        local ms = digits(math.max(1, tonumber(last) - NOW))
        redis.call('PEXPIRE', K_WAITERS, ms)
        redis.call('PEXPIRE', K_XWAIT, ms)
        redis.call('PEXPIRE', K_WEXP, ms)
        redis.call('PEXPIRE', K_WKIND, ms)
    end

    -- After holders changed and waiters may have left. The waiters' keys keep
    -- the life settle_waiters() gave them: the last waiter out takes them
    -- along (Redis deletes a zset or hash left empty), and a shorter life would
    -- only save the server keys that lapse anyway. A waiters' key lost
    -- (evicted, deleted) would leave the others' entries with no registration
    -- to lapse: they go at once (live waiters register again).
    local function settle()
        settle_holders()
        if redis.call('EXISTS', K_WAITERS, K_WEXP) == 1 then
            redis.call('DEL', K_WAITERS, K_XWAIT, K_WEXP, K_WKIND)
        end
    end

    -- The hold of a new holder, with its fence in its metadata (a repeated
    -- request reports the fence of its own hold); nil and an error reply, with
    -- nothing written, when there is no next fence (fence: the next fence, when
    -- the caller has it already). The metadata keeps the fence as a string:
    -- cjson would round it to 14 digits. info: a table, or the JSON of one
    -- (a waiter's registration, which an acquire wrote with cjson), to which
    -- since and fence are added as text: no decoding and encoding again.
    local function hold(token, ttl, kind, limit, info, fence)
        local err
        if not fence then fence, err = next_fence() end
        if not fence then return nil, err end
        local fence_digits = fence_text(fence)
        redis.call('SET', K_FENCE, fence_digits, 'PX', FENCE_IDLE)
        if type(info) == 'string' then
            info = string.sub(info, 1, -2) .. (info == '{}' and '' or ',') .. '"since":' ..
                NOW_TEXT .. ',"fence":"' .. fence_digits .. '","ttl":' .. digits(ttl) .. '}'
        else
            info.since, info.fence, info.ttl = NOW, fence_digits, ttl
            info = cjson.encode(info)
        end
        local h = {token = token, count = 1, ends = NOW + ttl, kind = kind, limit = limit or 1,
            info = info}
        holds[#holds + 1] = h
        store(h)
        return fence
    end

    -- Lets a woken waiter in. One that registered its lease and metadata gets the
    -- hold right here (a direct handoff: "g<fence>" on its list, and no second
    -- round trip to take it); others get a wake-up and try themselves. The lease
    -- handed over ends when the waiter's registration would have: the waiter
    -- counts it from the request that registered it, and a waiter that died or
    -- stopped keeps the lock no longer than it would have kept its place. A
    -- registration without the "=" (an earlier rlock's) is only woken.
    local function admit(token, spec, grants)
        local ttl, cap, info = string.match(spec or '', '^[^|]*|=(%d+)h?(%d*)|(.*)$')
        -- An object as cjson writes it, without since and fence, is taken as
        -- it is (hold adds them); anything else is decoded.
        if not (ttl and string.match(info, '^{.*}$') and not string.find(info, '"since"', 1, true)
                and not string.find(info, '"fence"', 1, true)) then
            local ok, h = pcall(cjson.decode, info or '')
            if not (ttl and ok and type(h) == 'table') then
                push_wake(token)
                return
            end
            info = h
        end
        -- Without a next fence, the waiter is only woken: its own attempt then
        -- reports why, and this script (a release) still completes.
        local fence = next_fence()
        if not fence then
            push_wake(token)
            return
        end
        local kind, limit = parse_kind(spec)
        local registered_until = tonumber(redis.call('ZSCORE', K_WEXP, token) or NOW)
        local lease = math.max(1, math.min(tonumber(ttl), registered_until - NOW))
        -- The waiter's `acquired` event, with the history cap it registered
        -- (whichever script hands the lock over: a release, or one that
        -- pruned a lapsed holder): the waiter starts COMMAND without another
        -- round trip, so it is written here.
        if cap ~= '' and cap ~= '0' then
            local h = info
            if type(h) ~= 'table' then
                local ok, decoded = pcall(cjson.decode, h)
                h = ok and type(decoded) == 'table' and decoded or {}
            end
            local arrived = tonumber(redis.call('ZSCORE', K_WAITERS, token) or NOW_US)
            local fields = {'event', 'acquired', 'host', tostring(h.host or ''),
                'pid', digits(tonumber(h.pid) or 0), 'fence', fence_text(fence),
                'waited_ms', digits(math.max(0, math.floor((NOW_US - arrived) / 1000)))}
            if type(h.note) == 'string' and h.note ~= '' then
                fields[#fields + 1] = 'note'
                fields[#fields + 1] = h.note
            end
            fields[#fields + 1] = 'command'
            fields[#fields + 1] = tostring(h.command or '')
            history_add(cap, fields)
        end
        hold(token, lease, kind, limit, info, fence)
        drop_waiter(token)
        -- Sent by wake(), once every grant is made: the message names the
        -- waiters then first in line, whom the new holder's release may wake.
        grants[#grants + 1] = {token, fence, lease}
    end

    -- Tells each new holder: "g<fence>" then ",<digest>" for each waiter first
    -- in line. The message lives no longer than the hold it announces: a hold
    -- that lapses with no script running leaves no handoff to be read later.
    local function announce(grants)
        if #grants == 0 then return end
        local next_up = table.concat(next_waiters(), ',')
        if next_up ~= '' then next_up = ',' .. next_up end
        for _, g in ipairs(grants) do
            send(g[1], 'g' .. fence_text(g[2]) .. next_up, g[3])
        end
    end

    -- Wakes (or admits) the waiters that can acquire now, and no others (no
    -- thundering herd), in arrival order from the head of the queue: the head if
    -- it is exclusive, the run of shared waiters at the head, or the semaphore
    -- waiters at the head while a slot is free under every limit involved. (A
    -- shared request never goes before an exclusive or semaphore request that
    -- arrived earlier, so the head is always one that the queue lets through.)
    -- A handoff changes the holders: the caller settles the keys' expiry after.
    local function wake()
        local hkind, hn, hcap = holders_state()
        if hkind == 'x' then return end
        local first = redis.call('ZRANGE', K_WAITERS, '0', '0')[1]
        if not first then return end
        local spec = redis.call('HGET', K_WKIND, first)
        local kind = parse_kind(spec)
        local grants = {}
        if kind == 'x' then
            if hn == 0 then
                admit(first, spec, grants)
                announce(grants)
            end
            return
        end
        if hn > 0 and hkind ~= kind then return end
        local from = redis.call('ZSCORE', K_WAITERS, first)
        local batch = redis.call('ZRANGEBYSCORE', K_WAITERS, from, '+inf', 'LIMIT', '0', WAKE_BATCH)
        local n, cap = hn, hcap
        for _, token in ipairs(batch) do
            spec = redis.call('HGET', K_WKIND, token)
            local k, limit = parse_kind(spec)
            if k ~= kind then break end
            if k == 'm' then
                cap = math.min(cap or limit, limit)
                if n >= cap then break end
            end
            admit(token, spec, grants)
            n = n + 1
        end
        announce(grants)
    end

    -- Drops holders whose lease ran out and waiters whose registration did, and
    -- wakes the waiters that can go when that changed anything. gone: the
    -- lapsed waiters, when the caller has read them already. Returns whether
    -- it dropped anyone.
    local function prune(gone)
        local dead = {}
        for _, h in ipairs(holds) do
            if h.ends <= NOW then dead[#dead + 1] = h.token end
        end
        for _, token in ipairs(dead) do drop_holder(token, true) end
        -- A lapsed waiter's list lapses with its registration (or sooner).
        gone = gone or redis.call('ZRANGEBYSCORE', K_WEXP, '-inf', NOW_TEXT)
        for _, token in ipairs(gone) do drop_waiter(token) end
        -- A lapsed holder frees room; a lapsed waiter may have stood at the head.
        if #dead > 0 or #gone > 0 then
            wake()
            settle()
            return true
        end
        return false
    end

    -- The earliest lease expiry among holders, as ms from now (nil when none;
    -- for an earlier rlock's hold, when Redis expires it).
    local function soonest_expiry()
        if EARLIER then
            local ms = redis.call('PTTL', K_HOLDS)
            return ms >= 0 and ms or nil
        end
        local first
        for _, h in ipairs(holds) do
            if not first or h.ends < first then first = h.ends end
        end
        return first and math.max(0, first - NOW)
    end

    return {
        fence_counter = fence_counter, next_fence = next_fence, wake_list = wake_list,
        send = send, next_waiters = next_waiters, find = find, store = store,
        parse_kind = parse_kind, drop_holder = drop_holder, drop_waiter = drop_waiter,
        holders_state = holders_state, compatible = compatible, push_wake = push_wake,
        settle_holders = settle_holders, settle_waiters = settle_waiters, settle = settle,
        hold = hold, admit = admit, wake = wake, prune = prune,
        soonest_expiry = soonest_expiry, holds = holds,
    }
end

-- The start of a script past its fast path: the clock, the holds and the
-- helpers over them (H.holds), and `check` (acl_refusal, say), run before
-- anything is written. Returns the helpers, or nil and an error reply.
local function begin(check)
    clock()
    local holds, unread = read_holds()
    if not holds then return nil, unread end
    local refused = check and check()
    if refused then return nil, refused end
    return helpers(holds)
end
