-- A coached branch's marks and its order, in one step: the markers of the nodes the
-- correction touches, the coached candidate's source, then the branch order, published
-- once (its flag set in the same step as the stream entry, so a retry never orders twice).
--
-- KEYS: 1 markers hash; 2 sources hash; 3 orders flags hash; 4 the run's branches stream.
-- ARGV: 1 branch id; 2 the stream entry's field; 3 the order's JSON; 4 the coached
--       candidate's storage id; 5 its source's JSON; then storage id, marker JSON pairs.
-- Returns 1 when the order was published now, 0 when it had been already.

redis.call('HSET', KEYS[1], unpack(ARGV, 6))
redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
if redis.call('HSETNX', KEYS[3], ARGV[1], '1') == 0 then
  return 0
end
redis.call('XADD', KEYS[4], '*', ARGV[2], ARGV[3])
return 1
