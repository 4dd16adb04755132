-- Move a coaching request to its next state: a compare-and-set of its record, carrying
-- the stage limits' change with it, in one step (`gencoach.service.coaching.requests`).
--
-- KEYS 1-6 as for every limit script, 7 the run's requests (HASH: id -> JSON record).
-- ARGV: 1 request id, 2 the state, 3 the attempt and 4 the number of transitions the
--       stored record must still have (else another writer moved it first), 5 the new
--       JSON record, 6 the limits' part: '' (none), 'release' (the request ended: its
--       lease goes), 'admit' (7 lease ms, 8 max pending, 9 max unproven, 10 '1' for a
--       human intervention, 11 stage id), 'renew' (7 lease ms: a worker took the job,
--       and holds the slot from now), 'prove' (7 the attempt id) or 'complete' (7
--       the stage id, then pairs of a slot (the request id, or another slot of it) and
--       the attempt id its branch was recorded as: each slot's lease becomes that
--       completed attempt; one that conflicts is left as it is).
-- Outcomes: 'moved' (detail: the admission's 'admitted' or 'renewed', the renewal's
-- 'renewed', the release's
-- 'released' or 'absent', 'proven', or each completion's outcome, comma-separated:
-- 'completed', 'late', 'duplicate' or 'conflict'); 'stale' (the record moved on, or is
-- missing: detail 'missing'); 'refused' (the admission, the renewal or the proof said no,
-- detail as theirs: the renewal's 'expired' or 'absent'; the record
-- is unchanged). Nothing is written unless the outcome is 'moved'. The stage's counts in
-- the reply are taken only for an admission (0 otherwise), and counted once: a move costs
-- two commands beside its limits' part.

local request, state, attempt, transitions, record, part =
  ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local problem = not_request(request) or not_integer(ARGV[4], 'the transitions', 0)
if part == 'admit' then
  problem = problem
    or not_integer(ARGV[7], 'the lease (ms)', 1)
    or not_integer(ARGV[8], 'max pending', 1)
    or not_integer(ARGV[9], 'max unproven', 1)
    or not_integer(ARGV[11], 'the stage id', 0)
elseif part == 'renew' then
  problem = problem or not_integer(ARGV[7], 'the lease (ms)', 1)
elseif part == 'prove' then
  problem = problem or not_integer(ARGV[7], 'the attempt id', 0)
elseif part == 'complete' then
  problem = problem or not_integer(ARGV[7], 'the stage id', 0)
  if #ARGV < 9 or (#ARGV - 7) % 2 ~= 0 then
    problem = problem or 'ERR a completion needs pairs of a slot and an attempt id'
  end
  for i = 8, #ARGV, 2 do
    problem = problem or not_request(ARGV[i]) or not_integer(ARGV[i + 1], 'the attempt id', 0)
  end
elseif part ~= '' and part ~= 'release' then
  problem = 'ERR unknown limits part ' .. tostring(part)
end
if problem then
  return redis.error_reply(problem)
end

local function answer(outcome, detail, now, known)
  if now then
    return reply(outcome, detail, now, known)
  end
  return bare(outcome, detail)
end

local raw = redis.call('HGET', KEYS[7], request)
if not raw then
  return answer('stale', 'missing')
end
local ok, stored = pcall(cjson.decode, raw)
if not ok or type(stored) ~= 'table' or type(stored.history) ~= 'table'
    or stored.state ~= state or tostring(stored.attempt) ~= attempt
    or #stored.history ~= transitions then
  return answer('stale', '')
end

local detail, now, known = '', nil, nil
if part == 'admit' then
  now = now_ms()
  local outcome
  outcome, detail, known = admit(request, ARGV[11], tonumber(ARGV[7]), tonumber(ARGV[8]),
    tonumber(ARGV[9]), ARGV[10] == '1', now)
  if outcome == 'refused' then
    return answer('refused', detail, now, known)
  end
  detail = outcome
elseif part == 'renew' then
  detail = renew(request, tonumber(ARGV[7]), now_ms())
  if detail ~= 'renewed' then
    return answer('refused', detail)
  end
elseif part == 'prove' then
  detail = prove(ARGV[7])
  if detail ~= 'proven' then
    return answer('refused', detail)
  end
elseif part == 'release' then
  detail = release(request, now_ms())
elseif part == 'complete' then
  local outcomes, at = {}, now_ms()
  for i = 8, #ARGV, 2 do
    local conflict, recorded = completion_conflict(ARGV[i], ARGV[i + 1])
    if conflict then
      outcomes[#outcomes + 1] = 'conflict'
    else
      outcomes[#outcomes + 1] = complete(ARGV[i], ARGV[i + 1], ARGV[7], at, recorded)
    end
  end
  detail = table.concat(outcomes, ',')
end
redis.call('HSET', KEYS[7], request, record)
return answer('moved', detail, now, known)
