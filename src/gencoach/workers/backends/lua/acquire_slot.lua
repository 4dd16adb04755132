-- Take one of a backend's concurrency slots, shared by every worker process.
--
-- KEYS: 1 the slots sorted set (holder id -> lease expiry in ms since the epoch).
-- ARGV: 1 holder id, 2 the number of slots, 3 the lease (ms).
-- Returns 0 when the holder has a slot (taken now, or its lease renewed); when all are
-- held, the milliseconds until the first lease lapses (at least 1), which is when a
-- waiter must look again if no release wakes it first. Leases past their expiry are
-- dropped first, so a dead holder's slot frees itself; the clock is the server's.

local key, holder = KEYS[1], ARGV[1]
local limit, lease = tonumber(ARGV[2]), tonumber(ARGV[3])
if not limit or not lease or limit < 1 or lease < 1 then
  return redis.error_reply('acquire_slot: bad limit or lease')
end

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)

-- Whether the holder has a slot already (its lease is then renewed) matters only when
-- every slot is held: the common case, a free slot, costs no ZSCORE.
if redis.call('ZCARD', key) >= limit and not redis.call('ZSCORE', key, holder) then
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(first[2]) - now)
end
redis.call('ZADD', key, now + lease, holder)
-- The set outlives its longest lease only: an idle backend leaves no key behind.
if redis.call('PTTL', key) < lease then
  redis.call('PEXPIRE', key, lease)
end
return 0
