-- What the pool's state is to this server process, for an instance deciding on a new epoch.
-- Returns {state, epoch}: 'forgotten' (no state; epoch false), 'older' (written by another
-- server process) or 'current'.
local f = redis.call('HMGET', META, 'epoch', 'run')
if not f[1] then return { 'forgotten', false } end
if f[2] ~= run_id() then return { 'older', tonumber(f[1]) } end
return { 'current', tonumber(f[1]) }
