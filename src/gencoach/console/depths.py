"""Worker queue depths for the console, as RQ counts them (read in a thread)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import anyio
import redis

from gencoach.rq_adapter import queue_depths


class QueueDepths:
    """Reads how many jobs wait, run and failed on each worker queue."""

    def __init__(self, redis_url: str, names: Sequence[str]) -> None:
        self.connection = redis.Redis.from_url(redis_url)
        self.names = tuple(names)

    async def read(self) -> list[dict[str, object]]:
        """One row per queue: queued, started, failed jobs and the workers serving it."""
        return await anyio.to_thread.run_sync(partial(queue_depths, self.connection, self.names))
