"""Worker queue depths, as RQ counts them (RQ's client is synchronous: run in a thread)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import anyio
import redis
from rq import Queue, Worker


def _depths(connection: redis.Redis, names: Sequence[str]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for name in names:
        queue = Queue(name, connection=connection)
        rows.append(
            {
                "queue": name,
                "queued": queue.count,
                "started": queue.started_job_registry.count,
                "failed": queue.failed_job_registry.count,
                "workers": Worker.count(queue=queue),
            }
        )
    return rows


class QueueDepths:
    """Reads how many jobs wait, run and failed on each worker queue."""

    def __init__(self, redis_url: str, names: Sequence[str]) -> None:
        self.connection = redis.Redis.from_url(redis_url)
        self.names = tuple(names)

    async def read(self) -> list[dict[str, object]]:
        """One row per queue: queued, started, failed jobs and the workers serving it."""
        return await anyio.to_thread.run_sync(partial(_depths, self.connection, self.names))
