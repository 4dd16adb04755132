"""Controller leases: who is alive, work held by one live controller, twins found out."""

from __future__ import annotations

import anyio
import pytest
from redis.asyncio import Redis
from structlog.testing import capture_logs

from gencoach.constants import Keys
from gencoach.service.leases import Lease

pytestmark = pytest.mark.asyncio

KEYS = Keys()


async def test_a_lease_lives_while_renewed_and_goes_when_given_up(async_redis: Redis) -> None:
    """A running lease makes its consumer alive to the others; stopping gives it up at
    once (survivors need not wait for it to expire)."""
    lease = Lease(async_redis, KEYS, "first", lease_s=10)
    observer = Lease(async_redis, KEYS, "second", lease_s=10)
    assert not await observer.alive("first")
    async with anyio.create_task_group() as tg:
        await tg.start(lease.run)
        assert await observer.alive("first")
        assert 0 < await async_redis.pttl(KEYS.lease("first")) <= 10_000
        lease.stop()
    assert not await observer.alive("first")


async def test_held_work_is_left_to_a_live_holder_and_taken_from_a_dead_one(
    async_redis: Redis,
) -> None:
    """A key one controller holds is refused to another while the holder's lease lives,
    taken over once it lapses, and let go only by whoever holds it."""
    first = Lease(async_redis, KEYS, "first", lease_s=10)
    second = Lease(async_redis, KEYS, "second", lease_s=10)
    await first.renew()
    key = KEYS.reinjecting("r1", "r1:0:failure")
    assert await first.hold(key, ttl_s=60)
    assert not await second.hold(key, ttl_s=60)
    await second.let_go(key)
    assert await async_redis.get(key) == b"first"
    await async_redis.delete(KEYS.lease("first"))  # its lease lapsed: it died
    assert await second.hold(key, ttl_s=60)
    await first.let_go(key)
    assert await async_redis.get(key) == b"second"
    await second.let_go(key)
    assert await async_redis.exists(key) == 0


async def test_two_controllers_under_one_consumer_name_say_so(async_redis: Redis) -> None:
    """Two processes renewing the same consumer's lease find each other out; a restart
    that finds its dead predecessor's lease does not cry wolf."""
    predecessor = Lease(async_redis, KEYS, "shared", lease_s=10)
    await predecessor.renew()
    restarted = Lease(async_redis, KEYS, "shared", lease_s=10)
    with capture_logs() as logs:
        await restarted.renew()
        await restarted.renew()
    assert logs == []
    twin = Lease(async_redis, KEYS, "shared", lease_s=10)
    with capture_logs() as logs:
        await twin.renew()
        await restarted.renew()
        await twin.renew()
    assert [entry["event"] for entry in logs] == ["controller.consumer_shared"] * 2
    assert "give each controller its own controller.consumer" in logs[0]["reason"]


async def test_letting_go_is_one_step(async_redis: Redis) -> None:
    """A holder lets its key go in one script call (a GET then a DEL could delete a key
    that lapsed in between and was taken by another controller)."""
    holder = Lease(async_redis, KEYS, "holder", lease_s=10)
    key = KEYS.reinjecting("r2", "r2:0:failure")
    assert await holder.hold(key, ttl_s=60)
    await holder.let_go(key)  # loads the script
    assert await holder.hold(key, ttl_s=60)
    before = await async_redis.info("commandstats")
    await holder.let_go(key)
    after = await async_redis.info("commandstats")
    called = {
        name for name, stats in after.items() if stats["calls"] != before.get(name, {}).get("calls")
    }
    assert called - {"cmdstat_info"} == {"cmdstat_evalsha", "cmdstat_get", "cmdstat_del"}
    assert after["cmdstat_evalsha"]["calls"] - before["cmdstat_evalsha"]["calls"] == 1
    assert after["cmdstat_get"]["calls"] - before["cmdstat_get"]["calls"] == 1
    assert await async_redis.exists(key) == 0
