"""A backend's concurrency cap, shared by every worker process through Redis leases."""

from __future__ import annotations

import functools
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Final

import anyio
import redis.asyncio

from gencoach.workers.backends.wakeups import SlotWakeups, next_release, release_channel

_LUA = resources.files("gencoach.workers.backends").joinpath("lua")
ACQUIRE_SCRIPT: Final = _LUA.joinpath("acquire_slot.lua")
RELEASE_SCRIPT: Final = _LUA.joinpath("release_slot.lua")


@functools.cache
def _host() -> str:
    return socket.gethostname()


def new_holder_id() -> str:
    """A lease holder id that names its host and process, unique per acquisition."""
    return f"{_host()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class RedisSemaphore:
    """At most `limit` holders at once across processes; each slot is a lease of `lease_s`.

    A holder that dies without releasing loses its slot when the lease expires (by the
    Redis server's clock). Releasing is idempotent and publishes a wake-up. Waiting never
    polls: a waiter sleeps until a release wakes it (through the process's `wakeups`,
    else a subscription of its own) or until the first held lease lapses. While this
    process itself holds every slot, a waiter does not ask Redis (which could only say
    no) but waits for one of them to be released.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        key: str,
        limit: int,
        lease_s: float,
        *,
        wakeups: SlotWakeups | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError(f"a semaphore needs at least one slot (got limit={limit!r})")
        if lease_s <= 0:
            raise ValueError(f"a lease must last some time (got lease_s={lease_s!r})")
        self.key = key
        self.limit = limit
        self.lease_s = lease_s
        self.channel = release_channel(key)
        self._client = client
        self._wakeups = wakeups
        # EVALSHA, reloaded on NOSCRIPT: survives a server restart or SCRIPT FLUSH.
        self._acquire = client.register_script(ACQUIRE_SCRIPT.read_text())
        self._release = client.register_script(RELEASE_SCRIPT.read_text())
        self._held = 0  # slots taken through this semaphore and not yet given back

    async def _try(self, holder: str) -> float:
        """0 when `holder` has a slot now, else the seconds until the first lease lapses."""
        lease_ms = max(1, round(self.lease_s * 1000))
        wait_ms = await self._acquire(keys=[self.key], args=[holder, self.limit, lease_ms])
        return int(wait_ms) / 1000

    async def try_acquire(self, holder: str) -> bool:
        """Take a slot for `holder` if one is free (or renew its lease); say whether it did."""
        return await self._try(holder) == 0

    async def acquire(self, holder: str, wait_s: float) -> bool:
        """Take a slot, waiting up to `wait_s` for one to free; say whether it did."""
        deadline = anyio.current_time() + wait_s
        # The uncontended case needs no subscription.
        if self._held < self.limit and await self._try(holder) == 0:
            self._held += 1
            return True
        if self._wakeups is not None:
            async with self._wakeups.waiting(self.channel) as waiter:
                taken = await self._wait(holder, deadline, waiter.wait)
        else:
            async with self._client.pubsub() as pubsub:
                await pubsub.subscribe(self.channel)
                taken = await self._wait(holder, deadline, lambda: next_release(pubsub))
        if taken:
            self._held += 1
        return taken

    async def _wait(
        self, holder: str, deadline: float, woken: Callable[[], Awaitable[object]]
    ) -> bool:
        """Try, and sleep until `woken` (or the first lease lapses) between tries, until
        the slot is taken (True) or `deadline` passes (False). While this process holds
        every slot, a try is spared: only one of its own releases can free one."""
        while True:
            lapse_s = self.lease_s if self._held >= self.limit else await self._try(holder)
            if lapse_s == 0:
                return True
            left = deadline - anyio.current_time()
            if left <= 0:
                return False
            with anyio.move_on_after(min(left, lapse_s)):
                await woken()

    async def release(self, holder: str) -> bool:
        """Give the slot back; False if `holder` held none (released already, or lapsed)."""
        self._held = max(0, self._held - 1)
        return bool(await self._release(keys=[self.key], args=[holder, self.channel]))

    async def holders(self) -> list[str]:
        """The holders whose leases have not expired, by the server's clock."""
        seconds, micros = await self._client.time()
        now_ms = seconds * 1000 + micros // 1000
        members = await self._client.zrangebyscore(self.key, f"({now_ms}", "+inf")
        return [m.decode() if isinstance(m, bytes) else str(m) for m in members]
