-- Starts a new epoch over a pool whose state another server process wrote (see `run_id`),
-- unless another instance already has: the state is kept, but fences move to the new epoch
-- and nothing is granted until every lease the lost writes may have granted has run out.
-- ARGV: epoch, hold ms. Returns 1 when this call started it, 0 when it was started already.
local f = redis.call('HMGET', META, 'epoch', 'run')
if not f[1] then error({ err = 'FORGOTTEN the pool state is gone' }) end
if f[2] == run_id() then return 0 end
local now = clock()
redis.call('HSET', META, 'epoch', ARGV[1], 'hold_until', now + tonumber(ARGV[2]), 'run', run_id())
return 1
