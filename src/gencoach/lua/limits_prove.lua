-- Count a completed attempt as proven: its branch reached stage success. Once per attempt.
--
-- ARGV: 1 attempt id.
-- Outcomes: 'proven' the first time; 'duplicate' after that; 'unknown' when the attempt
-- was never completed in this stage (nothing is recorded).

local attempt = ARGV[1]
local problem = not_integer(attempt, 'the attempt id', 0)
if problem then
  return redis.error_reply(problem)
end

local now = now_ms()
return bare(prove(attempt), '')
