"""The runs list at 1,000, 10,000 and 30,000 runs, next to a plain SCAN of the run keys.

Runs are seeded straight into Redis through the store's own write path
(`GraphStore.apply`, 500 events per call, then `GraphStore.mark_saved`: the run scripts
and the runs index), as a campaign leaves them: 2% active, the rest finished and saved
(their keys kept a day). A real controller process (`gencoach serve`, coaching off)
serves the lists; its reconciler goes over the open and the recently saved runs meanwhile.
At each size, in turns: the baseline SCANs every run's meta key (what any listing of
every run must at least do), then `GET /v1/runs` (a page of 100), the same filtered by
state and scenario, and the console's `GET /console/api/runs` (a page of 50, each row with
its graph sizes and requests). Then `/health` is timed while another client reads the
console's list without pause.

    .venv/bin/python -m benchmarks.runs [--sizes 1000,10000,30000] [--rounds 7] [--redis-url URL]

Without `--redis-url` an embedded Redis is started; a database given is flushed.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import anyio
import httpx
import redis as sync_redis
from redis.asyncio import Redis

from benchmarks.common import FLUSHED_URL_HELP, bench_redis, p50, percentile
from gencoach.constants import Keys
from gencoach.protocol import AnyEvent, parse_event
from gencoach.service.store.graphstore import GraphStore
from tests.support.controller import ControllerProcess
from tests.support.graphs import RUN_STARTED

SCENARIOS = ("buttons", "colors", "stack", "sort")


def _events(first: int, last: int) -> list[AnyEvent]:
    events: list[AnyEvent] = []
    for index in range(first, last):
        run_id = f"bench-{index:06d}"
        started = {**RUN_STARTED, "type": "run.started", "run_id": run_id, "seq": 0,
                   "scenario": SCENARIOS[index % len(SCENARIOS)]}  # fmt: skip
        events.append(parse_event(started))
        if index % 50:
            events.append(parse_event({"type": "run.finished", "run_id": run_id, "seq": 1}))
    return events


async def _seed(url: str, first: int, last: int) -> float:
    client = Redis.from_url(url)
    store = GraphStore(client, Keys())
    events = _events(first, last)
    started = time.perf_counter()
    for start in range(0, len(events), 500):
        await store.apply(events[start : start + 500])
    for event in events:
        if event.type == "run.finished":
            await store.mark_saved(event.run_id, f"saves/{event.run_id}", 86_400)
    took = time.perf_counter() - started
    await client.aclose()
    return took


def _scan(client: sync_redis.Redis) -> tuple[float, int, int]:
    started = time.perf_counter()
    found = list(client.scan_iter(match="gencoach:run:{*}:meta", count=1000))
    return time.perf_counter() - started, sum(len(key) for key in found), len(found)


def _get(http: httpx.Client, path: str) -> tuple[float, int]:
    started = time.perf_counter()
    response = http.get(path)
    took = time.perf_counter() - started
    assert response.status_code == 200, response.text
    return took, len(response.content)


def _health_while_listing(http: httpx.Client, base: str, samples: int) -> list[float]:
    stop = threading.Event()

    def list_forever() -> None:
        with httpx.Client(base_url=base, timeout=30) as other:
            while not stop.is_set():
                other.get("/console/api/runs?limit=50")

    reader = threading.Thread(target=list_forever, daemon=True)
    reader.start()
    try:
        return [_get(http, "/health")[0] for _ in range(samples) if not time.sleep(0.01)]
    finally:
        stop.set()
        reader.join(30)


def _row(name: str, times: list[float], size: int) -> str:
    return f"| {name} | {p50(times) * 1000:,.1f} ms | {size / 1000:,.1f} kB |"


def measure(url: str, sizes: list[int], rounds: int) -> None:
    """Seed up to each size, then print one table per size."""
    client = sync_redis.Redis.from_url(url)
    client.flushdb()
    with tempfile.TemporaryDirectory() as folder:
        settings = {"coaching": {"enabled": False}}
        controller = ControllerProcess(Path(folder), url, settings=settings)
        controller.start()
        try:
            seeded = 0
            with httpx.Client(base_url=controller.url, timeout=60) as http:
                for size in sizes:
                    took = anyio.run(_seed, url, seeded, size)
                    print(f"\nseeded {size - seeded:,} runs in {took:.1f} s")
                    seeded = size
                    _report(client, http, controller.url, size, rounds)
        finally:
            controller.stop()
            client.flushdb()


def _report(
    client: sync_redis.Redis, http: httpx.Client, base: str, size: int, rounds: int
) -> None:
    paths = {
        "GET /v1/runs (page of 100)": "/v1/runs?limit=100",
        "GET /v1/runs?state=active&scenario=buttons": "/v1/runs?state=active&scenario=buttons",
        "GET /console/api/runs (page of 50)": "/console/api/runs?limit=50",
    }
    scans: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in paths}
    sizes: dict[str, int] = {}
    scanned = (0, 0)
    for _ in range(rounds):
        took, key_bytes, keys = _scan(client)
        scans.append(took)
        scanned = (key_bytes, keys)
        for name, path in paths.items():
            took, body = _get(http, path)
            times[name].append(took)
            sizes[name] = body
    total = http.get("/v1/runs?limit=1").json()["total"]
    assert total == size, (total, size)
    print(f"\n{size:,} runs (total listed {total:,}; {scanned[1]:,} meta keys scanned)\n")
    print("| | median | bytes | / SCAN |")
    print("|---|---|---|---|")
    print(f"| SCAN of the run keys (baseline) | {p50(scans) * 1000:,.1f} ms "
          f"| {scanned[0] / 1000:,.1f} kB | 1.00 |")  # fmt: skip
    for name, values in times.items():
        print(f"{_row(name, values, sizes[name])} {p50(values) / p50(scans):.3f} |")
    health = _health_while_listing(http, base, 200)
    print(f"\n/health while the console's list is read: p50 {p50(health) * 1000:.1f} ms, "
          f"p99 {percentile(health, 0.99) * 1000:.1f} ms ({len(health)} calls)")  # fmt: skip


def main() -> None:
    """Measure and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,30000")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--redis-url", default=None, help=FLUSHED_URL_HELP)
    args = parser.parse_args()
    sizes = sorted(int(item) for item in args.sizes.split(","))
    with bench_redis(args.redis_url) as url:
        measure(url, sizes, args.rounds)


if __name__ == "__main__":
    main()
