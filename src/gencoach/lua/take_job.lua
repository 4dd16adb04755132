-- Take the first job of the first non-empty queue, atomically, into that queue's
-- intermediate list (RQ's own holding place between a queue and the started registry).
--
-- KEYS: the queue lists in priority order, then their intermediate lists in the same order.
-- Returns {index of the queue (1-based), job id}, or nil when every queue is empty.
-- A job id is never in neither place: a worker that dies right after this script leaves it
-- in the intermediate list, where RQ's maintenance finds it.

local n = #KEYS / 2
for i = 1, n do
  local id = redis.call('LPOP', KEYS[i])
  if id then
    redis.call('RPUSH', KEYS[n + i], id)
    return {i, id}
  end
end
return nil
