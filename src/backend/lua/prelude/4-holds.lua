-- prelude/4-holds.lua: the holds as the scripts read them, and the checks
-- made before anything is written (keys of another type, the user's ACL).

-- A hold's field value, and back. string.match over the value, not cjson:
-- only the JSON of a holder that status or a busy reply shows is decoded.
local HOLD = '^(%d+)|(%d+)|(%a)(%d*)|(.*)$'
local function hold_value(count, ends, kind, info)
    return count .. '|' .. ends .. '|' .. kind .. '|' .. info
end

local function odd_hold()
    return redis.error_reply('WRONGTYPE key ' .. K_HOLDS ..
        ' holds fields rlock did not write; rlock will not overwrite them')
end

-- Set when KEYS[1] is a sorted set: the hold of an rlock from before this
-- layout (or a lapsing leftover of one). It counts as a hold of another kind
-- until Redis expires it with its longest lease (or that rlock releases it);
-- these scripts never write to it, and that rlock's scripts stop at a hold of
-- this layout with a WRONGTYPE error, having written nothing.
local EARLIER = false

-- Every hold of the lock, as a list of {token, count, ends, kind, limit, info}
-- (info: the holder's JSON, undecoded), or nil and an error reply when
-- KEYS[1] holds what rlock did not write. One HGETALL, with redis.pcall: a
-- sorted set there is an earlier rlock's hold (EARLIER, and no holds read);
-- any other failure is explained by foreign_key().
local foreign_key
local function read_holds()
    local flat = redis.pcall('HGETALL', K_HOLDS)
    if flat.err then
        if redis.call('TYPE', K_HOLDS)['ok'] == 'zset' then
            EARLIER = true
            return {}
        end
        return nil, foreign_key() or flat
    end
    local holds = {}
    for i = 1, #flat, 2 do
        local count, ends, kind, limit, info = string.match(flat[i + 1], HOLD)
        if not count then return nil, odd_hold() end
        holds[#holds + 1] = {token = flat[i], count = tonumber(count), ends = tonumber(ends),
            kind = kind, limit = tonumber(limit) or 1, info = info}
    end
    return holds
end

-- An error reply when a key of this lock exists with another type (rlock never
-- overwrites what it did not write), else nil. Seven TYPEs, so scripts run it
-- only to explain a read that failed, or before a write they make without
-- reading first (force). A sorted set at KEYS[1] is an earlier rlock's hold,
-- not a foreign key.
foreign_key = function()
    local want = {'hash', 'string', 'zset', 'zset', 'zset', 'hash', 'list'}
    for i = 1, 7 do
        local t = redis.call('TYPE', KEYS[i])['ok']
        if t ~= 'none' and t ~= want[i] and not (i == 1 and t == 'zset') then
            return redis.error_reply('WRONGTYPE key ' .. KEYS[i] .. ' holds a ' .. t ..
                ' (expected ' .. want[i] .. '); rlock will not overwrite it')
        end
    end
    if not counter_value(redis.call('GET', K_FENCE)) then return not_a_counter() end
    if not EARLIER and redis.call('EXISTS', K_BASE) == 1 then
        return redis.error_reply('WRONGTYPE key ' .. K_BASE .. ' holds a ' ..
            redis.call('TYPE', K_BASE)['ok'] .. ' rlock did not write; rlock will not overwrite it')
    end
    return nil
end

-- An error reply when the user's ACL would refuse one of the writes a script
-- may make, else nil: checked before the first write, because Redis does not
-- undo a script's writes when a later command fails, and a hold written
-- without its expiry would never end. (redis.acl_check_cmd is Redis 7's; on
-- older servers a refusal can still cut a script short.)
local function acl_refusal()
    local allowed = redis.acl_check_cmd
    if not allowed then return nil end
    -- Every write command the scripts use, on the holds' key: all keys share
    -- its prefix (`~PREFIX:*`, as the README's ACL rules have it). The
    -- wake-up lists, with their `:w:` infix, and the fence get a check of
    -- their own. (One call each, in a row: no table to build at every run. The
    -- command and its key are all a check needs: the key's place comes from the
    -- command's key spec, as it would for the whole command.)
    local refused
    -- HGETALL, a read, too: every script past a fast path reads the holds
    -- with it, so a hold taken without it could not be released.
    if not allowed('HGETALL', K_HOLDS) then refused = {'HGETALL', K_HOLDS}
    elseif not allowed('HSET', K_HOLDS) then refused = {'HSET', K_HOLDS}
    elseif not allowed('HDEL', K_HOLDS) then refused = {'HDEL', K_HOLDS}
    elseif not allowed('ZADD', K_HOLDS) then refused = {'ZADD', K_HOLDS}
    elseif not allowed('ZREM', K_HOLDS) then refused = {'ZREM', K_HOLDS}
    elseif not allowed('PEXPIRE', K_HOLDS) then refused = {'PEXPIRE', K_HOLDS}
    elseif not allowed('DEL', K_HOLDS) then refused = {'DEL', K_HOLDS}
    -- A wake-up list's name holds an owner digest: shown as a pattern.
    elseif not allowed('RPUSH', K_MINE) then refused = {'RPUSH', 'the wake-up lists (:w:*)'}
    elseif not allowed('PEXPIRE', K_MINE) then refused = {'PEXPIRE', 'the wake-up lists (:w:*)'}
    elseif not allowed('DEL', K_MINE) then refused = {'DEL', 'the wake-up lists (:w:*)'}
    elseif not allowed('SET', K_FENCE) then refused = {'SET', K_FENCE}
    else return nil end
    return redis.error_reply('NOPERM rlock: the user may not run ' .. refused[1] ..
        ' on ' .. refused[2] .. ', which this lock needs; nothing was written')
end
