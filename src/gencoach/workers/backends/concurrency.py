"""A backend's concurrency cap, shared by every worker process through Redis leases."""

from __future__ import annotations

import os
import random
import socket
import uuid
from importlib import resources
from typing import Final

import anyio
import redis.asyncio

ACQUIRE_SCRIPT: Final = resources.files("gencoach.workers.backends").joinpath(
    "lua/acquire_slot.lua"
)


def new_holder_id() -> str:
    """A lease holder id that names its host and process, unique per acquisition."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class RedisSemaphore:
    """At most `limit` holders at once across processes; each slot is a lease of `lease_s`.

    A holder that dies without releasing loses its slot when the lease expires (by the
    Redis server's clock). Releasing is idempotent. Waiting polls every `poll_s` or so.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        key: str,
        limit: int,
        lease_s: float,
        *,
        poll_s: float = 0.05,
    ) -> None:
        if limit < 1:
            raise ValueError(f"a semaphore needs at least one slot (got limit={limit!r})")
        if lease_s <= 0:
            raise ValueError(f"a lease must last some time (got lease_s={lease_s!r})")
        self.key = key
        self.limit = limit
        self.lease_s = lease_s
        self._client = client
        self._poll_s = poll_s
        # EVALSHA, reloaded on NOSCRIPT: survives a server restart or SCRIPT FLUSH.
        self._acquire = client.register_script(ACQUIRE_SCRIPT.read_text())

    async def try_acquire(self, holder: str) -> bool:
        """Take a slot for `holder` if one is free (or renew its lease); say whether it did."""
        lease_ms = max(1, round(self.lease_s * 1000))
        taken = await self._acquire(keys=[self.key], args=[holder, self.limit, lease_ms])
        return bool(taken)

    async def acquire(self, holder: str, wait_s: float) -> bool:
        """Take a slot, waiting up to `wait_s` for one to free; say whether it did."""
        deadline = anyio.current_time() + wait_s
        while not await self.try_acquire(holder):
            left = deadline - anyio.current_time()
            if left <= 0:
                return False
            # Jitter keeps waiting processes from polling in lockstep.
            await anyio.sleep(min(left, self._poll_s * random.uniform(0.5, 1.5)))
        return True

    async def release(self, holder: str) -> bool:
        """Give the slot back; False if `holder` held none (released already, or lapsed)."""
        return bool(await self._client.zrem(self.key, holder))

    async def holders(self) -> list[str]:
        """The holders whose leases have not expired, by the server's clock."""
        seconds, micros = await self._client.time()
        now_ms = seconds * 1000 + micros // 1000
        members = await self._client.zrangebyscore(self.key, f"({now_ms}", "+inf")
        return [m.decode() if isinstance(m, bytes) else str(m) for m in members]
