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
local outcome, detail, known = admit(request, stage, lease_ms, max_pending, max_unproven,
  human, now)
return reply(outcome, detail, now, known)
