-- Grants a lease on a free unit, or returns a task's live lease of the class.
-- ARGV: lease id, class, holder, task (''), origin (''), ttl ms, life ms, session nonce,
-- stateless leases per (unit, origin) (0: no cap), fences the grant takes (its own first),
-- the country the unit must leave from ('': any), the largest round-trip gap ms the unit may
-- have ('': any; a unit whose gap was never measured meets no limit).
-- Returns {id, unit, exit, fence, expires, life_ends, session|false, now, sticky} or false.
local id, class, holder, task, origin = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local ttl, life, nonce, cap = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9])
local fences, country, max_gap = tonumber(ARGV[10]), ARGV[11], tonumber(ARGV[12])
local rank = CLASSES[class]
local epoch, hold_until, reap_at = pool_state()
local now = clock()
reap_at = reap_due(now, reap_at)
-- A new epoch grants nothing until every lease of the lost one has run out.
if now < hold_until then return false end

if task ~= '' then
  local held = redis.call('GET', task_key(class, task))
  local l = held and read_lease(held)
  if l and l.state == 'live' and l.expires > now then
    return { l.id, l.unit, l.exit, l.fence, l.expires, l.life_ends, l.session or false, now, 1 }
  end
end

-- Candidates: the least recently changed units of every rank that admits the class, from the
-- sets that hold exactly the units free for it (nothing live; or, for stateless, room left;
-- only those of the country asked for, if any), a few at a time: the first is taken unless
-- banned for the origin, at its cap, or over the gap limit asked for.
local exclusive = class ~= 'stateless'

-- The unit `name` if it may take this lease now.
local function fits(name)
  local u = read_unit(name)
  if not (u and u.rank >= rank and u.excl == 0) then return nil end
  if exclusive and u.shared > 0 or not exclusive and u.shared >= u.cap then return nil end
  if max_gap and not (u.gap and u.gap <= max_gap) then return nil end
  local bans = redis.call('HMGET', ban_until_key(u.exit), '', origin)
  if num(bans[1]) > now or (origin ~= '' and num(bans[2]) > now) then return nil end
  if not exclusive and origin ~= '' and cap > 0 and
      num(redis.call('HGET', origins_key(u.name), origin)) >= cap then
    return nil
  end
  return u
end

local chosen
local walk_most = max_gap and WALK_GAP_MOST or WALK_MOST
local from, window = 0, 4
while not chosen and from < walk_most do
  local candidates = {}
  local first, last = int(from), int(math.min(from + window, walk_most) - 1)
  for r = rank, 3 do
    local key = in_country(exclusive and free_key(r) or open_key(r), country)
    if rank < 3 then
      -- Several ranks' sets: their units are merged by their places below.
      local found = redis.call('ZRANGE', key, first, last, 'WITHSCORES')
      for i = 1, #found, 2 do
        candidates[#candidates + 1] = { name = found[i], at = tonumber(found[i + 1]) }
      end
    else
      for _, name in ipairs(redis.call('ZRANGE', key, first, last)) do
        candidates[#candidates + 1] = { name = name }
      end
    end
  end
  if #candidates == 0 then break end
  if rank < 3 then
    table.sort(candidates, function(a, b)
      if a.at ~= b.at then return a.at < b.at end
      return a.name < b.name
    end)
  end
  for _, candidate in ipairs(candidates) do
    chosen = fits(candidate.name)
    if chosen then break end
  end
  from, window = from + window, window * 4
end
if not chosen then return false end

local fence = epoch * EPOCH_UNIT
  + redis.call('HINCRBY', exit_key(chosen.exit), 'served', int(fences)) - fences + 1
local life_ends = now + math.max(math.min(life, chosen.life), 1)
local expires = math.min(now + math.max(ttl, 1), life_ends)
local session = false
if chosen.gw then session = nonce .. int(fence) end
local fields = { 'unit', chosen.name, 'exit', chosen.exit, 'class', class, 'holder', holder,
  'fence', int(fence), 'granted', int(now), 'expires', int(expires), 'life_ends', int(life_ends),
  'state', 'live' }
if task ~= '' then fields[#fields + 1] = 'task'; fields[#fields + 1] = task end
if origin ~= '' then fields[#fields + 1] = 'origin'; fields[#fields + 1] = origin end
if session then fields[#fields + 1] = 'session'; fields[#fields + 1] = session end
redis.call('HSET', lease_key(id), unpack(fields))
redis.call('ZADD', EXPIRY, int(expires), id)
if expires < reap_at then redis.call('HSET', META, 'reap_at', int(expires)) end
redis.call('HINCRBY', LIVE, class, '1')
if task ~= '' then redis.call('SET', task_key(class, task), id) end
if exclusive then
  -- An exclusive lease is its unit's only one: the unit names it.
  chosen.excl = chosen.excl + 1
  if chosen.excl > 1 then redis.call('SADD', COLLIDED, chosen.name) end
  place(chosen, now, 'excl', int(chosen.excl), 'lease', id)
else
  redis.call('SADD', live_key(chosen.name), id)
  chosen.shared = chosen.shared + 1
  if origin ~= '' then redis.call('HINCRBY', origins_key(chosen.name), origin, '1') end
  place(chosen, now, 'shared', int(chosen.shared))
end
return { id, chosen.name, chosen.exit, fence, expires, life_ends, session, now, 0 }
