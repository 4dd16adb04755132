-- Record what changed of runs: ARGV[2] is a JSON array of
-- [run id, state or null, scenario or null, agent or null, ttl ms or 0, force].
-- A state moves forward only (active -> finished -> saved) unless `force` (a repair from
-- the run's own state); a run not indexed yet needs its state and scenario and agent, and
-- is placed at the server's time now. A saved run's expiry is now + ttl when ttl > 0.
-- Returns how many runs were (re)indexed.

local changed = 0
for _, item in ipairs(cjson.decode(ARGV[2])) do
  local run_id, state, scenario, agent, ttl, force =
    item[1], item[2], item[3], item[4], item[5], item[6]
  local raw = redis.call('HGET', entries_key, run_id)
  local old = raw and cjson.decode(raw)
  local new = nil
  if old then
    new = {old[1], old[2], old[3], old[4], old[5]}
    if state ~= cjson.null and (force == 1 or RANK[state] >= RANK[old[1]]) then
      new[1] = state
    end
    if scenario ~= cjson.null then new[2] = scenario end
    if agent ~= cjson.null then new[3] = agent end
  elseif state ~= cjson.null and scenario ~= cjson.null and agent ~= cjson.null then
    new = {state, scenario, agent, now_ms(), 0}
  end
  if new then
    if new[1] ~= 'saved' then
      new[5] = 0
    elseif ttl > 0 then
      new[5] = now_ms() + ttl
    end
    if old then
      unindex(run_id, old)
    end
    index(run_id, new)
    changed = changed + 1
  end
end
return changed
