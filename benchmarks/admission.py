"""Admissions per second and their latency, next to a bare PING round trip in the same run.

Each admission is one EVALSHA of the admit script (purge, count, check, lease) on one
stage. The limits are set above `--n`, so every admission takes the full path and none is
refused; the leases are then released, timed as a third figure. Sequentially, on one
connection, every call is timed alone; concurrently, `--concurrency` tasks share a
connection pool, and PINGs are timed the same way. Keys use their own prefix ("bench")
and are deleted afterwards; nothing else in the database is touched.

    .venv/bin/python -m benchmarks.admission [--n 20000] [--concurrency 32] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.asyncio import Redis

from benchmarks.common import SHARED_URL_HELP, bench_redis
from gencoach.config import Limits
from gencoach.constants import Keys
from gencoach.limits import StageLimits

RUN, STAGE = "bench-admission", 0
LEASE_S = 30.0


@dataclass(frozen=True)
class Timing:
    """Latencies of one kind of call (seconds) and the wall time they took together."""

    latencies: list[float]
    wall_s: float

    @property
    def rate(self) -> float:
        """Calls per second of wall time."""
        return len(self.latencies) / self.wall_s

    def quantile_ms(self, q: float) -> float:
        """The q-quantile of the latencies, in milliseconds."""
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _timed(count: int, tasks: int, call: Callable[[int], Awaitable[None]]) -> Timing:
    latencies: list[float] = []

    async def worker(first: int) -> None:
        for index in range(first, count, tasks):
            started = time.perf_counter()
            await call(index)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker(first) for first in range(tasks)))
    return Timing(latencies, time.perf_counter() - started)


async def _admit_all(limits: StageLimits, count: int, tasks: int, tag: str) -> Timing:
    # Limits above the count: every admission runs the full path and none is refused.
    budget = Limits(max_pending_per_stage=count + 1, max_unproven_per_stage=count + 1)

    async def admit(index: int) -> None:
        admission = await limits.admit(RUN, STAGE, f"{tag}-{index}", budget, LEASE_S)
        if not admission.admitted:
            raise SystemExit(f"admission refused ({admission.reason}): the benchmark is wrong")

    return await _timed(count, tasks, admit)


async def _release_all(limits: StageLimits, count: int, tasks: int, tag: str) -> Timing:
    async def release(index: int) -> None:
        if not await limits.release(RUN, STAGE, f"{tag}-{index}"):
            raise SystemExit("a lease was missing at release: the benchmark is wrong")

    return await _timed(count, tasks, release)


def _report(label: str, ping: Timing, admit: Timing, release: Timing) -> None:
    print(f"{label}:")
    for name, timing in (("PING (baseline)", ping), ("admit", admit), ("release", release)):
        print(
            f"  {name:<16} p50 {timing.quantile_ms(0.50):7.3f} ms   "
            f"p99 {timing.quantile_ms(0.99):7.3f} ms   {timing.rate:9.0f} /s"
        )
    print(
        f"  admit/PING       p50 {admit.quantile_ms(0.5) / ping.quantile_ms(0.5):7.2f} x    "
        f"p99 {admit.quantile_ms(0.99) / ping.quantile_ms(0.99):7.2f} x    "
        f"rate {admit.rate / ping.rate:6.2f} x"
    )


async def main(url: str, count: int, concurrency: int) -> None:
    """Time PINGs and admissions, sequential then concurrent, and print them side by side."""
    client = Redis.from_url(url, max_connections=max(concurrency, 1) * 2)
    limits = StageLimits(client, Keys("bench"))

    async def ping(_: int) -> None:
        await client.ping()

    print(f"redis {url}, {count} admissions then {count} releases per phase, one stage")
    await _timed(min(count, 1000), 1, ping)  # warm up: connections, script cache
    try:
        await _admit_all(limits, min(count, 1000), 1, "warm")
        await _release_all(limits, min(count, 1000), 1, "warm")
        for tasks, label in ((1, "sequential, one connection"), (concurrency, "concurrent")):
            ping_timing = await _timed(count, tasks, ping)
            admit_timing = await _admit_all(limits, count, tasks, f"t{tasks}")
            release_timing = await _release_all(limits, count, tasks, f"t{tasks}")
            title = f"{label} ({tasks} tasks)" if tasks > 1 else label
            _report(title, ping_timing, admit_timing, release_timing)
    finally:
        keys = await limits.run_keys(RUN)
        await client.delete(*keys)
        await client.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="admissions per phase")
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent admitters")
    parser.add_argument("--redis-url", default=None, help=SHARED_URL_HELP)
    args = parser.parse_args()
    with bench_redis(args.redis_url) as redis_url:
        asyncio.run(main(redis_url, args.n, args.concurrency))
