-- The start of the lease store's function library: what every step shares, set up once when
-- the library loads. Each step's KEYS[1] is its pool's key prefix, `<prefix>{<pool>}:`: every
-- key below starts with it, so the hash tag puts the whole pool in one Redis Cluster slot and
-- each call's keys on one node. `bind` points the keys at the calling step's pool.
local P, EXPIRY, ENDED, BANS, LIVE, COLLIDED, UNITS, EXITS, META
-- Most expired leases one script ends before its own work (the rest by the next ones).
local REAP_MOST = 256
-- Most free units an acquire looks at, least recently changed first: the ones skipped are
-- banned for the origin or at its per-origin cap.
local WALK_MOST = 64
-- The same for an acquire with a gap limit, which also skips the units over it: a limit may
-- admit few units of a large pool, so it looks further. A pool whose first WALK_GAP_MOST free
-- units are all over the limit grants such a lease nothing, as the SQL stores' walks do not
-- (there the limit is part of the walk's filter).
local WALK_GAP_MOST = 4096
local TASK_EGRESS_KEEP_MS = 86400000
-- The field of an exit's ban hash that counts its failures in a row: read with the bans a
-- release looks at, in one command. No origin is named so (the service refuses control
-- characters in an origin).
local STREAK = '\1streak'
-- `reap_at` when no lease is live.
local NEVER = 2 ^ 52

-- The server's clock in ms: every time rule is timed by it, never by a caller.
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local CLASSES = { stateless = 1, anonymous = 2, identity = 3 }
local NAMES = { 'stateless', 'anonymous', 'identity' }

-- Keys, by what they hold.
local function unit_key(unit) return P .. 'unit:' .. unit end          -- hash: the unit
local function live_key(unit) return P .. 'ul:' .. unit end            -- set: live stateless
local function origins_key(unit) return P .. 'uo:' .. unit end         -- hash: stateless per origin
local function free_key(rank) return P .. 'free:' .. rank end          -- zset: nothing live
local function open_key(rank) return P .. 'open:' .. rank end          -- zset: room for stateless
-- The part of a free or open set whose units leave from country `cc` (the whole set for '').
local function in_country(key, cc)
  if cc == '' then return key end
  return key .. ':' .. cc
end
local function exit_key(exit) return P .. 'exit:' .. exit end          -- hash: served
-- hash: origin -> ban until (exit-wide: ''), and STREAK -> failures in a row
local function ban_until_key(exit) return P .. 'banu:' .. exit end
local function ban_strikes_key(exit) return P .. 'bans:' .. exit end   -- hash: origin -> strikes
local function retired_key(exit) return P .. 'retired:' .. exit end    -- set: retired sessions
local function lease_key(id) return P .. 'lease:' .. id end            -- hash: the lease
local function task_key(class, task) return P .. 'task:' .. class .. ':' .. task end
local function task_egress_key(task) return P .. 'tegress:' .. task end
local function egress_key(ip) return P .. 'egress:' .. ip end          -- set: exclusive leases
-- The pool's keys under `prefix`, named again only when the pool changes between calls.
local function bind(prefix)
  if prefix == P then return end
  P = prefix
  EXPIRY = P .. 'expiry'       -- zset: live leases by expiry
  ENDED = P .. 'ended'         -- zset: ended leases by end (pruning, reports)
  BANS = P .. 'banned'         -- zset: "<#exit>:<exit><origin>" by until
  LIVE = P .. 'live'           -- hash: class -> live leases
  COLLIDED = P .. 'collided'   -- set: units with two live exclusive leases (must stay empty)
  UNITS = P .. 'units'         -- set: every unit
  EXITS = P .. 'exits'         -- set: every exit
  -- hash: the pool's epoch, the end of its hold and the server process it was last written
  -- by (`run`). It exists while the pool's state does: when Redis loses the state (a restart
  -- without persistence), it goes too, and every step but `init` answers FORGOTTEN until an
  -- instance has started a new epoch.
  META = P .. 'meta'
end

