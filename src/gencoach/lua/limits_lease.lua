-- Whether a request holds a live lease, by the server's clock; writes nothing.
--
-- ARGV: 1 request id. Outcomes: 'alive'; 'gone' (expired, released, completed, unknown).

local request = ARGV[1]
local problem = not_request(request)
if problem then
  return redis.error_reply(problem)
end

local now = now_ms()
local key, expiry = lease_of(request)
return bare((key and expiry > now) and 'alive' or 'gone', '')
