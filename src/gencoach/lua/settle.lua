-- Whether a run is settled: no branch order can come for it until its generator reports
-- something new. Checked, and answered on the run's branch stream, in one step
-- (`gencoach.settling`).
--
-- KEYS: 1 the run's settle probe (HASH: asked, expected, answered), 2 its routed
--       terminals (SET), 3 its coaching requests (HASH: id -> JSON record), 4 its branch
--       stream; all of one run, so all in its hash slot.
-- ARGV: 1 'ask' (2 run id, 3 the generator's last seq, 4 a JSON list of the terminals
--       it reported since its last answer), 'routed' (2 run id, 3 a terminal gencoach has
--       just routed) or 'check' (2 run id).
-- Returns 'settled' (answered now, or already for this probe), 'none' (no probe to
-- answer), 'routing' (a terminal of the probe is not routed yet) or 'coaching' (a
-- request may still publish an order).
--
-- The run is settled for the probe when every terminal it lists has been routed and
-- every request is past publishing orders: its orders, if any, are already on the
-- stream, before the `run.settled` entry this writes.

local probe, routed, requests, branches = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, run_id = ARGV[1], ARGV[2]

-- The states in which a request may still publish an order (lifecycle.MAY_ORDER; a test
-- keeps the two the same).
local MAY_ORDER = {
  opportunity = true, admitted = true, queued = true, diagnosing = true,
  repairing = true, rewriting = true, corrected = true,
}

if op == 'ask' then
  if not string.match(ARGV[3], '^%-?%d+$') then
    return redis.error_reply('ERR the last seq must be an integer, got ' .. tostring(ARGV[3]))
  end
  local ok, expected = pcall(cjson.decode, ARGV[4])
  if not ok or type(expected) ~= 'table' then
    return redis.error_reply('ERR the terminals must be a JSON list')
  end
  -- A new probe is answered anew, even for a seq answered before (a waiter that missed it).
  redis.call('HDEL', probe, 'answered')
  redis.call('HSET', probe, 'asked', ARGV[3], 'expected', ARGV[4])
elseif op == 'routed' then
  redis.call('SADD', routed, ARGV[3])
elseif op ~= 'check' then
  return redis.error_reply('ERR unknown settle operation ' .. tostring(op))
end

local asked = redis.call('HGET', probe, 'asked')
if not asked then
  return 'none'
end
if redis.call('HGET', probe, 'answered') == asked then
  return 'settled'
end
for _, terminal in ipairs(cjson.decode(redis.call('HGET', probe, 'expected') or '[]')) do
  if redis.call('SISMEMBER', routed, terminal) == 0 then
    return 'routing'
  end
end
for _, raw in ipairs(redis.call('HVALS', requests)) do
  local ok, request = pcall(cjson.decode, raw)
  if ok and type(request) == 'table' and MAY_ORDER[request.state] then
    return 'coaching'
  end
end
redis.call('XADD', branches, '*', 'settled',
  '{"type":"run.settled","run_id":' .. cjson.encode(run_id) .. ',"through_seq":' .. asked .. '}')
redis.call('HSET', probe, 'answered', asked)
return 'settled'
