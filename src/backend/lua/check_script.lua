-- check_script.lua: `rlock check`: do scripts run, and may they read the
-- server's clock?
--
-- KEYS: none. No ARGV.
-- Returns {1, seconds, microseconds} when TIME runs inside a script (every
-- lock script takes its expiries from it), {0, the server's refusal} when it
-- does not. Reads and writes nothing.
local now = redis.pcall('TIME')
if type(now) == 'table' and now.err then
    return {0, now.err}
end
return {1, now[1], now[2]}
