-- Take a run off the set of runs with open requests, if none of its requests is open.
--
-- KEYS: 1 the run's requests hash, 2 the set of runs with open requests.
-- ARGV: 1 the run id, 2.. the terminal states.
-- Returns 1 when the run was taken off (or was not on it), 0 when a request is still open:
-- a request opened after the caller read the run keeps it on the set.

local terminal = {}
for index = 2, #ARGV do
  terminal[ARGV[index]] = true
end
for _, value in ipairs(redis.call('HVALS', KEYS[1])) do
  if not terminal[cjson.decode(value)['state']] then
    return 0
  end
end
redis.call('SREM', KEYS[2], ARGV[1])
return 1