-- This server process's run id, read once per process: the library is loaded anew in every
-- process (from its RDB or AOF, or by `FUNCTION LOAD`), so this starts empty in each. A pool
-- whose `run` is another process's was written by a server that is gone: restarted from a
-- snapshot or an AOF, or replaced by a replica in a failover. Its state may be older than
-- what that server acknowledged, so every step answers OLDER until an instance has started a
-- new epoch over it (`rebase`).
local RUN
local function run_id()
  if not RUN then RUN = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') end
  return RUN
end
-- Fences are epoch * 2^32 + the exit's count of grants in the epoch: a new epoch's fences are
-- above every earlier one's (exact in Lua's doubles up to 2^21 epochs).
local EPOCH_UNIT = 4294967296

local function num(value) return tonumber(value) or 0 end

-- The pool's epoch, hold (no grant before it ends) and `reap_at` (see `reap_due`). Fails with
-- FORGOTTEN when the state is gone, OLDER when it was written by another server process.
local function pool_state()
  local f = redis.call('HMGET', META, 'epoch', 'hold_until', 'reap_at', 'run')
  if not f[1] then error({ err = 'FORGOTTEN the pool state is gone' }) end
  if f[4] ~= run_id() then error({ err = 'OLDER the pool state may be older than it was' }) end
  return tonumber(f[1]), tonumber(f[2]), num(f[3])
