"""The console's graph view of a large live run, next to reading the same graph from Redis.

A run of `--situations` situations (a chain, each situation answered by a continuing and a
failing candidate, as a long generation looks) is applied to Redis. Then, in turns:
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

from benchmarks.common import bench_redis, p50
from gencoach.console.graphview import graph_view
from gencoach.console.sources import LiveSource
from gencoach.constants import Keys
from gencoach.protocol import AnyEvent, parse_event
from gencoach.service.graphstore import GraphStore
from gencoach.service.requests import RequestStore

RUN = "bench-console"
PRESS = {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"}


def _events(situations: int) -> list[AnyEvent]:
    raw: list[dict[str, object]] = [
        {"type": "run.started", "agent_url": "http://127.0.0.1:1", "scenario": "buttons",
         "target": "sw0", "target_kind": "button", "task_description": "press",
         "generator": {"name": "bench", "version": "1"}},
    ]  # fmt: skip
    stage = {"id": 0, "goal": "press sw0"}
    for sid in range(situations):
        parent = None if sid == 0 else f"c{sid - 1}"
        instruction = {"type": "env", "content": f"step {sid}: " + "feedback " * 20}
        raw.append({"type": "situation.created", "situation_id": f"s{sid}",
                    "parent_candidate_id": parent, "stage": stage,
                    "input": {"id": sid, "instruction": instruction}})  # fmt: skip
        for cid, output in ((f"c{sid}", {"tool_calls": [PRESS]}), (f"x{sid}", {"say": "no"})):
            raw.append({"type": "candidate.created", "candidate_id": cid, "situation_id": f"s{sid}",
                        "response_status": "completed", "output": output})  # fmt: skip
        raw.append({"type": "candidate.executed", "candidate_id": f"c{sid}", "status": "ongoing"})
        raw.append({"type": "candidate.executed", "candidate_id": f"x{sid}", "status": "error",
                    "stage_end": {"event": "failure", "state": "exceeded"}})  # fmt: skip
    return [parse_event({**event, "run_id": RUN, "seq": seq}) for seq, event in enumerate(raw)]


async def _measure(url: str, situations: int, rounds: int) -> None:
    client = Redis.from_url(url)
    keys = Keys("bench-console")
    store = GraphStore(client, keys)
    source = LiveSource(store, RequestStore(client, keys))
    events = _events(situations)
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
    await client.delete(*store.run_keys(RUN), keys.runs)
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
    parser.add_argument("--redis-url", default=None)
    args = parser.parse_args()
    with bench_redis(args.redis_url) as url:
        anyio.run(_measure, url, args.situations, args.rounds)


if __name__ == "__main__":
    main()
