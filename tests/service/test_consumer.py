"""A stream consumer takes over what dead consumers hold, leaves the living alone, and
outlives its stream vanishing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import anyio
import pytest
from redis.asyncio import Redis

from gencoach.service.store.consumer import ConsumerOptions, Entry, StreamConsumer

pytestmark = pytest.mark.asyncio

STREAM, GROUP = "test:stream", "controllers"


class Collector:
    """A handler that acknowledges what it gets, and counts the consumer's checks."""

    def __init__(self, client: Redis) -> None:
        self.client = client
        self.ids: list[bytes] = []
        self.checks = 0
        self._changed = anyio.Event()

    async def handle(self, entries: Sequence[Entry]) -> None:
        self.ids += [entry_id for entry_id, _ in entries]
        await self.client.xack(STREAM, GROUP, *(entry_id for entry_id, _ in entries))
        self._notify()

    async def upkeep(self) -> None:
        self.checks += 1
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, done: Callable[[], bool], timeout_s: float = 20) -> None:
        """Wait until `done()` holds, looking again whenever the consumer does something."""
        with anyio.fail_after(timeout_s):
            while True:
                changed = self._changed
                if done():
                    return
                await changed.wait()


async def _consumer(client: Redis, alive: bool) -> tuple[StreamConsumer, Collector]:
    async def liveness(name: str) -> bool:
        return alive

    collector = Collector(client)
    options = ConsumerOptions(STREAM, GROUP, "me", claim_every_s=0.1, lease_s=0.3)
    return StreamConsumer(
        client, options, collector.handle, alive=liveness, upkeep=collector.upkeep
    ), collector


async def _held_by_other(client: Redis, count: int) -> list[bytes]:
    await client.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    ids = [cast(bytes, await client.xadd(STREAM, {"n": str(n)})) for n in range(count)]
    await client.xreadgroup(GROUP, "other", {STREAM: ">"}, count=count)
    return ids


async def test_a_dead_consumers_entries_are_taken_over_and_it_leaves_the_group(
    async_redis: Redis,
) -> None:
    """Entries held by a consumer idle for its lease whose controller is dead are claimed
    and handled, long before `claim_idle_s`, and the dead consumer leaves the group."""
    held = await _held_by_other(async_redis, 3)
    consumer, collector = await _consumer(async_redis, alive=False)
    async with anyio.create_task_group() as tg:
        await tg.start(consumer.run)
        await collector.until(lambda: collector.ids == held)
        consumer.stop()
    names = [c["name"] for c in await async_redis.xinfo_consumers(STREAM, GROUP)]
    assert names == [b"me"]


async def test_a_live_consumers_entries_are_left_alone(async_redis: Redis) -> None:
    """Entries held by a consumer whose controller holds its lease stay with it, however
    long it has been idle (up to `claim_idle_s`)."""
    await _held_by_other(async_redis, 3)
    consumer, collector = await _consumer(async_redis, alive=True)
    async with anyio.create_task_group() as tg:
        await tg.start(consumer.run)
        await anyio.sleep(0.5)  # the other consumer idles past its lease
        seen = collector.checks
        await collector.until(lambda: collector.checks >= seen + 3)  # three checks after that
        consumer.stop()
    assert collector.ids == []
    pending = await async_redis.xpending(STREAM, GROUP)
    assert [(c["name"], c["pending"]) for c in pending["consumers"]] == [(b"other", 3)]


async def test_the_consumer_outlives_its_stream_vanishing(async_redis: Redis) -> None:
    """The stream deleted under a blocked read (Redis flushed): the consumer makes the
    group again and reads what arrives next."""
    consumer, collector = await _consumer(async_redis, alive=False)
    async with anyio.create_task_group() as tg:
        await tg.start(consumer.run)
        await anyio.sleep(0.3)  # blocked in its read
        await async_redis.delete(STREAM)
        arrived = await async_redis.xadd(STREAM, {"n": "after"})
        await collector.until(lambda: collector.ids == [arrived])
        assert consumer.running
        consumer.stop()
