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

local now = now_ms()
local key, expiry = lease_of(request)
if not key then
  return bare('gone', 'absent')
end
if expiry <= now then
  redis.call('ZREM', key, request)
  return bare('gone', 'expired')
end
redis.call('ZADD', key, 'XX', now + tonumber(ARGV[2]), request)
return bare('renewed', '')
