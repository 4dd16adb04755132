"""The console's graph view of a large live run, next to reading the same graph from Redis.

A run of `--situations` situations (`chain_run_events`: a chain, each situation answered
by a continuing and a failing candidate, as a long generation looks) is applied to Redis.
Then, in turns:
the baseline reads the whole graph (`GraphStore.load`, what any view of it needs), and
the console builds its graph view from Redis (read, save records with descendant scores,
compact tree, JSON body), which is what one poll of an open graph page costs the
controller when the run changed. A poll of an unchanged run only checks the run's change
marks (state, applied events, coached branches) and serves the cached view, hashed.

    .venv/bin/python -m benchmarks.console [--situations 2000] [--rounds 15] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import anyio
from redis.asyncio import Redis

from benchmarks.common import SHARED_URL_HELP, bench_redis, p50
from gencoach.console.graphview import graph_view
from gencoach.console.sources import LiveSource
from gencoach.constants import Keys
from gencoach.service.coaching.requests import RequestStore
from gencoach.service.store.graphstore import GraphStore
from tests.support.graphs import chain_run_events

RUN = "bench-console"


async def _measure(url: str, situations: int, rounds: int) -> None:
    client = Redis.from_url(url)
    keys = Keys("bench-console")
    store = GraphStore(client, keys)
    source = LiveSource(store, RequestStore(client, keys))
    events = chain_run_events(RUN, situations)
    for start in range(0, len(events), 500):
        await store.apply(events[start : start + 500])
    baseline: list[float] = []
    console: list[float] = []
    unchanged: list[float] = []
    size = 0
    for _ in range(rounds):
        started = time.perf_counter()
        await store.load(RUN)
        baseline.append(time.perf_counter() - started)
        source._cache.clear()  # as after a change of the run
        started = time.perf_counter()
        data = await source.graph(RUN)
        assert data is not None
        body = json.dumps(graph_view(data), separators=(",", ":")).encode()
        console.append(time.perf_counter() - started)
        size = len(body)
        started = time.perf_counter()
        assert await source.graph(RUN) is data
        hashlib.blake2b(body, digest_size=12).hexdigest()
        unchanged.append(time.perf_counter() - started)
    index_keys = [key async for key in client.scan_iter(match=f"{keys.prefix}:runs:*")]
    await client.delete(*store.run_keys(RUN), *index_keys)
    await client.aclose()
    print(
        f"graph of {situations} situations, {2 * situations} candidates; body {size / 1e6:.2f} MB"
    )
    print(f"read the graph (baseline): {p50(baseline) * 1000:8.1f} ms (median of {rounds})")
    print(f"console graph view:        {p50(console) * 1000:8.1f} ms")
    print(f"ratio console / baseline:  {p50(console) / p50(baseline):8.2f}")
    print(f"poll of an unchanged run:  {p50(unchanged) * 1000:8.1f} ms")
    print(f"ratio unchanged / baseline:{p50(unchanged) / p50(baseline):8.3f}")


def main() -> None:
    """Measure and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--situations", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--redis-url", default=None, help=SHARED_URL_HELP)
    args = parser.parse_args()
    with bench_redis(args.redis_url) as url:
        anyio.run(_measure, url, args.situations, args.rounds)


if __name__ == "__main__":
    main()
