-- Extend a live lease by `lease ms` from now.
--
-- ARGV: 1 request id, 2 lease ms.
-- Outcomes: 'renewed'; 'gone' with detail 'expired' when the lease lapsed before this
-- renewal (it is dropped now), or 'absent' when the controller released, completed or
-- reclaimed it, or it never existed. A renewal never revives an expired lease.

local request = ARGV[1]
local problem = not_request(request) or not_integer(ARGV[2], 'the lease (ms)', 1)
if problem then
  return redis.error_reply(problem)
end

local outcome = renew(request, tonumber(ARGV[2]), now_ms())
if outcome ~= 'renewed' then
  return bare('gone', outcome)
end
return bare('renewed', '')
