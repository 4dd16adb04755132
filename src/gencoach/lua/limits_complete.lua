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
local conflict, recorded = completion_conflict(request, attempt)
if conflict then
  return reply('conflict', conflict, now)
end
return reply(complete(request, attempt, stage, now, recorded), '', now)
