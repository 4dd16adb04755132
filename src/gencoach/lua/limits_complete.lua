-- Turn a request's pending lease into a completed attempt (a reinjected branch), once.
--
-- ARGV: 1 request id, 2 attempt id, 3 stage id.
-- Outcomes: 'completed'; 'late' when the request held no live lease (it expired or was
-- released): the branch exists all the same, so the attempt is recorded; 'duplicate'
-- when this request already completed as this attempt (nothing changes); 'conflict',
-- with the reason as detail, when the request completed as another attempt or the
-- attempt belongs to another request (nothing changes).

local request, attempt, stage = ARGV[1], ARGV[2], ARGV[3]
local problem = not_request(request)
  or not_integer(attempt, 'the attempt id', 0)
  or not_integer(stage, 'the stage id', 0)
if problem then
  return redis.error_reply(problem)
end

local now = now_ms()
local recorded = redis.call('HGET', attempts_key, request)
if recorded == attempt then
  return reply('duplicate', '', now)
end
if recorded then
  return reply('conflict', 'request ' .. request .. ' already completed as attempt '
    .. recorded, now)
end
if redis.call('SISMEMBER', completed_key, attempt) == 1 then
  return reply('conflict', 'attempt ' .. attempt .. ' already completed another request', now)
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
return reply(outcome, '', now)
