-- Ends a live lease with its outcome, and applies the outcome's effect.
-- ARGV: lease id, fence, outcome, latency ms (''), effect (success, blocked, failed, neutral,
-- retire), ban ttl ms, ban jitter, failure streak that bans.
-- Returns {'ok', unit, exit, banned_until|false, recovered, retired session|false, now} or
-- {'refused', reason}.
local id, fence, outcome, latency = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local effect, ttl, jitter, streak = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]),
    tonumber(ARGV[8])
-- No look at the pool's state: a pool Redis forgot has no lease to judge either ('unknown').
local now = clock()
local l, why = judge(id, fence, now)
if not l then return { 'refused', why } end
local fields = { 'outcome', outcome }
if latency ~= '' then fields[3] = 'latency'; fields[4] = latency end
finish(l, 'released', now, fields)

-- A ban of (exit, origin) from now: ttl, doubled for each earlier strike (up to 64 times),
-- times the jitter (1 to 2). Until when.
local function ban(origin)
  local strikes = redis.call('HINCRBY', ban_strikes_key(l.exit), origin, 1)
  local doubled = 2 ^ math.min(math.max(strikes - 1, 0), 6)
  local length = math.floor(ttl * doubled * math.min(math.max(jitter, 1), 2))
  local untl = now + math.max(length, 1)
  redis.call('HSET', ban_until_key(l.exit), origin, int(untl))
  redis.call('ZADD', BANS, int(untl), ban_member(l.exit, origin))
  return untl
end

local banned, recovered, retired = false, 0, false
if effect == 'success' then
  -- The streak ends, and expired bans of the pair are forgotten: their back-off starts over.
  local origins = { '' }
  if l.origin ~= '' then origins[2] = l.origin end
  local seen = redis.call('HMGET', ban_until_key(l.exit), STREAK, unpack(origins))
  if seen[1] then redis.call('HDEL', ban_until_key(l.exit), STREAK) end
  for i, o in ipairs(origins) do
    local untl = seen[i + 1]
    if untl and tonumber(untl) <= now then
      redis.call('HDEL', ban_until_key(l.exit), o)
      redis.call('HDEL', ban_strikes_key(l.exit), o)
      redis.call('ZREM', BANS, ban_member(l.exit, o))
      recovered = recovered + 1
    end
  end
elseif effect == 'blocked' then
  if l.session then
    redis.call('SADD', retired_key(l.exit), l.session)
    retired = l.session
  else
    banned = ban(l.origin)
  end
elseif effect == 'failed' then
  local reached = redis.call('HINCRBY', ban_until_key(l.exit), STREAK, '1')
  if reached >= math.max(streak, 1) then
    redis.call('HDEL', ban_until_key(l.exit), STREAK)
    banned = ban('')
  end
elseif effect == 'retire' then
  if l.session then redis.call('SADD', retired_key(l.exit), l.session) end
end
return { 'ok', l.unit, l.exit, banned, recovered, retired, now }
