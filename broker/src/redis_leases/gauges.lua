-- Live leases by class, bans in force, units with two live exclusive leases.
-- Returns {{class, count}..., bans, collisions}.
local epoch, hold_until = pool_state()
local now = clock()
reap(now, REAP_MOST)
local live = {}
for i, name in ipairs(NAMES) do
  local count = num(redis.call('HGET', LIVE, name))
  if count > 0 then
    live[#live + 1] = name
    live[#live + 1] = count
  end
end
return { live, redis.call('ZCOUNT', BANS, '(' .. now, '+inf'), redis.call('SCARD', COLLIDED) }