end
-- A whole number as text for a command's argument: Lua's own conversion of its doubles
-- (`%.14g`, through the C library's floating-point printer) costs several times more.
local function int(n) return string.format('%d', n) end

-- A unit's hash as a table.
local function read_unit(unit)
  local f = redis.call('HMGET', unit_key(unit), 'exit', 'rank', 'cap', 'gw', 'life', 'excl',
    'shared', 'lease', 'cc', 'free_at', 'gap')
  if not f[1] then return nil end
  return { name = unit, exit = f[1], rank = num(f[2]), cap = num(f[3]), gw = f[4] == '1',
    life = num(f[5]), excl = num(f[6]), shared = num(f[7]), lease = f[8], cc = f[9] or '',
    free_at = num(f[10]), gap = tonumber(f[11]) }
end

-- Puts unit `u` in set `key` (and its part for the unit's country) at its `free_at` when
-- `member`, else takes it out.
local function keep_in(key, member, u)
  local command = member and 'ZADD' or 'ZREM'
  local function apply(k)
    if member then redis.call(command, k, int(u.free_at), u.name) else redis.call(command, k, u.name) end
  end
  apply(key)
  if u.cc ~= '' then apply(in_country(key, u.cc)) end
end

-- Puts `u` in (or takes it out of) its rank's free and open sets, and their parts for its
-- country, as its counts call for. A grant or an end passes its time `now`, which becomes the
-- unit's `free_at` (its place in the sets: least recently changed first), written with the
-- grant's or end's own changes to the unit (`...`: name, value, …) in one command; a write of
-- the pool passes none and keeps the unit's place, so new units (0) come first and a sync does
-- not reorder the pool. (A unit whose rank or country changes leaves the old sets first: see
-- sync.lua.)
local function place(u, now, ...)
  if now then
    u.free_at = now
    redis.call('HSET', unit_key(u.name), 'free_at', int(now), ...)
  end
  if u.rank <= 0 then return end
  keep_in(free_key(u.rank), u.excl == 0 and u.shared == 0, u)
  keep_in(open_key(u.rank), u.excl == 0 and u.shared < u.cap, u)
end

local function ban_member(exit, origin) return #exit .. ':' .. exit .. origin end

-- Reads a lease's hash as a table (nil when unknown).
local function read_lease(id)
  local f = redis.call('HMGET', lease_key(id), 'unit', 'exit', 'class', 'fence', 'expires',
    'life_ends', 'state', 'origin', 'session', 'task', 'egress', 'granted')
  if not f[1] then return nil end
  return { id = id, unit = f[1], exit = f[2], class = f[3], fence = num(f[4]),
    expires = num(f[5]), life_ends = num(f[6]), state = f[7], origin = f[8] or '',
    session = f[9], task = f[10], egress = f[11], granted = num(f[12]) }
end

-- Ends live lease `l` as `state` at `now`, with `fields` (name, value, …) written with it: its
-- unit's counts, the sets, the gauges. Only the caller that takes it out of EXPIRY counts it
-- off, so an end is counted once; whether this call did. A revoked lease keeps its state and
-- its end: only its unit is let go.
local function finish(l, state, now, fields)
  if redis.call('ZREM', EXPIRY, l.id) == 0 then return false end
  if l.state == 'revoked' then
    redis.call('ZADD', ENDED, int(now), l.id)
  else
    local ended = now
    if state == 'expired' then ended = l.expires end
    redis.call('HSET', lease_key(l.id), 'state', state, 'ended', int(ended), unpack(fields or {}))
    redis.call('ZADD', ENDED, int(ended), l.id)
    redis.call('HINCRBY', LIVE, l.class, '-1')
  end
  if l.egress then redis.call('SREM', egress_key(l.egress), l.id) end
  local u = read_unit(l.unit)
  if not u then return true end
  if l.class == 'stateless' then
    redis.call('SREM', live_key(l.unit), l.id)
    u.shared = math.max(u.shared - 1, 0)
    if l.origin ~= '' then
      if redis.call('HINCRBY', origins_key(u.name), l.origin, '-1') <= 0 then
        redis.call('HDEL', origins_key(u.name), l.origin)
      end
    end
    place(u, now, 'shared', int(u.shared))
  else
    u.excl = math.max(u.excl - 1, 0)
    if u.excl == 1 then redis.call('SREM', COLLIDED, u.name) end
    place(u, now, 'excl', int(u.excl))
  end
  return true
end

-- Ends the leases that expired by `now` (at most `most` of them, oldest first): how many.
local function reap(now, most)
  local ids = redis.call('ZRANGE', EXPIRY, '-inf', int(now), 'BYSCORE', 'LIMIT', '0', int(most))
  for _, id in ipairs(ids) do
    local l = read_lease(id)
    if l then finish(l, 'expired', now) else redis.call('ZREM', EXPIRY, id) end
  end
  return #ids
end

-- An acquire's reap, which it needs only once `reap_at` has come: META's `reap_at` is never
-- later than the first expiry in EXPIRY, since a lease's expiry goes into EXPIRY through an
-- acquire or a renewal, and each of those lowers `reap_at` to it when it is earlier (a reap or
-- a release only takes expiries out). Reaps when it has come and notes the next; `reap_at`.
local function reap_due(now, reap_at)
  if now < reap_at then return reap_at end
  local next_at = now
  if reap(now, REAP_MOST) < REAP_MOST then
    next_at = tonumber(redis.call('ZRANGE', EXPIRY, '0', '0', 'WITHSCORES')[2]) or NEVER
  end
  redis.call('HSET', META, 'reap_at', int(next_at))
  return next_at
end

-- Revokes live lease `l` at `now` (its unit no longer admits its class): renewals and releases
-- are refused from now on, but the unit stays held until the lease would have expired, since
-- its holder hears of the revocation only when it renews; the reaper lets the unit go then.
local function revoke(l, now)
  if l.state ~= 'live' or l.expires <= now then return false end
  redis.call('HSET', lease_key(l.id), 'state', 'revoked', 'ended', int(now))
  redis.call('HINCRBY', LIVE, l.class, '-1')
  return true
end

-- The lease `id` if `fence` is its own and it is live at `now`, else why not.
local function judge(id, fence, now)
  local l = read_lease(id)
  if not l then return nil, 'unknown' end
  if l.fence ~= fence then return nil, 'stale_fence' end
  if l.state == 'released' then return nil, 'released' end
  if l.state == 'revoked' then return nil, 'revoked' end
  if l.state ~= 'live' or l.expires <= now then return nil, 'expired' end
  return l, nil
end
