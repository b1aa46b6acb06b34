-- Writes units: new ones are added, known ones get their label's class, capacity and life
-- cap, and the stamp of this write. A live lease whose class its unit no longer admits is
-- revoked; a draining unit's (rank -1) run out. ARGV: stamp, then per unit: unit, exit, rank,
-- capacity, gateway (0/1), life ms, country ('' unknown), round-trip gap ms ('' never
-- measured). Returns how many leases were revoked.
local stamp = ARGV[1]
local epoch, hold_until = pool_state()
local now = clock()
reap(now, REAP_MOST)
local revoked = 0

-- Gives unit `name` rank `rank` (and the other fields; a drain passes only the rank), revoking
-- what it no longer admits.
local function write(name, exit, rank, cap, gw, life, cc, gap)
  local old = read_unit(name)
  if old and old.rank > 0 and (old.rank ~= rank or (cc and cc ~= old.cc)) then
    keep_in(free_key(old.rank), false, old)
    keep_in(open_key(old.rank), false, old)
  end
  local fields = { 'exit', exit, 'rank', rank, 'stamp', stamp }
  if cap then
    fields[#fields + 1] = 'cap'; fields[#fields + 1] = cap
    fields[#fields + 1] = 'gw'; fields[#fields + 1] = gw
    fields[#fields + 1] = 'life'; fields[#fields + 1] = life
    fields[#fields + 1] = 'cc'; fields[#fields + 1] = cc
  end
  redis.call('HSET', unit_key(name), unpack(fields))
  -- A unit's gap is in no set: an acquire with a limit reads it as it checks the unit.
  if gap == '' then
    redis.call('HDEL', unit_key(name), 'gap')
  elseif gap then
    redis.call('HSET', unit_key(name), 'gap', gap)
  end
  redis.call('SADD', UNITS, name)
  redis.call('SADD', EXITS, exit)
  redis.call('HSETNX', exit_key(exit), 'served', 0)
  local ids = redis.call('SMEMBERS', live_key(name))
  local exclusive = redis.call('HGET', unit_key(name), 'lease')
  if exclusive then ids[#ids + 1] = exclusive end
  for _, id in ipairs(ids) do
    local l = read_lease(id)
    if l and rank >= 0 and CLASSES[l.class] > rank and revoke(l, now) then
      revoked = revoked + 1
    end
  end
  local u = read_unit(name)
  if u then place(u) end
end

if ARGV[2] == 'sweep' then
  -- After a whole pool's writes: units it did not name drain.
  for _, name in ipairs(redis.call('SMEMBERS', UNITS)) do
    local f = redis.call('HMGET', unit_key(name), 'stamp', 'exit')
    if f[1] ~= stamp then write(name, f[2], -1) end
  end
  return revoked
end
for i = 2, #ARGV, 8 do
  write(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], ARGV[i + 4], ARGV[i + 5],
    ARGV[i + 6], ARGV[i + 7])
end
return revoked
