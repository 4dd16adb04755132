"""What jobs share on one event loop: a Redis pool, an HTTP client, opened backends.

An async worker opens one `JobResources` for its whole life and every job it runs uses
it, flushing the jobs' metrics every second; a forked work-horse, whose event loop lives
for one job, opens its own for that job and flushes them when it ends.
Backends open on first use, once; the TLS context is the process's (see `tls`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Self

import anyio
import anyio.abc
import httpx
import redis.asyncio

from gencoach.metrics import MetricsRecorder
from gencoach.runtime.connections import connection_options
from gencoach.workers.backends import Backend, make_backend
from gencoach.workers.backends.wakeups import SlotWakeups
from gencoach.workers.context import WorkerContext
from gencoach.workers.tls import shared_ssl_context

# Connections kept open to agents and LLM servers, beyond the jobs in flight.
KEEPALIVE = 32
# Redis connections beyond the jobs' own: the take loop, heartbeats, wake-ups, metrics.
SPARE_CONNECTIONS = 16
# How often a worker's shared resources add its jobs' counts to Redis.
METRICS_FLUSH_S = 1.0


class JobResources:
    """The clients jobs use, opened with `async with` on the event loop they serve."""

    def __init__(self, context: WorkerContext) -> None:
        self.context = context
        # A job holds at most two connections at once (its work, and its lease's renewal or
        # its wait for a repair, a blocking read); redis-py's default pool stops at 100.
        # No call times out: a job is bounded by its own timeout, a dead connection is
        # found within `DEAD_PEER_S`, and a per-call timer costs every command a task on
        # Python 3.11 (`gencoach.service.pools`).
        connections = 2 * context.settings.workers.concurrency + SPARE_CONNECTIONS
        self.redis = redis.asyncio.Redis.from_url(
            context.redis_url, max_connections=connections, **connection_options(None)
        )
        # Each job bounds its own calls (`anyio.move_on_after`), not the client.
        self.http = httpx.AsyncClient(
            timeout=None,  # noqa: S113 - every call is bounded by its job
            verify=shared_ssl_context(),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=KEEPALIVE),
        )
        self.wakeups = SlotWakeups(self.redis)
        self.metrics = MetricsRecorder(self.redis, context.keys.metrics)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.shared = False  # True for the worker's own, which outlive each job
        self._backends: dict[str, Backend] = {}
        self._opening = anyio.Lock()
        self._group: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> Self:
        self.loop = asyncio.get_running_loop()
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        await self._group.start(self.wakeups.run)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        assert self._group is not None
        self._group.cancel_scope.cancel()
        try:
            return await self._group.__aexit__(exc_type, exc, traceback)
        finally:
            with anyio.CancelScope(shield=True):
                await self.metrics.flush()
                for backend in self._backends.values():
                    await backend.__aexit__(None, None, None)
                await self.wakeups.aclose()
                await self.http.aclose()
                await self.redis.aclose()

    async def flush_every(self, interval_s: float) -> None:
        """Add the jobs' counts to Redis every `interval_s` (one pipeline, only when
        something was counted), rather than once per job; the last flush is on exit."""
        while True:
            await anyio.sleep(interval_s)
            await self.metrics.flush()

    async def backend(self, name: str) -> Backend | None:
        """The opened backend `name`, or None when this worker has no such backend."""
        backend = self._backends.get(name)
        if backend is not None:
            return backend
        settings = self.context.settings.backends.get(name)
        if settings is None:
            return None
        async with self._opening:
            if name not in self._backends:
                made = make_backend(
                    name,
                    settings,
                    self.redis,
                    keys=self.context.keys,
                    concurrency=self.context.settings.backend_concurrency(name),
                    wakeups=self.wakeups,
                    metrics=self.metrics,
                )
                self._backends[name] = await made.__aenter__()
        return self._backends[name]


_shared: JobResources | None = None


@asynccontextmanager
async def shared_resources(context: WorkerContext) -> AsyncIterator[JobResources]:
    """Open the resources every job on this event loop uses, for the block."""
    global _shared
    async with JobResources(context) as resources:
        previous, _shared = _shared, resources
        resources.shared = True
        assert resources._group is not None
        resources._group.start_soon(resources.flush_every, METRICS_FLUSH_S)
        try:
            yield resources
        finally:
            _shared = previous


@asynccontextmanager
async def job_resources(context: WorkerContext) -> AsyncIterator[JobResources]:
    """The shared resources when this loop has them, else ones opened for this job alone."""
    shared = _shared
    if shared is not None and shared.loop is asyncio.get_running_loop():
        yield shared
        return
    async with JobResources(context) as own:
        yield own
