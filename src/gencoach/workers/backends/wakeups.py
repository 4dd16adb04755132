"""Wake-ups for jobs waiting on a backend slot: one pub/sub connection per worker process.

Releasing a slot publishes on the slots' channel; `SlotWakeups` wakes the process's
longest-waiting `Waiter` for that backend, which tries again. Nobody polls: a waiter sleeps
until a release wakes it or the first lease lapses (a crashed holder's slot frees then).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import anyio
import anyio.abc
import redis.asyncio
from redis.asyncio.client import PubSub

from gencoach.runtime.logs import get_logger
from gencoach.runtime.retrying import RetryPolicy

# A lost pub/sub connection is subscribed again 1 s later, doubling to 5 s, as long as
# the process runs; waiters meanwhile still wake when the first lease lapses.
RESUBSCRIBE: Final = RetryPolicy(timeout_s=None, wait_initial_s=1.0, wait_max_s=5.0)
LOST: Final = (redis.RedisError, OSError)

log = get_logger("backends.wakeups")


def release_channel(slots_key: str) -> str:
    """The channel a release of `slots_key`'s slots is published on."""
    return f"{slots_key}:released"


async def next_release(pubsub: PubSub) -> str:
    """Wait for the next release published to `pubsub` (its channel), skipping confirmations."""
    while True:
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
        if message is not None and message.get("type") == "message":
            channel = message["channel"]
            return channel.decode() if isinstance(channel, bytes) else str(channel)


class Waiter:
    """One job's place in line for a backend's slots."""

    def __init__(self, line: deque[Waiter]) -> None:
        self._line = line
        self._event = anyio.Event()

    def wake(self) -> None:
        """Let this waiter try again."""
        self._event.set()

    @property
    def woken(self) -> bool:
        """Whether a wake-up came that this waiter has not acted on yet."""
        return self._event.is_set()

    async def wait(self) -> None:
        """Sleep until woken, then take the front of the line again for the next wake-up."""
        await self._event.wait()
        self._event = anyio.Event()
        if self not in self._line:
            self._line.appendleft(self)


class SlotWakeups:
    """The process's subscription to slot releases; `run` it in a long-lived task group.

    A lost subscription is taken again through `RESUBSCRIBE`, and every waiter looks
    again (a release may have been missed meanwhile).
    """

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self._client = client
        self._pubsub: PubSub | None = None
        self._channels: set[str] = set()
        self._lines: dict[str, deque[Waiter]] = {}
        self._subscribed = anyio.Event()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Dispatch releases to waiters until cancelled (reading starts with the first waiter)."""
        task_status.started()
        await self._subscribed.wait()
        while True:
            assert self._pubsub is not None
            try:
                channel = await next_release(self._pubsub)
            except LOST as error:
                self._wake_all()  # a release may have been missed: everyone looks again
                await self._resubscribe(error)
                self._wake_all()  # and while it was not subscribed
                continue
            self._wake_first(channel)

    async def _resubscribe(self, lost: Exception) -> None:
        """Subscribe again to every channel, the lost read counting as the first try."""
        async for attempt in RESUBSCRIBE.retrying(on=LOST, log_as="slots.wakeups_lost"):
            with attempt:
                if attempt.num == 1:
                    raise lost
                if self._pubsub is not None:
                    await self._pubsub.aclose()  # type: ignore[no-untyped-call]
                self._pubsub = self._client.pubsub()
                await self._pubsub.subscribe(*self._channels)
        log.info("slots.wakeups_back", attempts=attempt.num)

    def _wake_first(self, channel: str) -> None:
        line = self._lines.get(channel)
        if line:
            line.popleft().wake()

    def _wake_all(self) -> None:
        for line in self._lines.values():
            while line:
                line.popleft().wake()

    @asynccontextmanager
    async def waiting(self, channel: str) -> AsyncIterator[Waiter]:
        """A place in line for releases on `channel`; enter it before the first try.

        A waiter that leaves with a wake-up it did not act on (it timed out, or took a slot
        on its own) passes it on, so that no release is lost in this process.
        """
        if channel not in self._channels:
            if self._pubsub is None:
                self._pubsub = self._client.pubsub()
            await self._pubsub.subscribe(channel)
            self._channels.add(channel)
            self._subscribed.set()
        line = self._lines.setdefault(channel, deque())
        waiter = Waiter(line)
        line.append(waiter)
        try:
            yield waiter
        finally:
            if waiter in line:
                line.remove(waiter)
            if waiter.woken:
                self._wake_first(channel)

    async def aclose(self) -> None:
        """Close the subscription."""
        if self._pubsub is not None:
            with anyio.CancelScope(shield=True):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]
