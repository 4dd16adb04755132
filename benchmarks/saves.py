"""The controller's `/health` while a large run is saved, against `/health` at rest.

A run of `--situations` situations (`chain_run_events`: each situation answered by a
candidate that goes on and one that fails) is applied to Redis through the graph store.
A real controller (`gencoach serve`) is asked `/health` one request after another,
first at rest (the baseline, same run), then from the moment the run's `run.finished`
is posted until the run is marked saved. Then the same run is saved again in this
process (`Persister.save`, no controller) to measure the save's CPU: on the event
loop's thread alone and in the whole process (the worker thread included).

    .venv/bin/python -m benchmarks.saves [--situations 10000] [--rest 200] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio
import httpx
from redis.asyncio import Redis

from benchmarks.common import SHARED_URL_HELP, bench_redis, p50, percentile
from gencoach.constants import Keys
from gencoach.limits import StageLimits
from gencoach.service.saving.persist import Persister
from gencoach.service.store.graphstore import GraphStore
from tests.support.controller import ControllerProcess
from tests.support.graphs import chain_run_events

RUN = "bench-save"
# Its own key prefix, so the local server's database is shared safely; removed at the end.
KEYS = Keys("bench-saves")


async def _health_ms(client: httpx.AsyncClient) -> float:
    started = time.perf_counter()
    response = await client.get("/health")
    assert response.status_code == 200, response.text
    return (time.perf_counter() - started) * 1000


def _print_latencies(label: str, values: list[float]) -> None:
    print(
        f"{label:<18} n={len(values):5d}  p50 {p50(values):8.1f} ms  "
        f"p99 {percentile(values, 0.99):8.1f} ms  max {max(values):8.1f} ms  "
        f"over 100 ms {sum(1 for value in values if value > 100)}"
    )


async def _drop_keys(client: Redis) -> None:
    doomed = [key async for key in client.scan_iter(match=f"{KEYS.prefix}:*", count=1000)]
    for start in range(0, len(doomed), 1000):
        await client.delete(*doomed[start : start + 1000])


async def _seed(store: GraphStore, situations: int) -> int:
    events = chain_run_events(RUN, situations)
    for start in range(0, len(events), 500):
        await store.apply(events[start : start + 500])
    return len(events)


async def _during_save(url: str, folder: Path, situations: int, rest: int) -> None:
    client = Redis.from_url(url)
    store = GraphStore(client, KEYS)
    await _drop_keys(client)
    seq = await _seed(store, situations)
    redis_settings = {"redis": {"url": url, "key_prefix": KEYS.prefix}}
    controller = ControllerProcess(folder, url, settings=redis_settings)
    controller.start(timeout_s=60)
    try:
        async with httpx.AsyncClient(base_url=controller.url, timeout=120) as http:
            at_rest = [await _health_ms(http) for _ in range(rest)]
            finished = [{"type": "run.finished", "run_id": RUN, "seq": seq}]
            started = time.perf_counter()
            assert (await http.post("/v1/events", json=finished)).status_code == 202
            during: list[float] = []
            while await store.state(RUN) != "saved":
                during.append(await _health_ms(http))
            save_s = time.perf_counter() - started
    finally:
        controller.stop()
        await client.aclose()
    print(f"run of {situations} situations, {2 * situations} candidates; saved in {save_s:.1f} s")
    _print_latencies("/health at rest", at_rest)
    _print_latencies("/health saving", during)
    ratio = percentile(during, 0.99) / percentile(at_rest, 0.99)
    print(f"p99 saving / at rest: {ratio:.2f}")


async def _save_cpu(url: str, folder: Path) -> None:
    client = Redis.from_url(url)
    store = GraphStore(client, KEYS)
    persister = Persister(store, StageLimits(client, KEYS), folder / "again", 60)
    loop_s, process_s, wall_s = time.thread_time(), time.process_time(), time.perf_counter()
    assert await persister.save(RUN) is not None
    loop_s, process_s = time.thread_time() - loop_s, time.process_time() - process_s
    wall_s = time.perf_counter() - wall_s
    await _drop_keys(client)
    await client.aclose()
    print(
        f"save in process: wall {wall_s:.1f} s, CPU on the event loop's thread {loop_s:.2f} s, "
        f"CPU of the process {process_s:.2f} s"
    )


def main() -> None:
    """Measure and print /health during a large save against at rest, and the save's CPU."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--situations", type=int, default=10_000)
    parser.add_argument("--rest", type=int, default=200, help="/health requests at rest")
    parser.add_argument("--redis-url", default=None, help=SHARED_URL_HELP)
    args = parser.parse_args()
    with bench_redis(args.redis_url) as url, tempfile.TemporaryDirectory() as folder:
        anyio.run(_during_save, url, Path(folder), args.situations, args.rest)
        anyio.run(_save_cpu, url, Path(folder))


if __name__ == "__main__":
    main()
