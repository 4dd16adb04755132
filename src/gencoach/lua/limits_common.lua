-- Shared head of the per-stage limit scripts; limits.py prepends it to each of them.
--
-- KEYS, all of one stage and under the run's hash tag (one Redis Cluster slot):
--   1 automatic leases (ZSET: request id -> lease expiry, ms since the epoch)
--   2 human leases (same shape; never refused by the limits, but counted)
--   3 completed attempt ids (SET)
--   4 proven attempt ids (SET, a subset of 3)
--   5 completed requests (HASH: request id -> attempt id)
--   6 the run's stage index (SET of stage ids)
-- Every script replies {outcome, detail, pending, human pending, completed, proven}: the
-- counts taken after the script's writes (`reply`), or zeros (`bare`) from the scripts
-- whose callers need only the outcome (renew, lease, release, prove), which spares four
-- commands a call. Time is the server's (TIME), never a client's.
-- Scripts check their arguments before the first write: Lua writes are not rolled back.

local auto_key, human_key, completed_key, proven_key, attempts_key, stages_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- A message when `value` is not an integer of at least `least`, else nil.
local function not_integer(value, name, least)
  local number = tonumber(value)
  if number == nil or number ~= math.floor(number) or number < least then
    return 'ERR ' .. name .. ' must be an integer of at least ' .. least
      .. ', got ' .. tostring(value)
  end
  return nil
end

local function not_request(value)
  if value == nil or value == '' then
    return 'ERR the request id must not be empty'
  end
  return nil
end

-- Drop the leases that expired (expiry <= now): their holders stopped renewing.
local function purge(now)
  redis.call('ZREMRANGEBYSCORE', auto_key, '-inf', now)
  redis.call('ZREMRANGEBYSCORE', human_key, '-inf', now)
end

-- The key holding the request's lease and its expiry, or nil when it holds none.
local function lease_of(request)
  local expiry = redis.call('ZSCORE', auto_key, request)
  if expiry then
    return auto_key, tonumber(expiry)
  end
  expiry = redis.call('ZSCORE', human_key, request)
  if expiry then
    return human_key, tonumber(expiry)
  end
  return nil, nil
end

-- Live leases only, so a read that purges nothing still counts right.
local function counts(now)
  local live = '(' .. now
  local human = redis.call('ZCOUNT', human_key, live, '+inf')
  return redis.call('ZCOUNT', auto_key, live, '+inf') + human, human,
    redis.call('SCARD', completed_key), redis.call('SCARD', proven_key)
end

-- `known`, when given, holds the counts as they stand after the script's writes (an
-- admission that counted before writing knows them without counting again).
local function reply(outcome, detail, now, known)
  local pending, human, completed, proven
  if known then
    pending, human, completed, proven = known[1], known[2], known[3], known[4]
  else
    pending, human, completed, proven = counts(now)
  end
  return {outcome, detail, pending, human, completed, proven}
end

local function bare(outcome, detail)
  return {outcome, detail, 0, 0, 0, 0}
end

-- The admission of `request` (the limits check and the lease it grants), at `now`:
-- returns the outcome ('admitted', 'renewed' or 'refused'), the refusal's detail, and
-- the counts after it when it counted them on the way (for `reply`), else nil.
local function admit(request, stage, lease_ms, max_pending, max_unproven, human, now)
  purge(now)
  local attempt = redis.call('HGET', attempts_key, request)
  if attempt then
    return 'refused', 'completed:' .. attempt
  end
  local held = lease_of(request)
  if held then
    redis.call('ZADD', held, 'XX', now + lease_ms, request)
    return 'renewed', ''
  end
  if not human then
    local pending, humans, completed, proven = counts(now)
    local known = {pending, humans, completed, proven}
    if pending >= max_pending then
      return 'refused', 'pending', known
    end
    if pending + completed - proven >= max_unproven then
      return 'refused', 'unproven', known
    end
    known[1] = pending + 1
    redis.call('ZADD', auto_key, now + lease_ms, request)
    redis.call('SADD', stages_key, stage)
    return 'admitted', '', known
  end
  redis.call('ZADD', human_key, now + lease_ms, request)
  redis.call('SADD', stages_key, stage)
  return 'admitted', ''
end

-- Extend the request's live lease by `lease_ms` from `now`: 'renewed'; else 'expired'
-- (it lapsed before this renewal, and is dropped now) or 'absent' (released, completed,
-- reclaimed, or never taken). A renewal never revives an expired lease.
local function renew(request, lease_ms, now)
  local key, expiry = lease_of(request)
  if not key then
    return 'absent'
  end
  if expiry <= now then
    redis.call('ZREM', key, request)
    return 'expired'
  end
  redis.call('ZADD', key, 'XX', now + lease_ms, request)
  return 'renewed'
end

-- Drop the request's lease, if any: 'released' when a live one was dropped, else 'absent'.
local function release(request, now)
  purge(now)
  local removed = redis.call('ZREM', auto_key, request) + redis.call('ZREM', human_key, request)
  return removed > 0 and 'released' or 'absent'
end

-- Count a completed attempt as proven, once: 'proven', 'duplicate' or 'unknown' (never
-- completed in this stage: nothing is recorded).
local function prove(attempt)
  if redis.call('SISMEMBER', completed_key, attempt) == 0 then
    return 'unknown'
  end
  if redis.call('SADD', proven_key, attempt) == 1 then
    return 'proven'
  end
  return 'duplicate'
end

-- Why `request` cannot complete as `attempt` (it completed as another attempt, or the
-- attempt belongs to another request), or nil; and the attempt it completed as, if any
-- (for `complete`).
local function completion_conflict(request, attempt)
  local recorded = redis.call('HGET', attempts_key, request)
  if recorded and recorded ~= attempt then
    return 'request ' .. request .. ' already completed as attempt ' .. recorded, recorded
  end
  if not recorded and redis.call('SISMEMBER', completed_key, attempt) == 1 then
    return 'attempt ' .. attempt .. ' already completed another request', recorded
  end
  return nil, recorded
end

-- Turn the request's lease into the completed `attempt` (a reinjected branch), once; the
-- caller checked `completion_conflict` first, which gave `recorded`. 'completed'; 'late'
-- when the request held no live lease (it expired or was released): the branch exists
-- all the same, so the attempt is recorded; 'duplicate' when it already completed as
-- this attempt.
local function complete(request, attempt, stage, now, recorded)
  if recorded == attempt then
    return 'duplicate'
  end
  local outcome = 'late'
  local key, expiry = lease_of(request)
  if key then
    if expiry > now then
      outcome = 'completed'
    end
    redis.call('ZREM', key, request)
  end
  redis.call('SADD', completed_key, attempt)
  redis.call('HSET', attempts_key, request, attempt)
  redis.call('SADD', stages_key, stage)
  return outcome
end
