"""Load on one stage: 32 concurrent admitters on separate connections never overshoot a limit."""

from __future__ import annotations

import asyncio
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import redis
from redis.asyncio import Redis

from gencoach.config import Limits
from gencoach.constants import Keys
from gencoach.limits import StageCounts, StageLimits

RUN, STAGE = "load", 1
THREADS, TASKS_PER_THREAD = 4, 8  # 32 admitters: threads with their own loop and connections
ROUNDS, BUDGET_S = 40, 4.0
LIMITS = Limits(max_pending_per_stage=5, max_unproven_per_stage=7)


@dataclass
class Tally:
    """What one thread's admitters did and saw."""

    admitted: int = 0
    refused: int = 0
    completed: int = 0
    proven: int = 0
    seen: list[StageCounts] = field(default_factory=list)


def _within_limits(counts: StageCounts) -> bool:
    return (
        0 <= counts.pending <= LIMITS.max_pending_per_stage
        and 0 <= counts.unproven <= LIMITS.max_unproven_per_stage
        and 0 <= counts.proven <= counts.completed
    )


async def _admitter(limits: StageLimits, index: int, tally: Tally, deadline: float) -> None:
    rng = random.Random(index)
    unproven: list[int] = []
    for round_ in range(ROUNDS):
        if time.monotonic() > deadline:
            return
        request_id = f"a{index}-{round_}"
        admission = await limits.admit(RUN, STAGE, request_id, LIMITS, lease_s=30.0)
        tally.seen.append(admission.counts)
        if not admission.admitted:
            tally.refused += 1
            await asyncio.sleep(rng.uniform(0, 0.002))
        else:
            tally.admitted += 1
            await asyncio.sleep(rng.uniform(0, 0.002))
            if rng.random() < 0.5:
                await limits.release(RUN, STAGE, request_id)
            else:
                attempt = index * 1000 + round_
                assert await limits.complete(RUN, STAGE, request_id, attempt) == "completed"
                tally.completed += 1
                unproven.append(attempt)
        # Branches reach stage success later, in any order.
        if unproven and rng.random() < 0.4:
            attempt = unproven.pop(rng.randrange(len(unproven)))
            if await limits.prove(RUN, STAGE, attempt):
                tally.proven += 1


async def _observer(limits: StageLimits, tally: Tally, done: asyncio.Event) -> None:
    while not done.is_set():
        tally.seen.append(await limits.counts(RUN, STAGE))
        await asyncio.sleep(0.001)


async def _thread_main(redis_url: str, thread: int, deadline: float) -> Tally:
    tally = Tally()
    client = Redis.from_url(redis_url)
    limits = StageLimits(client, Keys())
    done = asyncio.Event()
    try:
        observer = asyncio.create_task(_observer(limits, tally, done))
        await asyncio.gather(
            *(
                _admitter(limits, thread * TASKS_PER_THREAD + task, tally, deadline)
                for task in range(TASKS_PER_THREAD)
            )
        )
        done.set()
        await observer
    finally:
        await client.aclose()
    return tally


def test_concurrent_admitters_never_exceed_the_limits(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """Every count any admitter or observer saw was within both limits, and the books balance."""
    deadline = time.monotonic() + BUDGET_S
    with ThreadPoolExecutor(THREADS) as pool:
        futures = [
            pool.submit(asyncio.run, _thread_main(redis_url, thread, deadline))
            for thread in range(THREADS)
        ]
        tallies = [future.result() for future in futures]
    seen = [counts for tally in tallies for counts in tally.seen]
    assert [counts for counts in seen if not _within_limits(counts)] == []
    assert sum(tally.admitted for tally in tallies) > 0
    assert sum(tally.refused for tally in tallies) > 0
    assert max(counts.pending for counts in seen) == LIMITS.max_pending_per_stage

    final = asyncio.run(_final_counts(redis_url))
    assert final.pending == 0
    assert final.completed == sum(tally.completed for tally in tallies)
    assert final.proven == sum(tally.proven for tally in tallies)


async def _final_counts(redis_url: str) -> StageCounts:
    client = Redis.from_url(redis_url)
    try:
        return await StageLimits(client, Keys()).counts(RUN, STAGE)
    finally:
        await client.aclose()
