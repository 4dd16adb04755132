-- The exploration budget of a run's situations: at most ARGV[4] coached alternatives
-- start from one place (a parent candidate, or the run's start for root situations),
-- whoever asks, a person or the automatic reinjection, however many ask at once.
--
-- KEYS: 1 the run's alternatives hash: "n:<group>" -> alternatives claimed there;
--       "c:<claim>" -> the group a claim holds a place in.
-- ARGV: 1 "claim" or "release"; 2 the claim (a request id and its reinjection point);
--       3 the group; 4 the budget (claim only).
-- Returns {granted (1|0), alternatives now claimed in the group}. A claim already held is
-- granted again without counting twice; releasing a claim not held changes nothing.

local key, op, claim, group = KEYS[1], ARGV[1], 'c:' .. ARGV[2], 'n:' .. ARGV[3]
if op == 'release' then
  local held = redis.call('HGET', key, claim)
  if not held then
    return {0, tonumber(redis.call('HGET', key, group) or '0')}
  end
  redis.call('HDEL', key, claim)
  return {1, redis.call('HINCRBY', key, 'n:' .. held, -1)}
end
-- A claim: taken and counted first (the common case, two commands), given back at once
-- when that goes beyond the budget.
if redis.call('HSETNX', key, claim, ARGV[3]) == 0 then
  return {1, tonumber(redis.call('HGET', key, group) or '0')}
end
local count = redis.call('HINCRBY', key, group, 1)
if count > tonumber(ARGV[4]) then
  redis.call('HDEL', key, claim)
  return {0, redis.call('HINCRBY', key, group, -1)}
end
return {1, count}
