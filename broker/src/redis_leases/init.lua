-- Starts the pool's epoch after its state was lost (or first written), unless another
-- instance already has. ARGV: epoch, hold ms (no grant before it has passed).
-- Returns 1 when this call started it, 0 when the state was there.
if redis.call('EXISTS', META) == 1 then return 0 end
local now = clock()
redis.call('HSET', META, 'epoch', ARGV[1], 'hold_until', now + tonumber(ARGV[2]), 'run', run_id())
return 1
