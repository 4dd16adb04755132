-- Admit a coaching request to a stage, or refuse it: check and record in one step.
--
-- ARGV: 1 request id, 2 lease ms, 3 max pending, 4 max unproven, 5 '1' for a human
--       intervention (exempt from both limits, but it takes a lease and is counted),
--       6 stage id.
-- Outcomes: 'admitted'; 'renewed' (the request already held a live lease: it is
-- extended, nothing else changes); 'refused' with detail 'pending', 'unproven' or
-- 'completed:<attempt id>' (the request already produced that attempt).

local request, stage = ARGV[1], ARGV[6]
local problem = not_request(request)
  or not_integer(ARGV[2], 'the lease (ms)', 1)
  or not_integer(ARGV[3], 'max pending', 1)
  or not_integer(ARGV[4], 'max unproven', 1)
  or not_integer(stage, 'the stage id', 0)
if problem then
  return redis.error_reply(problem)
end
local lease_ms, max_pending, max_unproven = tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
local human = ARGV[5] == '1'

local now = now_ms()
purge(now)

local attempt = redis.call('HGET', attempts_key, request)
if attempt then
  return reply('refused', 'completed:' .. attempt, now)
end

local held = lease_of(request)
if held then
  redis.call('ZADD', held, 'XX', now + lease_ms, request)
  return reply('renewed', '', now)
end

if not human then
  local pending, _, completed, proven = counts(now)
  if pending >= max_pending then
    return reply('refused', 'pending', now)
  end
  if pending + completed - proven >= max_unproven then
    return reply('refused', 'unproven', now)
  end
end

redis.call('ZADD', human and human_key or auto_key, now + lease_ms, request)
redis.call('SADD', stages_key, stage)
return reply('admitted', '', now)
