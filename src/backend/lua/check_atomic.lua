-- check_atomic.lua: `rlock check`: are scripts atomic? Adds ARGV[1] to a
-- counter one step at a time while another connection reads the counter: on
-- a server that runs a script as one command (Redis, Valkey) the reader only
-- ever sees multiples of ARGV[1]; on one that runs a script's commands one by
-- one (as Garnet does outside its transaction mode), the reader sees a script
-- half done, and no lock script could exclude anything there.
--
-- KEYS[1]: the probe hash (under the prefix, never a lock's key).
-- ARGV[1] steps: how many steps
-- ARGV[2] life_ms: the probe's life in ms (it outlives no check)
-- Returns the counter after the steps.
redis.call('HINCRBY', KEYS[1], 'n', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local steps = tonumber(ARGV[1])
for _ = 1, steps do
    redis.call('HINCRBY', KEYS[1], 'n', 1)
end
return tonumber(redis.call('HGET', KEYS[1], 'n'))
