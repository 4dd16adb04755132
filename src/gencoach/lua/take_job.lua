-- Take the first job of the first non-empty queue, atomically, into that queue's
-- intermediate list (RQ's own holding place between a queue and the started registry),
-- and read its hash in the same step.
--
-- KEYS: the queue lists in priority order, then their intermediate lists in the same order.
-- ARGV[1]: the prefix of RQ's job hashes (`rq:job:`); a job's hash is not in KEYS, as its
-- id is known only here (RQ runs on one Redis, never a cluster).
-- Returns {index of the queue (1-based), job id, the job's hash as HGETALL gives it}, or
-- nil when every queue is empty. A job whose hash is gone (deleted, or expired while it
-- waited) is dropped from its queue and the next one taken. A job id is never in neither
-- place: a worker that dies right after this script leaves it in the intermediate list,
-- where RQ's maintenance finds it.

local n = #KEYS / 2
for i = 1, n do
  local id = redis.call('LPOP', KEYS[i])
  while id do
    local job = redis.call('HGETALL', ARGV[1] .. id)
    if #job > 0 then
      redis.call('RPUSH', KEYS[n + i], id)
      return {i, id, job}
    end
    id = redis.call('LPOP', KEYS[i])
  end
end
return nil
