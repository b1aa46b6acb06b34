-- Deletes up to `batch` leases that ended more than `keep` ms ago. ARGV: keep ms, batch.
-- Returns how many. Fences live on in the exits' hashes, so nothing a later lease depends on
-- goes.
local keep, batch = tonumber(ARGV[1]), tonumber(ARGV[2])
local epoch, hold_until = pool_state()
local now = clock()
reap(now, REAP_MOST)
local ids = redis.call('ZRANGE', ENDED, '-inf', '(' .. (now - keep), 'BYSCORE', 'LIMIT', 0, batch)
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', lease_key(id), 'class', 'task')
  if f[2] and redis.call('GET', task_key(f[1], f[2])) == id then
    redis.call('DEL', task_key(f[1], f[2]))
  end
  redis.call('DEL', lease_key(id))
  redis.call('ZREM', ENDED, id)
end
return #ids
