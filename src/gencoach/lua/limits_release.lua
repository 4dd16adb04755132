-- Give a pending slot back: the request was abandoned, failed or declined.
--
-- ARGV: 1 request id.
-- Outcomes: 'released' when a live lease was dropped; 'absent' otherwise (released
-- before, expired, completed or unknown), which changes nothing: releasing is idempotent.

local request = ARGV[1]
local problem = not_request(request)
if problem then
  return redis.error_reply(problem)
end

local now = now_ms()
return bare(release(request, now), '')
