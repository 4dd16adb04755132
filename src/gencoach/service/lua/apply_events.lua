-- Apply a run's generation events to its graph in seq order, each exactly once, in one
-- atomic step; an event whose turn has not come waits in Redis (parked) for the gap below
-- it, and is applied, in this same step, when the gap fills.
--
-- KEYS: 1 meta, 2 seqs, 3 situation ids, 4 candidate ids, 5 situations, 6 candidates,
--       7 executions, 8 links (candidate -> situations), 9 members (situation ->
--       candidates), 10 parked (seq -> the waiting event's arguments, JSON; and "wait" ->
--       since when the run waits without progress, and the newest stream entry id that
--       brought a waiting event), 11 released (seq -> an event applied from parked and
--       not yet handed on by a controller); all of one run, so all in its hash slot.
-- ARGV: 1 a JSON array with one array per event, in seq order: event type, seq, then per
--       type (see sequencing.py); 2 the mode: "ordered" (a generator's events), "own"
--       (the controller's own, applied at once) or "sweep" (no events: see below);
--       3 how long (s) a run may wait without progress before its waiting events apply
--       without the missing ones; 4 "ordered": the newest stream entry id of the events
--       given ("" if none); "sweep": the oldest entry id still pending in the events
--       stream ("" if none). A sweep applies the waiting events without the missing ones
--       once no entry older than the newest that brought one is pending (no controller
--       holds an event that could fill the gap) or the wait timed out, and hands back
--       every released event not yet handed on.
-- Returns {results, released, deadline}: one {outcome, detail} per event given, where the
-- outcome is "ok" (detail: the storage id or ""), "dup" (detail "parked" when the seq
-- waits already), "err" (detail: why) or "parked"; a flat list of seq, record pairs for
-- the events applied from parked (a record is when (Redis time, s), a space, and JSON
-- [outcome, detail, arguments JSON, missing]: the seqs it went without, or "run.started"
-- for a run that never started);
-- and when the run's wait times out (Redis time, s), 0 when nothing waits, -1 when the
-- run never waited in this step (always, for the controller's own nodes).
-- Every check of an event runs before its first write: an "err" writes nothing.

local meta, seqs, sids, cids = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local situations, candidates, executions = KEYS[5], KEYS[6], KEYS[7]
local links, members, parked, released = KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local mode, timeout = ARGV[2], tonumber(ARGV[3])
-- A controller hands on what it released within moments; a sweep waits this long.
local HAND_ON_S = 5

local head = redis.call('HMGET', meta, 'state', 'next_seq')
local state = head[1]
-- The seq whose turn it is: none before run.started, nor for runs started by an older
-- version, whose events apply as they come.
local next_seq = tonumber(head[2])
local ordered = mode ~= 'own' and (next_seq ~= nil or not state)
-- While events wait: since when (without progress), and the newest entry that brought one.
-- The controller's own nodes neither wait nor end a wait: their step leaves it unread.
local wait = mode ~= 'own' and redis.call('HGET', parked, 'wait') or nil
local since, newest
if wait then
  since, newest = string.match(wait, '^(%S+) (%S*)$')
  since = tonumber(since)
end
local first_next, first_wait = next_seq, wait

local clock
local function now()
  clock = clock or redis.call('TIME')
  return clock
end

-- What this step wrote, not read back: the storage ids of the situations and candidates
-- it created (as strings, as HGET gives them), and the lists it appended to.
local made_sids, made_cids, appended = {}, {}, {}

local function append(key, field, item)
  local slot = key .. ' ' .. tostring(field)
  local current = appended[slot]
  if current == nil then
    current = redis.call('HGET', key, field)
  end
  local value = item
  if current and current ~= '' then
    value = current .. ',' .. item
  end
  redis.call('HSET', key, field, value)
  appended[slot] = value
end

-- Prefix a JSON object body (which starts with '{') with storage fields.
local function with_fields(prefix, body)
  return '{' .. prefix .. ',' .. string.sub(body, 2)
end

local applied = false

-- The controller's own nodes (a coached situation and candidate) are told apart by their
-- ids, which it derives from the request and the reinjection point: applied again, one is
-- a duplicate by its id, and its seq needs no record.
local function own_node(args)
  return mode == 'own' and (args[1] == 'situation.created' or args[1] == 'candidate.created')
end

local function seen(args)
  if not own_node(args) then
    redis.call('SADD', seqs, args[2])
  end
end

-- Apply one event whose checks all run here (not whether its seq was seen).
local function apply(args)
  local kind, seq = args[1], args[2]
  if kind == 'run.started' then
    if state then
      return {'err', 'the run was already started by event seq '
        .. redis.call('HGET', meta, 'started_seq')}
    end
    local time = now()
    redis.call('HSET', meta, 'state', 'active', 'started', args[3], 'started_seq', seq,
      'started_at', time[1], 'generation', time[1] .. '.' .. time[2], 'next_situation', 0,
      'next_candidate', 0, 'roots', '')
    state = 'active'
    redis.call('SADD', seqs, seq)
    applied = true
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
      if own_node(args) then
        return {'dup', ''}
      end
      return {'err', 'situation ' .. args[3] .. ' already exists'}
    end
    local parent = 'null'
    if args[4] ~= '' then
      parent = made_cids[args[4]] or redis.call('HGET', cids, args[4])
      if not parent then
        return {'err', 'unknown parent candidate ' .. args[4]
          .. ' (its candidate.created must come first)'}
      end
    end
    local id = redis.call('HINCRBY', meta, 'next_situation', 1) - 1
    redis.call('HSET', sids, args[3], id)
    made_sids[args[3]] = tostring(id)
    redis.call('HSET', situations, id,
      with_fields('"id":' .. id .. ',"parent_id":' .. parent, args[6]))
    if parent == 'null' then
      local roots = redis.call('HGET', meta, 'roots')
      redis.call('HSET', meta, 'roots', roots == '' and tostring(id) or roots .. ',' .. id)
    else
      append(links, parent, id .. ':' .. args[5])
    end
    seen(args)
    applied = true
    return {'ok', tostring(id)}
  end

  if kind == 'candidate.created' then
    -- args: 3 candidate id, 4 situation id, 5 body
    if redis.call('HEXISTS', cids, args[3]) == 1 then
      if own_node(args) then
        return {'dup', ''}
      end
      return {'err', 'candidate ' .. args[3] .. ' already exists'}
    end
    local situation = made_sids[args[4]] or redis.call('HGET', sids, args[4])
    if not situation then
      return {'err', 'unknown situation ' .. args[4] .. ' (its situation.created must come first)'}
    end
    local id = redis.call('HINCRBY', meta, 'next_candidate', 1) - 1
    redis.call('HSET', cids, args[3], id)
    made_cids[args[3]] = tostring(id)
    redis.call('HSET', candidates, id,
      with_fields('"id":' .. id .. ',"situation_id":' .. situation, args[5]))
    append(members, situation, id)
    seen(args)
    applied = true
    return {'ok', tostring(id)}
  end

  if kind == 'candidate.executed' then
    -- args: 3 candidate id, 4 body
    local id = made_cids[args[3]] or redis.call('HGET', cids, args[3])
    if not id then
      return {'err', 'unknown candidate ' .. args[3] .. ' (its candidate.created must come first)'}
    end
    if redis.call('HEXISTS', executions, id) == 1 then
      return {'err', 'candidate ' .. args[3] .. ' was already executed'}
    end
    redis.call('HSET', executions, id, args[4])
    redis.call('SADD', seqs, seq)
    applied = true
    return {'ok', id}
  end

  if kind == 'run.finished' then
    redis.call('HSET', meta, 'state', 'finished', 'finished_seq', seq, 'finished_at', now()[1])
    state = 'finished'
    redis.call('SADD', seqs, seq)
    applied = true
    return {'ok', ''}
  end

  return {'err', 'unknown event type ' .. kind}
end

-- An event whose turn is not ordered (own events, older runs) or has passed (a gap
-- released without it): applied unless its seq was.
local function unordered(args)
  if not own_node(args) and redis.call('SISMEMBER', seqs, args[2]) == 1 then
    return {'dup', ''}
  end
  return apply(args)
end

local out = {}
local mine = {}  -- the seqs released in this step
local drained = false

-- Keep a released event until a controller has handed it on (terminals, dead letters).
local function release(seq, value, result, missing)
  local record = now()[1] .. ' ' .. cjson.encode({result[1], result[2], value, missing})
  redis.call('HSET', released, seq, record)
  mine[tostring(seq)] = true
  out[#out + 1] = tostring(seq)
  out[#out + 1] = record
  drained = true
end

-- Stream entry ids compare as (milliseconds, sequence).
local function entry_before(a, b)
  local a_ms, a_seq = string.match(a, '^(%d+)-(%d+)$')
  local b_ms, b_seq = string.match(b, '^(%d+)-(%d+)$')
  a_ms, b_ms = tonumber(a_ms), tonumber(b_ms)
  return a_ms < b_ms or (a_ms == b_ms and tonumber(a_seq) < tonumber(b_seq))
end

local function park(args)
  if redis.call('HSETNX', parked, args[2], cjson.encode(args)) == 0 then
    return {'dup', 'parked'}
  end
  since = since or tonumber(now()[1])
  local brought = ARGV[4]
  if brought ~= '' and (not newest or newest == '' or entry_before(newest, brought)) then
    newest = brought
  end
  return {'parked', ''}
end

-- Apply the parked events whose turn has come, in seq order.
local function drain()
  while since do
    local value = redis.call('HGET', parked, next_seq)
    if not value then
      return
    end
    redis.call('HDEL', parked, next_seq)
    local seq = next_seq
    next_seq = seq + 1
    release(seq, value, apply(cjson.decode(value)), '')
  end
end

-- The parked events numbered below a run's run.started, applied as late ones.
local function below_start()
  if not since then
    return
  end
  local early = {}
  for _, field in ipairs(redis.call('HKEYS', parked)) do
    local seq = tonumber(field)  -- nil for "wait"
    if seq and seq < next_seq then
      early[#early + 1] = seq
    end
  end
  table.sort(early)
  for _, seq in ipairs(early) do
    local value = redis.call('HGET', parked, seq)
    redis.call('HDEL', parked, seq)
    release(seq, value, unordered(cjson.decode(value)), '')
  end
end

local function take(args)
  if not ordered then
    return unordered(args)
  end
  local seq = tonumber(args[2])
  if next_seq == nil then
    if args[1] ~= 'run.started' then
      return park(args)
    end
    local result = apply(args)
    next_seq = seq + 1
    below_start()
    drain()
    return result
  end
  if seq < next_seq then
    return unordered(args)
  end
  if seq > next_seq then
    return park(args)
  end
  next_seq = seq + 1
  local result = apply(args)
  drain()
  return result
end

-- Nothing can fill the gap any more, or the wait timed out: apply every parked event in
-- seq order without the missing ones, naming them.
local function release_all()
  local entries = {}
  local fields = redis.call('HGETALL', parked)
  for index = 1, #fields, 2 do
    if fields[index] ~= 'wait' then
      entries[#entries + 1] = {tonumber(fields[index]), fields[index + 1]}
    end
  end
  table.sort(entries, function(a, b) return a[1] < b[1] end)
  redis.call('DEL', parked)
  local missing = next_seq == nil and 'run.started' or ''
  for _, entry in ipairs(entries) do
    local seq, value = entry[1], entry[2]
    local result
    if next_seq == nil then
      result = apply(cjson.decode(value))
    elseif seq < next_seq then
      result = unordered(cjson.decode(value))
    else
      if seq > next_seq then
        local gap = seq - 1 > next_seq and next_seq .. '-' .. (seq - 1) or tostring(next_seq)
        missing = missing == '' and gap or missing .. ',' .. gap
      end
      next_seq = seq + 1
      result = apply(cjson.decode(value))
    end
    release(seq, value, result, missing)
  end
  since = nil
end

local results = {}
for index, args in ipairs(cjson.decode(ARGV[1])) do
  results[index] = take(args)
end

if ordered and since then
  if drained then
    local waiting = redis.call('HLEN', parked) - (first_wait and 1 or 0)
    -- Progress: the wait for the next gap, if any, starts now.
    since = waiting > 0 and tonumber(now()[1]) or nil
  elseif tonumber(now()[1]) - since >= timeout then
    release_all()
  elseif mode == 'sweep' and (ARGV[4] == '' or newest and newest ~= ''
      and entry_before(newest, ARGV[4])) then
    release_all()  -- no controller holds an event older than the newest waiting one
  end
end

local deadline = -1
if since then
  deadline = since + timeout
elseif first_wait or drained or mode == 'sweep' then
  deadline = 0
  -- Released events a controller died before handing on: the next sweep hands them on.
  if mode ~= 'sweep' and redis.call('HLEN', released) > #out / 2 then
    deadline = tonumber(now()[1])
  end
end
if mode == 'sweep' then
  -- Hand on again what its controller has not confirmed in HAND_ON_S: it died meanwhile.
  local held = redis.call('HGETALL', released)
  for index = 1, #held, 2 do
    if not mine[held[index]] then
      local at = tonumber(string.match(held[index + 1], '^(%d+) '))
      if at <= tonumber(now()[1]) - HAND_ON_S then
        out[#out + 1] = held[index]
        out[#out + 1] = held[index + 1]
      elseif deadline <= 0 then
        deadline = tonumber(now()[1])  -- not yet: stay in the gaps set to be looked at again
      end
    end
  end
end

local updates = {}
if applied then
  -- When the run last heard from its generator: an idle active run is abandoned. (Its
  -- deadline in `Keys.heard`, in another hash slot, is written just before this call,
  -- in the same round trip: gencoach.service.store.watches.)
  updates[#updates + 1] = 'last_event_at'
  updates[#updates + 1] = now()[1]
end
if next_seq ~= first_next then
  updates[#updates + 1] = 'next_seq'
  updates[#updates + 1] = next_seq
end
if #updates > 0 then
  redis.call('HSET', meta, unpack(updates))
end
local now_wait = since and (since .. ' ' .. (newest or '')) or nil
if now_wait and now_wait ~= first_wait then
  redis.call('HSET', parked, 'wait', now_wait)
elseif first_wait and not now_wait then
  redis.call('DEL', parked)  -- only "wait" is left, if anything
end
return {results, out, tostring(deadline)}
