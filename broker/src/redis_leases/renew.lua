-- Extends a live lease by ttl from now, never past its life's end.
-- ARGV: lease id, fence, ttl ms. Returns {'ok', expires} or {'refused', reason}.
local id, fence, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
-- No look at the pool's state: a pool Redis forgot has no lease to judge either ('unknown').
local now = clock()
local l, why = judge(id, fence, now)
if not l then return { 'refused', why } end
if l.expires >= l.life_ends then return { 'refused', 'life_cap' } end
local expires = math.min(now + math.max(ttl, 1), l.life_ends)
redis.call('HSET', lease_key(id), 'expires', int(expires))
redis.call('ZADD', EXPIRY, int(expires), id)
-- A shorter renewal moves the lease earlier in EXPIRY: `reap_at` must not stay later than it.
if expires < l.expires and expires < num(redis.call('HGET', META, 'reap_at')) then
  redis.call('HSET', META, 'reap_at', int(expires))
end
return { 'ok', expires }
