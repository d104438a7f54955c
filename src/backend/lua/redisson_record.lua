-- redisson_record.lua: --redisson: add an event to the lock's history when
-- the lock is as the event says. Sent in the same round trip as the script
-- that takes or ends the hold (Redisson's own scripts stay as Redisson has
-- them), so it checks what that script did: an `acquired` event is added only
-- when the owner holds the lock once (a new hold, whose fence the acquiring
-- script just set), a `released` one only when it holds it no more. Not
-- prefixed with the prelude.
--
-- KEYS[1] the history stream ({NAME}:rlock-history, NAME's slot)
-- KEYS[2] NAME, Redisson's lock hash    KEYS[3] {NAME}:rlock-fence
-- ARGV[1] history_cap: the stream keeps that many entries (XADD MAXLEN, exact)
-- ARGV[2] idle_ms: expiry in ms after this event
-- ARGV[3] field: the owner field
-- ARGV[4] when: "held" or "gone": the lock as the event needs it
-- ARGV[5..] event: the event's field/value pairs (the fence is added for "held")
--
-- Returns 1 when written, 0 when the lock is not as the event says, -1 when
-- KEYS[1] holds another type (never touched).

local fields = {}
if ARGV[4] == 'held' then
    if redis.call('HGET', KEYS[2], ARGV[3]) ~= '1' then return 0 end
    local fence = redis.call('GET', KEYS[3])
    if fence then
        fields[1] = 'fence'
        fields[2] = fence
    end
elseif redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then
    return 0
end
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= 'stream' then return -1 end
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], '*', unpack(fields))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
