-- Shared head of the runs index scripts; runindex.py prepends it to each of them.
--
-- KEYS, all under the index's own hash tag (one Redis Cluster slot):
--   1 entries (HASH: run id -> JSON [state, scenario, agent, started ms, expires ms or 0])
--   2 combinations (SET of JSON [state, scenario, agent] present in the index)
--   3 counts (HASH: state -> runs in that state)
--   4 expiries (ZSET: saved run id -> when its keys expire, ms since the epoch)
-- ARGV[1] is the prefix of the per-combination ZSETs (run id -> started ms); the prefix
-- carries the same hash tag, so those keys, computed here, live in the same slot.
-- A run's entry, its combination's ZSET and its state's count change in one step.

local entries_key, combos_key, counts_key, expiry_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local combo_prefix = ARGV[1]
local RANK = {active = 0, finished = 1, saved = 2}
local STATES = {'active', 'finished', 'saved'}

local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

local function combo_of(entry)
  return cjson.encode({entry[1], entry[2], entry[3]})
end

local function unindex(run_id, entry)
  local combo = combo_of(entry)
  redis.call('ZREM', combo_prefix .. combo, run_id)
  if redis.call('EXISTS', combo_prefix .. combo) == 0 then
    redis.call('SREM', combos_key, combo)
  end
  if redis.call('HINCRBY', counts_key, entry[1], -1) <= 0 then
    redis.call('HDEL', counts_key, entry[1])
  end
end

local function index(run_id, entry)
  local combo = combo_of(entry)
  redis.call('ZADD', combo_prefix .. combo, entry[4], run_id)
  redis.call('SADD', combos_key, combo)
  redis.call('HINCRBY', counts_key, entry[1], 1)
  redis.call('HSET', entries_key, run_id, cjson.encode(entry))
  if entry[5] > 0 then
    redis.call('ZADD', expiry_key, entry[5], run_id)
  else
    redis.call('ZREM', expiry_key, run_id)
  end
end

local function drop(run_id)
  local raw = redis.call('HGET', entries_key, run_id)
  if not raw then
    return 0
  end
  unindex(run_id, cjson.decode(raw))
  redis.call('HDEL', entries_key, run_id)
  redis.call('ZREM', expiry_key, run_id)
  return 1
end

-- Drop up to `limit` runs whose keys expired; how many were dropped.
local function sweep(limit)
  local due = redis.call('ZRANGE', expiry_key, '-inf', now_ms(), 'BYSCORE', 'LIMIT', 0, limit)
  for _, run_id in ipairs(due) do
    drop(run_id)
  end
  return #due
end
