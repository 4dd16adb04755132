"""The controller's share of the metrics: flushing its counts, and what a scrape measures.

`ControllerMetrics` adds the controller's counts to Redis every `every_s` (`run`) and
answers a scrape (`render`) with every process's counters and the gauges measured then.
Each metric and its labels: docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import redis.exceptions
from anyio.abc import TaskStatus
from redis.asyncio import Redis

from gencoach.constants import CONTROLLER_GROUP, Keys
from gencoach.metrics import MetricsRecorder
from gencoach.metrics.exposition import Gauge, render, stored
from gencoach.rq_adapter import Backlog
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.nodes import as_text
from gencoach.service.writable import write_refusal

BacklogSource = Callable[[], Awaitable[list[Backlog]]]


class ControllerMetrics:
    """Flushes the controller's recorder (on the loops' `client`) and answers scrapes (on
    `scrape_client`, the API's pool).

    A scrape is an API request: on the API's pool it waits behind other requests and
    never takes a connection the controller's loops need.
    """

    def __init__(
        self,
        client: Redis,
        scrape_client: Redis,
        keys: Keys,
        backlogs: BacklogSource,
        local: Callable[[], list[Gauge]] = list,
        every_s: float = 1.0,
    ) -> None:
        self.scrape_client = scrape_client  # the API's pool
        self.keys = keys
        self.store = GraphStore(scrape_client, keys)
        self.backlogs = backlogs
        self.local = local  # gauges of this process's own state (the terminals' lanes)
        self.every_s = every_s
        self.recorder = MetricsRecorder(client, keys.metrics)
        self.loop_lag_s = 0.0
        self._stopping = anyio.Event()

    def stop(self) -> None:
        """End the loop after a last flush."""
        self._stopping.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Flush and measure the loop's lag every `every_s` until stopped (how late its own
        wake-up was: how long other work kept the event loop from running it)."""
        task_status.started()
        try:
            while not self._stopping.is_set():
                woke = anyio.current_time() + self.every_s
                with anyio.move_on_after(self.every_s):
                    await self._stopping.wait()
                self.loop_lag_s = max(0.0, anyio.current_time() - woke)
                await self.recorder.flush()
        finally:
            with anyio.CancelScope(shield=True):
                await self.recorder.flush()

    async def render(self) -> bytes:
        """The Prometheus text of every process's counters and the gauges measured now,
        after flushing this controller's counts."""
        await self.recorder.flush(self.scrape_client)
        series = await stored(self.scrape_client, self.keys.metrics)
        return render(series, await self.gauges())

    async def gauges(self) -> list[Gauge]:
        """What is measured at scrape time rather than counted."""
        runs = await self._runs()
        backlogs = await self.backlogs()
        waiting = await self._unhandled()
        dead = await self.scrape_client.xlen(self.keys.dead_events)
        refused = await write_refusal(self.scrape_client, self.keys) is not None
        return [
            Gauge(
                "gencoach_redis_writes_refused",
                "1 while Redis refuses writes (at its maxmemory, or a read-only replica).",
                samples={(): 1 if refused else 0},
            ),
            Gauge(
                "gencoach_runs",
                "Runs this Redis knows, by state (active, finished, saved).",
                ("state",),
                runs,
            ),
            Gauge(
                "gencoach_queue_jobs",
                "Jobs waiting on each worker queue.",
                ("queue",),
                {(b.queue,): b.jobs for b in backlogs},
            ),
            Gauge(
                "gencoach_queue_oldest_job_age_seconds",
                "How long the oldest job waiting on each queue has waited.",
                ("queue",),
                {(b.queue,): round(b.oldest_wait_s, 3) for b in backlogs},
            ),
            Gauge(
                "gencoach_queue_workers",
                "Workers serving each queue.",
                ("queue",),
                {(b.queue,): b.workers for b in backlogs},
            ),
            Gauge(
                "gencoach_stream_unhandled_entries",
                "Entries of each stream the controllers have not acknowledged yet "
                "(delivered and pending, or not delivered).",
                ("stream",),
                waiting,
            ),
            Gauge(
                "gencoach_dead_letters",
                "Refused events kept in the dead-letter stream.",
                samples={(): dead},
            ),
            Gauge(
                "gencoach_controller_loop_lag_seconds",
                "How late the controller's event loop last ran a timer that was due.",
                samples={(): round(self.loop_lag_s, 4)},
            ),
            *self.local(),
        ]

    async def _runs(self) -> dict[tuple[str, ...], float]:
        counts = await self.store.index.counts()
        return {(state,): count for state, count in counts.items()}

    async def _unhandled(self) -> dict[tuple[str, ...], float]:
        streams = {
            "events": self.keys.events,
            "terminals": self.keys.terminals,
            "results": self.keys.results,
        }
        waiting: dict[tuple[str, ...], float] = {}
        for name, key in streams.items():
            try:
                groups = await self.scrape_client.xinfo_groups(key)
            except redis.exceptions.ResponseError:
                groups = []  # no such stream yet
            ours = [g for g in groups if as_text(g["name"]) == CONTROLLER_GROUP]
            if ours:
                group = ours[0]
                lag = group.get("lag")
                waiting[(name,)] = int(group["pending"]) + int(lag or 0)
            else:
                waiting[(name,)] = await self.scrape_client.xlen(key)
        return waiting
