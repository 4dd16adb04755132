"""The load of the chaos tests and the soak benchmark: generator threads reporting runs and
executing branches, through the blocking `Reporter` or, as the reference simulator does, the
`AsyncReporter`."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import anyio

from gencoach.reporting.client import AsyncReporter, Reporter
from tests.support.graphs import known_run_events, own_coaching

SUCCESS = {"event": "success", "state": "optimal"}


@dataclass
class LoadReport:
    """What the generators did, for the counts printed at the end."""

    started: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    branches_executed: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def generate(
    run_id: str, redis_url: str, agent_url: str, report: LoadReport, branch_window_s: float
) -> None:
    """Report the known run slowly, execute the branch orders it gets, then finish it."""
    rng = random.Random(run_id)
    try:
        with Reporter(run_id, redis_url=redis_url, batch_size=1, retry_timeout_s=60) as gen:
            for kind, fields in known_run_events()[:-1]:
                if own_coaching(fields):
                    continue
                if kind == "run.started":
                    fields = {**fields, "agent_url": agent_url}
                    with report.lock:
                        report.started.append(run_id)
                gen.emit(kind, **fields)
                time.sleep(rng.uniform(0.05, 0.3))
            deadline = time.monotonic() + branch_window_s
            while time.monotonic() < deadline:
                for order in gen.branch_orders(block_s=0.5):
                    gen.emit(
                        "candidate.executed",
                        candidate_id=order.candidate_id,
                        status="optimal",
                        stage_end=SUCCESS,
                    )
                    with report.lock:
                        report.branches_executed += 1
            gen.emit("run.finished")
        with report.lock:
            report.finished.append(run_id)
    except Exception as error:  # counted and shown: a generator is a client, not the subject
        with report.lock:
            report.errors.append(f"{run_id}: {error!r}")


async def _generate_async(
    run_id: str, redis_url: str, agent_url: str, report: LoadReport, branch_window_s: float
) -> None:
    rng = random.Random(run_id)
    async with AsyncReporter(run_id, redis_url=redis_url, batch_size=1, retry_timeout_s=60) as gen:
        for kind, fields in known_run_events()[:-1]:
            if own_coaching(fields):
                continue
            if kind == "run.started":
                fields = {**fields, "agent_url": agent_url}
                with report.lock:
                    report.started.append(run_id)
            await gen.emit(kind, **fields)
            await anyio.sleep(rng.uniform(0.05, 0.3))
        deadline = time.monotonic() + branch_window_s
        while time.monotonic() < deadline:
            for order in await gen.branch_orders(block_s=0.5):
                await gen.emit(
                    "candidate.executed",
                    candidate_id=order.candidate_id,
                    status="optimal",
                    stage_end=SUCCESS,
                )
                with report.lock:
                    report.branches_executed += 1
        await gen.emit("run.finished")


def generate_async(
    run_id: str, redis_url: str, agent_url: str, report: LoadReport, branch_window_s: float
) -> None:
    """`generate` through an `AsyncReporter` on its own event loop."""
    try:
        anyio.run(_generate_async, run_id, redis_url, agent_url, report, branch_window_s)
        with report.lock:
            report.finished.append(run_id)
    except Exception as error:
        with report.lock:
            report.errors.append(f"{run_id}: {error!r}")


def start_generators(
    run_ids: list[str],
    redis_url: str,
    agent_url: str,
    report: LoadReport,
    window_s: float,
    *,
    run_async: bool = False,
) -> list[threading.Thread]:
    """One thread per run, all started now (with `run_async`, each on an AsyncReporter)."""
    target = generate_async if run_async else generate
    threads = [
        threading.Thread(
            target=target, args=(run_id, redis_url, agent_url, report, window_s), daemon=True
        )
        for run_id in run_ids
    ]
    for thread in threads:
        thread.start()
    return threads
