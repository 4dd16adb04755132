"""Events applied per second by controller intake, against a raw XADD/XREADGROUP loop.

Both sides stream the same events through a consumer group on the same Redis, in
batches of the same size: the raw loop publishes a batch (pipelined XADD), reads it
back (XREADGROUP) and acknowledges it (XACK); the controller side publishes the same
batches from one task while intake, in another, parses, validates and applies each
event to its run graph with the Lua script and acknowledges it. A second figure
times consumption alone, from a stream filled beforehand.

    .venv/bin/python -m benchmarks.intake [--runs 1000] [--batch 500] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import json
import time

import anyio
from redis.asyncio import Redis

from benchmarks.common import bench_redis
from gencoach.constants import CONTROLLER_GROUP, EVENT_FIELD, Keys
from gencoach.metrics import Recorder
from gencoach.service.graphstore import GraphStore
from gencoach.service.intake import Intake, IntakeOptions
from tests.support.graphs import known_run_events


def _events(runs: int) -> list[str]:
    events = []
    for run in range(runs):
        for seq, (kind, fields) in enumerate(known_run_events()):
            event = {"type": kind, "run_id": f"bench-{run}", "seq": seq, **fields}
            events.append(json.dumps(event, separators=(",", ":")))
    return events


async def _fill(client: Redis, stream: str, events: list[str]) -> None:
    await client.xgroup_create(stream, CONTROLLER_GROUP, id="0", mkstream=True)
    for start in range(0, len(events), 1000):
        pipe = client.pipeline(transaction=False)
        for event in events[start : start + 1000]:
            pipe.xadd(stream, {EVENT_FIELD: event})
        await pipe.execute()


async def _publish(client: Redis, stream: str, events: list[str]) -> None:
    pipe = client.pipeline(transaction=False)
    for event in events:
        pipe.xadd(stream, {EVENT_FIELD: event})
    await pipe.execute()


async def _raw(client: Redis, keys: Keys, events: list[str], batch: int, prefill: bool) -> float:
    if prefill:
        await _fill(client, keys.events, events)
    else:
        await client.xgroup_create(keys.events, CONTROLLER_GROUP, id="0", mkstream=True)
    consumed = 0
    started = time.perf_counter()
    while consumed < len(events):
        if not prefill:
            await _publish(client, keys.events, events[consumed : consumed + batch])
        reply = await client.xreadgroup(CONTROLLER_GROUP, "raw", {keys.events: ">"}, count=batch)
        entries = reply[0][1]
        await client.xack(keys.events, CONTROLLER_GROUP, *(entry_id for entry_id, _ in entries))
        consumed += len(entries)
    return time.perf_counter() - started


async def _intake(
    client: Redis,
    keys: Keys,
    events: list[str],
    batch: int,
    prefill: bool,
    metrics: Recorder | None = None,
) -> float:
    if prefill:
        await _fill(client, keys.events, events)
    options = IntakeOptions("bench", batch_size=batch)
    intake = Intake(client, keys, GraphStore(client, keys), options, metrics=metrics)
    publisher = client
    async with anyio.create_task_group() as tg:
        await tg.start(intake.run)
        started = time.perf_counter()
        if not prefill:
            for start in range(0, len(events), batch):
                await _publish(publisher, keys.events, events[start : start + batch])
        while intake.counters.applied + intake.counters.duplicates < len(events):  # noqa: ASYNC110
            await anyio.sleep(0.001)
        elapsed = time.perf_counter() - started
        intake.stop()
    if intake.counters.dead:
        raise SystemExit(
            f"{intake.counters.dead} events were dead-lettered: the benchmark is wrong"
        )
    return elapsed


async def main(url: str, runs: int, batch: int) -> None:
    events = _events(runs)
    client = Redis.from_url(url)
    print(f"events: {len(events)} ({runs} runs of 23), batch {batch}, redis {url}")
    for prefill, label in ((False, "publish + consume"), (True, "consume only")):
        await client.flushdb()
        raw_s = await _raw(client, Keys("bench-raw"), events, batch, prefill)
        intake_s = await _intake(client, Keys("bench-intake"), events, batch, prefill)
        raw_rate, intake_rate = len(events) / raw_s, len(events) / intake_s
        print(f"{label}:")
        print(f"  raw XADD/XREADGROUP/XACK : {raw_rate:9.0f} events/s  (baseline)")
        print(f"  controller intake        : {intake_rate:9.0f} events/s")
        print(f"  ratio intake/raw         : {intake_rate / raw_rate:9.2f}")
    await client.flushdb()
    await client.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="known runs of 23 events each")
    parser.add_argument("--batch", type=int, default=500, help="entries per XREADGROUP")
    parser.add_argument("--redis-url", default=None, help="default: 127.0.0.1:6379/14 or embedded")
    args = parser.parse_args()
    with bench_redis(args.redis_url, "redis://127.0.0.1:6379/14") as redis_url:
        anyio.run(main, redis_url, args.runs, args.batch)
