-- prelude/1-layout.lua: the first of the prelude files (src/backend/lua/prelude/,
-- joined in name order) prepended to every rlock script but the plain ones.
-- Every script receives the same KEYS, all sharing the lock's {NAME} hash tag:
--
-- KEYS[1] holds    hash  owner digest -> "<count>|<lease end>|<kind>|<holder JSON>":
--                        the hold count, when its lease ends (server ms), its
--                        kind (x, s, or m<limit>) and {host, pid, command,
--                        since, fence, note}; the key lives as long as the
--                        longest lease. Named PREFIX:{NAME}:leases, where
--                        rlock before this layout kept a sorted set: each
--                        version's scripts stop at the other's hold (see
--                        read_holds) instead of writing over it.
-- KEYS[2] fence    string, the last fence handed out (lives FENCE_IDLE past the
--                  last fence handed out; see next_fence)
-- KEYS[3] waiters  zset  waiter digest -> arrival (server us), every waiter
-- KEYS[4] xwait    zset  waiter digest -> arrival, waiters for exclusive or semaphore holds
-- KEYS[5] wexp     zset  waiter digest -> registration expiry (server ms)
-- KEYS[6] wkind    hash  waiter digest -> "[F]x", "[F]s" or "[F]m<limit>" (F: --fair),
--                        then "|=<lease ms>[h<history cap>]|<holder JSON>"
--                        when the lock may be handed to the waiter directly
--                        (see admit), else "||<JSON>" ({host, pid, note}, for
--                        status)
-- KEYS[7] mine     list  the caller's own wake-up list (PREFIX:{NAME}:w:<digest>)
-- KEYS[8] history  stream the lock's last events (rlock history), capped; given
--                        to every script, written only by acquire and release
--                        (and the holds a release hands over), and only when
--                        the caller passes a history cap (see add_event)
-- KEYS[9] base     none  PREFIX:{NAME}: never written. rlock before this
--                        layout kept its holds' counts there; a key there of
--                        any kind with no earlier hold beside it (KEYS[1]
--                        not a sorted set) is another program's: a new hold
--                        is refused (see foreign_key), never taken beside it
-- KEYS[10..]       lists other waiters' wake-up lists the caller expects this
--                        script may write to (whom it last heard stands first in
--                        the queue: see next_waiters)
--
-- Kinds: x exclusive, s shared, m semaphore (limit holders). Expiry is judged by
-- the server's clock (TIME) only. A hold is one hash field, so taking a free
-- lock writes one field and its expiry, and every script reads all holds with
-- one HGETALL (a lock has few holders); the waiters keep sorted sets, so that
-- the queue's head, a place and the lapsed registrations cost the same with
-- 1 or 128 waiters.
--
-- A script touches only the keys it is given (Redis's EVAL contract, which
-- Dragonfly, Kvrocks and script-checking proxies enforce). A message for a
-- wake-up list it was not given goes to OUTBOX instead, which the script
-- returns: the client delivers it at once with wake.lua, which is given those
-- lists. Every rlock script but status.lua and wake.lua returns, through done():
-- REPLY done {reply, outbox, next}: reply as each script documents it, outbox
--   {digest, message, ...}, next the digests of the first waiters (when the
--   caller holds), whose lists the caller gives its next script (a release
--   then hands over in one call).
--
-- Lean by design: Redis runs every script on its only thread, and a script's
-- cost is mostly its number of redis.call()s and the Lua it runs before them.
-- So this prelude defines only what the scripts' fast paths need (a free lock
-- taken; a sole holder releasing with nobody waiting); everything else is
-- defined by helpers(), which a script calls when it leaves its fast path
-- (each function definition is an allocation at every run of a script).

local K_HOLDS, K_FENCE, K_WAITERS, K_XWAIT = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_WEXP, K_WKIND, K_MINE, K_HISTORY = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_BASE = KEYS[9]

-- An integer as digits. A number passed to redis.call is written with
-- %.17g, which costs several times more than %d (and a number in `..` keeps
-- only 14 digits): every number the scripts send is text first.
local function digits(n)
    return string.format('%d', n)
end

-- Messages for wake-up lists this script was not given: {digest, message, ...}.
local OUTBOX = {}

-- A script's reply with its outbox and, when the caller holds, the waiters it
-- should expect to wake (see the top of this file).
local function done(reply, next_up)
    return {reply, OUTBOX, next_up or {}}
end
