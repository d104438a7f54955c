-- record.lua: add one event to a lock's history, when rlock knows of it only
-- after the script that made it (a wait given up, a hold lost, a forced
-- release; under Redlock, every event; with --redisson, the holds of a run of
-- several names). Not prefixed with the prelude.
--
-- KEYS[1] the lock's history stream (in the lock's slot)
-- ARGV[1] history_cap: the stream keeps that many entries (XADD MAXLEN, exact)
-- ARGV[2] idle_ms: expiry in ms after this event
-- ARGV[3..] event: the event's field/value pairs
--
-- Returns 1 when written, 0 when KEYS[1] holds another type (never touched).

local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'none' and t ~= 'stream' then return 0 end
local args = {'XADD', KEYS[1], 'MAXLEN', ARGV[1], '*'}
for i = 3, #ARGV do args[#args + 1] = ARGV[i] end
redis.call(unpack(args))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
