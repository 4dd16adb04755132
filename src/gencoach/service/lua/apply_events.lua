-- Apply a run's generation events to its graph, each exactly once, in one atomic step.
--
-- KEYS: 1 meta, 2 seqs, 3 situation ids, 4 candidate ids, 5 situations,
--       6 candidates, 7 executions, 8 links (candidate -> situations), 9 members
--       (situation -> candidates); all of one run, so all in its hash slot.
-- ARGV: 1 a JSON array with one array per event, in order: event type, seq, then
--       per type (see graphstore.py). JSON bodies travel inside as strings.
-- Returns one {outcome, detail} per event: {"ok", storage id or ""}, {"dup", ""} for
-- a seq already applied, or {"err", reason}. Every check of an event runs before its
-- first write: an "err" writes nothing, and later events still apply.

local meta, seqs, sids, cids = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local situations, candidates, executions = KEYS[5], KEYS[6], KEYS[7]
local links, members = KEYS[8], KEYS[9]

local function append(key, field, item)
  local current = redis.call('HGET', key, field)
  if current and current ~= '' then
    redis.call('HSET', key, field, current .. ',' .. item)
  else
    redis.call('HSET', key, field, item)
  end
end

-- Prefix a JSON object body (which starts with '{') with storage fields.
local function with_fields(prefix, body)
  return '{' .. prefix .. ',' .. string.sub(body, 2)
end

local function apply(args)
  local kind, seq = args[1], args[2]
  if redis.call('SISMEMBER', seqs, seq) == 1 then
    return {'dup', ''}
  end

  local state = redis.call('HGET', meta, 'state')

  if kind == 'run.started' then
    if state then
      return {'err', 'the run was already started by event seq '
        .. redis.call('HGET', meta, 'started_seq')}
    end
    local now = redis.call('TIME')
    redis.call('HSET', meta, 'state', 'active', 'started', args[3], 'started_seq', seq,
      'started_at', now[1], 'next_situation', 0, 'next_candidate', 0, 'roots', '')
    redis.call('SADD', seqs, seq)
    return {'ok', ''}
  end

  if not state then
    return {'err', 'unknown run: no run.started event was applied for it'}
  end
  if state ~= 'active' then
    return {'err', 'the run is ' .. state .. ' (run.finished was seq '
      .. redis.call('HGET', meta, 'finished_seq') .. '); later events are refused'}
  end

  if kind == 'situation.created' then
    -- args: 3 situation id, 4 parent candidate id or '', 5 link kind, 6 body
    if redis.call('HEXISTS', sids, args[3]) == 1 then
      return {'err', 'situation ' .. args[3] .. ' already exists'}
    end
    local parent = 'null'
    if args[4] ~= '' then
      parent = redis.call('HGET', cids, args[4])
      if not parent then
        return {'err', 'unknown parent candidate ' .. args[4]
          .. ' (its candidate.created must come first)'}
      end
    end
    local id = redis.call('HINCRBY', meta, 'next_situation', 1) - 1
    redis.call('HSET', sids, args[3], id)
    redis.call('HSET', situations, id,
      with_fields('"id":' .. id .. ',"parent_id":' .. parent, args[6]))
    if parent == 'null' then
      local roots = redis.call('HGET', meta, 'roots')
      redis.call('HSET', meta, 'roots', roots == '' and tostring(id) or roots .. ',' .. id)
    else
      append(links, parent, id .. ':' .. args[5])
    end
    redis.call('SADD', seqs, seq)
    return {'ok', tostring(id)}
  end

  if kind == 'candidate.created' then
    -- args: 3 candidate id, 4 situation id, 5 body
    if redis.call('HEXISTS', cids, args[3]) == 1 then
      return {'err', 'candidate ' .. args[3] .. ' already exists'}
    end
    local situation = redis.call('HGET', sids, args[4])
    if not situation then
      return {'err', 'unknown situation ' .. args[4] .. ' (its situation.created must come first)'}
    end
    local id = redis.call('HINCRBY', meta, 'next_candidate', 1) - 1
    redis.call('HSET', cids, args[3], id)
    redis.call('HSET', candidates, id,
      with_fields('"id":' .. id .. ',"situation_id":' .. situation, args[5]))
    append(members, situation, id)
    redis.call('SADD', seqs, seq)
    return {'ok', tostring(id)}
  end

  if kind == 'candidate.executed' then
    -- args: 3 candidate id, 4 body
    local id = redis.call('HGET', cids, args[3])
    if not id then
      return {'err', 'unknown candidate ' .. args[3] .. ' (its candidate.created must come first)'}
    end
    if redis.call('HEXISTS', executions, id) == 1 then
      return {'err', 'candidate ' .. args[3] .. ' was already executed'}
    end
    redis.call('HSET', executions, id, args[4])
    redis.call('SADD', seqs, seq)
    return {'ok', id}
  end

  if kind == 'run.finished' then
    local now = redis.call('TIME')
    redis.call('HSET', meta, 'state', 'finished', 'finished_seq', seq, 'finished_at', now[1])
    redis.call('SADD', seqs, seq)
    return {'ok', ''}
  end

  return {'err', 'unknown event type ' .. kind}
end

local results = {}
local applied = false
for index, args in ipairs(cjson.decode(ARGV[1])) do
  results[index] = apply(args)
  applied = applied or results[index][1] == 'ok'
end
-- When the run last heard from its generator: an idle active run is abandoned.
if applied then
  redis.call('HSET', meta, 'last_event_at', redis.call('TIME')[1])
end
return results
