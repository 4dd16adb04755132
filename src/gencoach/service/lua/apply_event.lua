-- Apply one generation event to a run's graph, exactly once, in one atomic step.
--
-- KEYS: 1 meta, 2 seqs, 3 situation ids, 4 candidate ids, 5 situations,
--       6 candidates, 7 executions, 8 links (candidate -> situations), 9 members
--       (situation -> candidates); all of one run, so all in its hash slot.
-- ARGV: 1 event type, 2 seq, then per type (see graphstore.py).
-- Returns {"ok", storage id or ""}, {"dup", ""} for a seq already applied, or
-- {"err", reason}. Every check runs before the first write: an "err" writes nothing.

local meta, seqs, sids, cids = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local situations, candidates, executions = KEYS[5], KEYS[6], KEYS[7]
local links, members = KEYS[8], KEYS[9]
local kind, seq = ARGV[1], ARGV[2]

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
  redis.call('HSET', meta, 'state', 'active', 'started', ARGV[3], 'started_seq', seq,
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
  -- ARGV: 3 situation id, 4 parent candidate id or '', 5 link kind, 6 body
  if redis.call('HEXISTS', sids, ARGV[3]) == 1 then
    return {'err', 'situation ' .. ARGV[3] .. ' already exists'}
  end
  local parent = 'null'
  if ARGV[4] ~= '' then
    parent = redis.call('HGET', cids, ARGV[4])
    if not parent then
      return {'err', 'unknown parent candidate ' .. ARGV[4]
        .. ' (its candidate.created must come first)'}
    end
  end
  local id = redis.call('HINCRBY', meta, 'next_situation', 1) - 1
  redis.call('HSET', sids, ARGV[3], id)
  redis.call('HSET', situations, id,
    with_fields('"id":' .. id .. ',"parent_id":' .. parent, ARGV[6]))
  if parent == 'null' then
    local roots = redis.call('HGET', meta, 'roots')
    redis.call('HSET', meta, 'roots', roots == '' and tostring(id) or roots .. ',' .. id)
  else
    append(links, parent, id .. ':' .. ARGV[5])
  end
  redis.call('SADD', seqs, seq)
  return {'ok', tostring(id)}
end

if kind == 'candidate.created' then
  -- ARGV: 3 candidate id, 4 situation id, 5 body
  if redis.call('HEXISTS', cids, ARGV[3]) == 1 then
    return {'err', 'candidate ' .. ARGV[3] .. ' already exists'}
  end
  local situation = redis.call('HGET', sids, ARGV[4])
  if not situation then
    return {'err', 'unknown situation ' .. ARGV[4] .. ' (its situation.created must come first)'}
  end
  local id = redis.call('HINCRBY', meta, 'next_candidate', 1) - 1
  redis.call('HSET', cids, ARGV[3], id)
  redis.call('HSET', candidates, id,
    with_fields('"id":' .. id .. ',"situation_id":' .. situation, ARGV[5]))
  append(members, situation, id)
  redis.call('SADD', seqs, seq)
  return {'ok', tostring(id)}
end

if kind == 'candidate.executed' then
  -- ARGV: 3 candidate id, 4 body
  local id = redis.call('HGET', cids, ARGV[3])
  if not id then
    return {'err', 'unknown candidate ' .. ARGV[3] .. ' (its candidate.created must come first)'}
  end
  if redis.call('HEXISTS', executions, id) == 1 then
    return {'err', 'candidate ' .. ARGV[3] .. ' was already executed'}
  end
  redis.call('HSET', executions, id, ARGV[4])
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
