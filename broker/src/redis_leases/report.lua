-- Every exit with its fence, live leases, bans in force, and the newest released leases since
-- a time. ARGV: since ms, most.
-- Returns {now, exits {name, leases served}..., live {exit, unit, class, holder, expires, granted}...,
-- bans {exit, origin, until}..., ended {exit, outcome|false, latency|false}...} as five arrays.
local since, most = tonumber(ARGV[1]), tonumber(ARGV[2])
local epoch, hold_until = pool_state()
local now = clock()
reap(now, REAP_MOST)
local exits = {}
for _, name in ipairs(redis.call('SMEMBERS', EXITS)) do
  exits[#exits + 1] = name
  exits[#exits + 1] = num(redis.call('HGET', exit_key(name), 'served'))
end
local live = {}
for _, id in ipairs(redis.call('ZRANGE', EXPIRY, '(' .. now, '+inf', 'BYSCORE')) do
  local f = redis.call('HMGET', lease_key(id), 'exit', 'unit', 'class', 'holder', 'expires',
    'granted', 'state')
  if f[1] and f[7] == 'live' then
    for j = 1, 6 do live[#live + 1] = f[j] end
  end
end
local bans = {}
local banned = redis.call('ZRANGE', BANS, '(' .. now, '+inf', 'BYSCORE', 'WITHSCORES')
for i = 1, #banned, 2 do
  local member = banned[i]
  local colon = string.find(member, ':', 1, true)
  local length = tonumber(string.sub(member, 1, colon - 1))
  bans[#bans + 1] = string.sub(member, colon + 1, colon + length)
  bans[#bans + 1] = string.sub(member, colon + length + 1)
  bans[#bans + 1] = banned[i + 1]
end
local ended = {}
-- The released ones among the newest `most` ended since then (expired and revoked leases
-- report no outcome).
local ids = redis.call('ZRANGE', ENDED, '+inf', since, 'BYSCORE', 'REV', 'LIMIT', 0, most)
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', lease_key(id), 'exit', 'outcome', 'latency', 'state')
  if f[1] and f[4] == 'released' then
    ended[#ended + 1] = f[1]
    ended[#ended + 1] = f[2] or false
    ended[#ended + 1] = f[3] or false
  end
end
return { now, exits, live, bans, ended }
