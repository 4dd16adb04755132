"""Many runs of one adapter at once, over one Redis connection pool and one order reader.

`run_campaign` plays `CampaignOptions.runs` seeds as `GymRun`s and sums them in a
`CampaignReport`; `connection_pool` is the pool they all share (docs/integrations.md §5
and §6: naming, resuming, connections).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import redis.asyncio

from gencoach.constants import DEFAULT_PREFIX
from gencoach.integrations.gymnasium.adapter import GymAdapter
from gencoach.integrations.gymnasium.run import GymRun, RunTally
from gencoach.reporting.client import AsyncReporter
from gencoach.reporting.orders import Item, OrderReader
from gencoach.sim.agent_io import AgentAsker
from gencoach.sim.verdict import run_failure

CLIENT_NAME = "gencoach-gym"
_NEVER_FULL = 1 << 30  # the run flushes after each situation, never the reporter alone


@dataclass(frozen=True)
class CampaignOptions:
    """What `gencoach sim gym` is asked to do."""

    adapter: GymAdapter
    agent_url: str
    redis_url: str
    key_prefix: str = DEFAULT_PREFIX
    runs: int = 1
    concurrency: int = 8
    seed: int = 0
    branches: int = 1
    settle_timeout_s: float = 60.0
    timeout_s: float = 60.0
    campaign: str | None = None
    max_connections: int = 8


@dataclass
class CampaignReport:
    """What the runs did, together."""

    run_ids: list[str] = field(default_factory=list)
    total: RunTally = field(default_factory=RunTally)
    elapsed_s: float = 0.0
    resumed: int = 0
    """Runs a restarted campaign took up where its generator died."""
    already_finished: int = 0
    """Runs a restarted campaign found finished (not played again)."""

    def add(self, tally: RunTally) -> None:
        """Count one finished run."""
        total = self.total
        total.add(tally)
        total.situations += tally.situations
        total.env_steps += tally.env_steps
        total.orders_executed += tally.orders_executed
        total.orders_skipped += tally.orders_skipped
        total.settle_timeouts += tally.settle_timeouts
        total.env_step_s += tally.env_step_s
        total.ending_s += tally.ending_s

    def failure(self) -> str | None:
        """Why the campaign failed (the agent crashed, no stage ended), or None."""
        resumed = bool(self.resumed or self.already_finished)
        return run_failure(self.total.stage_ends, self.total.first_crash, resumed=resumed)

    def summary(self) -> str:
        """The report on one line."""
        t = self.total
        line = (
            f"{len(self.run_ids)} runs: {t.situations} situations, {t.described()}, "
            f"branch orders: {t.orders_executed} executed, {t.orders_skipped} skipped; "
            f"{self.elapsed_s:.1f} s"
        )
        notes = [
            f"{self.resumed} resumed" if self.resumed else "",
            f"{self.already_finished} already finished" if self.already_finished else "",
            f"{t.settle_timeouts} ended without a settled answer" if t.settle_timeouts else "",
        ]
        return "; ".join([line, *filter(None, notes)])


def connection_pool(url: str, size: int) -> redis.asyncio.BlockingConnectionPool:
    """The campaign's one pool, named `gencoach-gym` in `CLIENT LIST` (at least 2
    connections: the order reader holds one while it blocks, the runs share the rest).

    A run waits for a connection as long as it takes (no `timeout`): while many runs
    start, each one's env steps (synchronous) hold the loop, and a run that asked for a
    connection meanwhile must not fail for having waited on them.
    """
    return redis.asyncio.BlockingConnectionPool.from_url(
        url, max_connections=max(size, 2), client_name=CLIENT_NAME, timeout=None
    )


async def run_campaign(options: CampaignOptions) -> CampaignReport:
    """Play `options.runs` seeds of the adapter's env and report them to gencoach.

    The campaign's name is `options.campaign`, else a fresh `gym-<adapter>-<hex>`: run `k`
    is `<campaign>-<seed + k>` and plays seed `seed + k`, at most `concurrency` at a time.
    Every run's reporter, teacher states and the shared `OrderReader` (consumer group
    `<campaign>`) use one pool of `max_connections` whatever the concurrency: a run waits
    for a free connection rather than opening another.

    Running a campaign again under its name resumes it: a run whose generator state says
    it finished is skipped, one that started is resumed (`GymRun.play` with what it
    recalled: its unexecuted orders are read again and executed once), the others play
    from the start.
    """
    report = CampaignReport()
    name = options.campaign or f"gym-{options.adapter.name}-{uuid.uuid4().hex[:8]}"
    started = anyio.current_time()
    pool = connection_pool(options.redis_url, options.max_connections)
    client = redis.asyncio.Redis(connection_pool=pool)
    limits = httpx.Limits(max_connections=options.concurrency)
    limiter = anyio.CapacityLimiter(options.concurrency)
    reader = OrderReader(client, group=name, key_prefix=options.key_prefix)
    try:
        async with httpx.AsyncClient(timeout=options.timeout_s, limits=limits) as http:
            asker = AgentAsker(options.agent_url, http, options.concurrency, options.timeout_s)

            async def one(index: int) -> None:
                run_id = f"{name}-{options.seed + index}"
                async with limiter:
                    reporter = AsyncReporter(
                        run_id, redis=client, key_prefix=options.key_prefix, batch_size=_NEVER_FULL
                    )
                    recalled = await reporter.recall()
                    if recalled.get("finished"):
                        report.already_finished += 1
                        report.run_ids.append(run_id)
                        return
                    report.resumed += bool(recalled)
                    run = GymRun(
                        options.adapter,
                        run_id,
                        options.seed + index,
                        reporter,
                        asker,
                        agent_url=options.agent_url,
                        branches=options.branches,
                        settle_timeout_s=options.settle_timeout_s,
                        reader=reader,
                    )
                    report.add(await _play(run, reader, recalled))
                report.run_ids.append(run_id)

            async with anyio.create_task_group() as outer:
                outer.start_soon(reader.run)
                async with anyio.create_task_group() as runs:
                    for index in range(options.runs):
                        runs.start_soon(one, index)
                outer.cancel_scope.cancel()
    finally:
        await client.aclose()
        await pool.aclose()
    report.elapsed_s = anyio.current_time() - started
    return report


async def _play(run: GymRun, reader: OrderReader, recalled: dict[str, Any]) -> RunTally:
    """Play (or resume) one run with its orders read by the campaign's reader."""
    send, receive = anyio.create_memory_object_stream[Item](100)
    await reader.register(run.run_id, send, run.reporter)
    try:
        async with run.reporter, receive:
            return await run.play(receive, recalled or None)
    finally:
        reader.unregister(run.run_id)
