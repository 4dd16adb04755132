"""The client CPU one Redis call costs with the service's asyncio clients, next to
redis-py's defaults in the same run.

Each client sends `--n` GETs one after another, then `--n` / 4 pipelines of three GETs,
on one connection, and the benchmark reads this process's CPU time (user + system) over
each part: what the controller and the workers spend a call besides Redis's own work.
The baseline is a client as redis-py makes it by default (`Redis.from_url`: a plain pool,
a 5 s socket timeout on every call); the others are the controller's two pools
(`gencoach.service.pools`: the loops' without a per-call timeout, the API's with its 5 s)
and the workers' jobs' client (`gencoach.workers.resources`). Rounds alternate the
clients; the best round of each is kept. One key of its own ("bench:redis-calls") is
written and deleted; nothing else is touched.

    .venv/bin/python -m benchmarks.redis_calls [--n 20000] [--rounds 3] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable

from redis.asyncio import Redis

from benchmarks.common import SHARED_URL_HELP, bench_redis
from gencoach.runtime.connections import connection_options
from gencoach.service.pools import (
    API_SOCKET_TIMEOUT_S,
    LOOP_CONNECTIONS,
    LOOP_WAIT_S,
    pooled_client,
)

KEY = "bench:redis-calls"


def clients(url: str) -> dict[str, Callable[[], Redis]]:
    """The clients measured, by name; the first is the baseline."""
    return {
        "redis-py default (baseline)": lambda: Redis.from_url(url),
        "controller loops": lambda: pooled_client(url, LOOP_CONNECTIONS, LOOP_WAIT_S, None),
        "controller API": lambda: pooled_client(url, 32, 10.0, API_SOCKET_TIMEOUT_S),
        "worker jobs": lambda: Redis.from_url(url, max_connections=80, **connection_options(None)),
    }


async def measure(client: Redis, n: int) -> tuple[float, float]:
    """CPU microseconds a GET, and a pipeline of three GETs."""
    await client.get(KEY)  # connected before the clock starts
    started = time.process_time()
    for _ in range(n):
        await client.get(KEY)
    single = time.process_time() - started
    started = time.process_time()
    for _ in range(n // 4):
        pipe = client.pipeline(transaction=False)
        for _ in range(3):
            pipe.get(KEY)
        await pipe.execute()
    piped = time.process_time() - started
    await client.aclose()
    return single / n * 1e6, piped / (n // 4) * 1e6


async def run(url: str, n: int, rounds: int) -> None:
    """Measure every client `rounds` times, alternating, and print the best of each."""
    setup = Redis.from_url(url)
    await setup.set(KEY, "v" * 100)
    made = clients(url)
    best: dict[str, tuple[float, float]] = {}
    try:
        for _ in range(rounds):
            for name, make in made.items():
                single, piped = await measure(make(), n)
                kept = best.get(name, (single, piped))
                best[name] = (min(kept[0], single), min(kept[1], piped))
    finally:
        await setup.delete(KEY)
        await setup.aclose()
    base_single, base_piped = next(iter(best.values()))
    header = f"{'client':<28} {'us CPU a GET':>13} {'ratio':>6}"
    print(f"{header} {'us CPU a pipeline of 3':>23} {'ratio':>6}")
    for name, (single, piped) in best.items():
        print(
            f"{name:<28} {single:>13.1f} {single / base_single:>6.2f}"
            f" {piped:>23.1f} {piped / base_piped:>6.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="GETs a client and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis-url", default=None, help=SHARED_URL_HELP)
    options = parser.parse_args()
    with bench_redis(options.redis_url) as url:
        asyncio.run(run(url, options.n, options.rounds))


if __name__ == "__main__":
    main()
