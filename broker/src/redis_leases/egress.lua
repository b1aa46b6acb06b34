-- Notes the egress address a check saw through a lease, and the country it was placed in.
-- ARGV: lease id, ip, country ('': unknown). Returns {previous|false, shared (0/1), previous
-- country ('': unknown)}: the address its task (or, without a task, the lease) was last seen
-- leaving from, whether another live exclusive lease leaves from the address too, and where
-- the previous address was placed.
local id, ip, cc = ARGV[1], ARGV[2], ARGV[3]
local epoch, hold_until = pool_state()
local now = clock()
reap(now, REAP_MOST)
local l = read_lease(id)
local previous, previous_cc = false, ''
if l and l.task then
  local seen = redis.call('HMGET', task_egress_key(l.task), 'ip', 'granted', 'cc')
  previous, previous_cc = seen[1] or false, seen[3] or ''
  -- The task's newest lease (by grant) that was seen decides, as with SQL's ORDER BY.
  if not seen[1] or num(seen[2]) <= l.granted then
    redis.call('HSET', task_egress_key(l.task), 'ip', ip, 'granted', l.granted, 'cc', cc)
  end
  -- A task's address is kept a day after it was last seen, as long as ended leases are.
  redis.call('PEXPIRE', task_egress_key(l.task), TASK_EGRESS_KEEP_MS)
elseif l then
  previous = l.egress or false
  previous_cc = redis.call('HGET', lease_key(id), 'egress_cc') or ''
end
local shared = 0
for _, other in ipairs(redis.call('SMEMBERS', egress_key(ip))) do
  if other ~= id then
    local o = read_lease(other)
    if o and o.state == 'live' and o.expires > now and o.egress == ip then
      shared = 1
    else
      redis.call('SREM', egress_key(ip), other)
    end
  end
end
if l then
  if l.egress and l.egress ~= ip then redis.call('SREM', egress_key(l.egress), id) end
  redis.call('HSET', lease_key(id), 'egress', ip, 'egress_cc', cc)
  if l.class ~= 'stateless' and l.state == 'live' and l.expires > now then
    redis.call('SADD', egress_key(ip), id)
  end
end
return { previous, shared, previous_cc }
