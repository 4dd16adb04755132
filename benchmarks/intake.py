"""Events applied per second by controller intake, against a raw XADD/XREADGROUP loop.

Both sides stream the same events through a consumer group on the same Redis, in
batches of the same size: the raw loop publishes a batch (pipelined XADD), reads it
back (XREADGROUP) and acknowledges it (XACK); the controller side publishes the same
batches from one task while intake, in another, parses, validates and applies each
event to its run graph with the Lua script and acknowledges it. A second figure
times consumption alone, from a stream filled beforehand. A third counts the Redis
commands intake runs per event (`INFO commandstats`, which counts the commands inside
Lua scripts too) while it consumes a filled stream, on a private embedded Redis so that
no other client's commands are counted. With `--held-starts`, consumption and commands
again for a stream whose run.started entries another consumer read and died holding:
intake reads the runs' other events, each waits in Redis for its run.started, and applies
with it once intake has taken the dead consumer's entries over (its lease is 0.1 s here).

    .venv/bin/python -m benchmarks.intake [--runs 1000] [--batch 500] [--redis-url URL]
        [--held-starts]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio
from redis.asyncio import Redis

from benchmarks.common import FLUSHED_URL_HELP, bench_redis
from gencoach.constants import CONTROLLER_GROUP, EVENT_FIELD, Keys
from gencoach.metrics import MetricsRecorder
from gencoach.runtime.embedded_redis import EmbeddedRedis
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.intake import Intake, IntakeOptions
from tests.support.graphs import known_run_events


def _events(runs: int, starts_first: bool = False) -> list[str]:
    events, starts = [], []
    for run in range(runs):
        for seq, (kind, fields) in enumerate(known_run_events()):
            event = {"type": kind, "run_id": f"bench-{run}", "seq": seq, **fields}
            line = json.dumps(event, separators=(",", ":"))
            (starts if starts_first and kind == "run.started" else events).append(line)
    return starts + events


async def _dead(name: str) -> bool:
    return False  # every other consumer is dead


async def _hold(client: Redis, keys: Keys, count: int) -> None:
    """A consumer reads the stream's first `count` entries and dies holding them."""
    await client.xreadgroup(CONTROLLER_GROUP, "dead", {keys.events: ">"}, count=count)


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
    metrics: MetricsRecorder | None = None,
    publish: bool = True,
    held: int = 0,
) -> float:
    if prefill:
        await _fill(client, keys.events, events)
        if held:
            await _hold(client, keys, held)
    store = GraphStore(client, keys)
    if held:
        options = IntakeOptions("bench", batch_size=batch, lease_s=0.1)
        intake = Intake(client, keys, store, options, metrics=metrics, alive=_dead)
    else:
        options = IntakeOptions("bench", batch_size=batch)
        intake = Intake(client, keys, store, options, metrics=metrics)
    publisher = client
    async with anyio.create_task_group() as tg:
        await tg.start(intake.run)
        started = time.perf_counter()
        if publish and not prefill:
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


async def _command_calls(client: Redis) -> Counter[str]:
    stats = await client.info("commandstats")
    return Counter(
        {
            name.removeprefix("cmdstat_"): int(value["calls"])
            for name, value in stats.items()
            if name.startswith("cmdstat_")
        }
    )


async def _commands(events: list[str], batch: int, held: int = 0) -> Counter[str]:
    """The commands intake runs to consume the events (the first `held` held by a dead
    consumer), on a private Redis."""
    with (
        tempfile.TemporaryDirectory() as folder,
        EmbeddedRedis(Path(folder), persist=False) as server,
    ):
        assert server.url is not None
        client = Redis.from_url(server.url)
        keys = Keys("bench-commands")
        await _fill(client, keys.events, events)
        if held:
            await _hold(client, keys, held)
        before = await _command_calls(client)
        await _intake(client, keys, events, batch, prefill=False, publish=False, held=held)
        after = await _command_calls(client)
        await client.aclose()
    spent = after - before
    spent["info"] -= 1  # the second snapshot's own INFO
    return +spent


async def main(url: str, runs: int, batch: int, held_starts: bool) -> None:
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
    _print_commands("consume only", await _commands(events, batch), len(events))
    if held_starts:
        late = _events(runs, starts_first=True)
        await client.flushdb()
        raw_s = await _raw(client, Keys("bench-raw"), late, batch, True)
        intake_s = await _intake(client, Keys("bench-held"), late, batch, True, held=runs)
        print("consume only, every run.started held by a dead consumer:")
        print(f"  raw XADD/XREADGROUP/XACK : {len(late) / raw_s:9.0f} events/s  (baseline)")
        print(f"  controller intake        : {len(late) / intake_s:9.0f} events/s")
        print(f"  ratio intake/raw         : {raw_s / intake_s:9.2f}")
        await client.flushdb()
        _print_commands("run.started held", await _commands(late, batch, held=runs), len(late))
    await client.aclose()


def _print_commands(label: str, spent: Counter[str], events: int) -> None:
    total = sum(spent.values())
    print(f"Redis commands per event ({label}, private Redis): {total / events:.2f}")
    for name, calls in spent.most_common():
        print(f"  {name:<12} {calls / events:7.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="known runs of 23 events each")
    parser.add_argument("--batch", type=int, default=500, help="entries per XREADGROUP")
    parser.add_argument("--redis-url", default=None, help=FLUSHED_URL_HELP)
    parser.add_argument(
        "--held-starts", action="store_true", help="also every run.started held by a dead consumer"
    )
    args = parser.parse_args()
    with bench_redis(args.redis_url) as redis_url:
        anyio.run(main, redis_url, args.runs, args.batch, args.held_starts)
