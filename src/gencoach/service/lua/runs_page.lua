-- One page of the runs index, after dropping up to 1000 runs whose keys expired.
--
-- ARGV[2] is a JSON object: state, scenario, agent (null: any), after (null or the
-- [started ms, run id] of the last run of the previous page), limit.
-- Order: newest start first, run id (descending) between runs started in the same
-- millisecond; a run keeps its place when its state changes, so a walk through the pages
-- neither skips nor repeats a run. The cost is the page's size times the combinations
-- (state, scenario, agent) the filters match, whatever the number of runs.
-- Returns JSON: runs ([run id, state, scenario, agent, started ms] each), whether more
-- follow, the total matching, and per state the runs matching scenario and agent.

sweep(1000)
local query = cjson.decode(ARGV[2])
local any = cjson.null
local matching = {}
local total, counts = 0, {}
for _, combo in ipairs(redis.call('SMEMBERS', combos_key)) do
  local c = cjson.decode(combo)
  if (query.scenario == any or c[2] == query.scenario)
    and (query.agent == any or c[3] == query.agent) then
    local size = redis.call('ZCARD', combo_prefix .. combo)
    counts[c[1]] = (counts[c[1]] or 0) + size
    if query.state == any or c[1] == query.state then
      total = total + size
      table.insert(matching, c)
    end
  end
end

-- Up to `wanted` runs of one combination after the cursor (score, id) when given.
local function collect(c, cursor, wanted, found)
  local key = combo_prefix .. cjson.encode(c)
  local top = '+inf'
  if cursor ~= any then
    local score = string.format('%d', cursor[1])
    local ties = redis.call('ZRANGE', key, score, score, 'BYSCORE')
    for i = #ties, 1, -1 do
      if ties[i] < cursor[2] then
        table.insert(found, {ties[i], c[1], c[2], c[3], cursor[1]})
      end
    end
    top = '(' .. score
  end
  local items = redis.call('ZRANGE', key, top, '-inf', 'BYSCORE', 'REV',
    'LIMIT', 0, wanted, 'WITHSCORES')
  for i = 1, #items, 2 do
    table.insert(found, {items[i], c[1], c[2], c[3], tonumber(items[i + 1])})
  end
end

local found = {}
for _, c in ipairs(matching) do
  collect(c, query.after, query.limit + 1, found)
end
table.sort(found, function(a, b)
  if a[5] ~= b[5] then
    return a[5] > b[5]
  end
  return a[1] > b[1]
end)
local rows = {}
for index = 1, math.min(#found, query.limit) do
  rows[index] = found[index]
end
if query.scenario == any and query.agent == any then
  counts = {}
  for _, state in ipairs(STATES) do
    counts[state] = tonumber(redis.call('HGET', counts_key, state) or '0')
  end
end
return cjson.encode({runs = rows, more = #found > query.limit, total = total, counts = counts})
