"""Waiting for a backend slot without polling: woken by a release, or by a lapsed lease."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
import redis
import redis.asyncio
from structlog.testing import capture_logs

from gencoach.runtime.retrying import no_client_retries
from gencoach.workers.backends import RedisSemaphore
from gencoach.workers.backends.wakeups import SlotWakeups

KEY = "test:slots"
POLLING_TRIES = 10  # a 50 ms poll would try about 20 times over the one second waited


async def script_calls(client: redis.asyncio.Redis) -> int:
    """How many scripts the server has run so far (acquire and release are scripts)."""
    stats = await client.info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval")
    )


@asynccontextmanager
async def running(client: redis.asyncio.Redis) -> AsyncIterator[SlotWakeups]:
    """The process-wide subscription to releases, running for the block."""
    hub = SlotWakeups(client)
    async with anyio.create_task_group() as group:
        await group.start(hub.run)
        yield hub
        group.cancel_scope.cancel()
    await hub.aclose()


async def wait_in_turn(
    semaphore: RedisSemaphore, holder: str, got: list[str], taken: anyio.Event | None = None
) -> None:
    """Wait for a slot as `holder`, then note it (and set `taken`)."""
    assert await semaphore.acquire(holder, wait_s=20)
    got.append(holder)
    if taken is not None:
        taken.set()


@pytest.mark.asyncio
@pytest.mark.parametrize("shared", [True, False], ids=["process wake-ups", "own subscription"])
async def test_a_waiter_is_woken_by_the_release_not_by_polling(
    aredis: redis.asyncio.Redis, shared: bool
) -> None:
    """A waiter takes the slot once it is released a second later, after a handful of tries."""
    async with running(aredis) as wakeups:
        await _woken_by_release(aredis, wakeups if shared else None)


async def _woken_by_release(aredis: redis.asyncio.Redis, wakeups: SlotWakeups | None) -> None:
    semaphore = RedisSemaphore(aredis, KEY, 1, 30.0, wakeups=wakeups)
    assert await semaphore.try_acquire("holder")
    before = await script_calls(aredis)
    got: list[str] = []
    async with anyio.create_task_group() as group:
        group.start_soon(wait_in_turn, semaphore, "waiter", got)
        await anyio.sleep(1.0)
        assert got == []
        assert await semaphore.release("holder")
    assert got == ["waiter"]
    assert await semaphore.holders() == ["waiter"]
    assert await script_calls(aredis) - before < POLLING_TRIES


@pytest.mark.asyncio
async def test_a_dead_holders_slot_goes_to_a_waiter_when_its_lease_lapses(
    aredis: redis.asyncio.Redis,
) -> None:
    """Nobody releases the slot of a holder that died: the waiter takes it when the lease lapses."""
    async with running(aredis) as wakeups:
        semaphore = RedisSemaphore(aredis, KEY, 1, 1.0, wakeups=wakeups)
        assert await semaphore.try_acquire("dead")
        before = await script_calls(aredis)
        with anyio.fail_after(10):
            assert await semaphore.acquire("waiter", wait_s=10)
    assert await semaphore.holders() == ["waiter"]
    assert await script_calls(aredis) - before < POLLING_TRIES


@pytest.mark.asyncio
async def test_each_release_lets_one_more_waiter_in(aredis: redis.asyncio.Redis) -> None:
    """Three waiters on one slot each get it in turn as it is released, never two at once."""
    got: list[str] = []
    taken = [anyio.Event() for _ in range(3)]
    async with running(aredis) as wakeups, anyio.create_task_group() as group:
        semaphore = RedisSemaphore(aredis, KEY, 1, 30.0, wakeups=wakeups)
        assert await semaphore.try_acquire("first")
        for index, name in enumerate(("a", "b", "c")):
            group.start_soon(wait_in_turn, semaphore, name, got, taken[index])
            with anyio.fail_after(10):  # in line one after the other: wait for its place
                while len(wakeups._lines.get(semaphore.channel, ())) <= index:  # noqa: ASYNC110 - a count, no event
                    await anyio.sleep(0.01)
        holder = "first"
        for index in range(3):
            assert await semaphore.release(holder)
            with anyio.fail_after(10):
                await taken[index].wait()
            assert await semaphore.holders() == [got[-1]]
            holder = got[-1]
    assert got == ["a", "b", "c"]


@pytest.mark.asyncio
async def test_a_lost_subscription_is_taken_again_and_wakes_waiters_again(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The process's subscription killed under a waiting job is logged lost, subscribed
    again after RESUBSCRIBE's first wait, and the next release wakes the waiter at once
    rather than at its 30 s lease."""
    client = redis.asyncio.Redis.from_url(redis_url, retry=no_client_retries())
    got: list[str] = []
    try:
        with capture_logs() as logs:
            async with running(client) as wakeups, anyio.create_task_group() as group:
                semaphore = RedisSemaphore(client, KEY, 1, 30.0, wakeups=wakeups)
                assert await semaphore.try_acquire("holder")
                group.start_soon(wait_in_turn, semaphore, "waiter", got)
                await subscribed(redis_client, semaphore.channel)
                assert redis_client.client_kill_filter(_type="pubsub") == 1
                killed = anyio.current_time()
                await subscribed(redis_client, semaphore.channel)
                assert anyio.current_time() - killed >= 1.0
                released = anyio.current_time()
                assert await semaphore.release("holder")
        assert got == ["waiter"]
        assert anyio.current_time() - released < 5.0
        lost = [entry for entry in logs if entry["event"] == "slots.wakeups_lost"]
        assert [entry["attempt"] for entry in lost] == [1]
        assert [entry["event"] for entry in logs if entry["event"] == "slots.wakeups_back"]
    finally:
        await client.aclose()


async def subscribed(client: redis.Redis, channel: str) -> None:
    """Return once some connection is subscribed to `channel` (within 10 s)."""
    with anyio.fail_after(10):
        while client.pubsub_numsub(channel)[0][1] == 0:  # noqa: ASYNC110 - the server's count, no event
            await anyio.sleep(0.01)


class _CountedTries(RedisSemaphore):
    """A semaphore that counts how often it asks Redis for a slot."""

    tries = 0

    async def _try(self, holder: str) -> float:
        self.tries += 1
        return await super()._try(holder)


@pytest.mark.asyncio
async def test_a_process_holding_every_slot_waits_for_its_own_release_without_asking(
    aredis: redis.asyncio.Redis,
) -> None:
    """Two jobs of this process hold both slots: the four that come next ask Redis for a
    slot only once a release woke them, each once, and all get one in turn."""
    async with running(aredis) as wakeups:
        semaphore = _CountedTries(aredis, "test:own-slots", 2, 30.0, wakeups=wakeups)
        assert await semaphore.acquire("first", wait_s=5)
        assert await semaphore.acquire("second", wait_s=5)
        got: list[str] = []
        two = anyio.Event()

        async def later(holder: str) -> None:
            await wait_in_turn(semaphore, holder, got)
            if len(got) == 2:
                two.set()

        async with anyio.create_task_group() as group:
            for index in range(4):
                group.start_soon(later, f"later-{index}")
            await anyio.sleep(0.2)
            assert (got, semaphore.tries) == ([], 2)
            assert await semaphore.release("first")
            assert await semaphore.release("second")
            with anyio.fail_after(10):
                await two.wait()
            for holder in got[:2]:
                assert await semaphore.release(holder)
        assert sorted(got) == [f"later-{index}" for index in range(4)]
        assert semaphore.tries == 6
