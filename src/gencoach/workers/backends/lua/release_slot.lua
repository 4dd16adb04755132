-- Give a concurrency slot back and wake one waiter in each listening worker process.
--
-- KEYS: 1 the slots sorted set. ARGV: 1 holder id, 2 the channel waiters listen on.
-- Returns 1 when the holder had the slot, 0 when it had none (released already, or
-- lapsed): releasing is idempotent, and only a real release publishes.

if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('PUBLISH', ARGV[2], KEYS[1])
  return 1
end
return 0
