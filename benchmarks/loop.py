"""The end-to-end overhead of one correction, next to the round trips it is made of.

A real controller and real RQ workers (one process per queue) coach failures whose
diagnosis needs the backend, with an instant in-process backend and an instant agent
on loopback. For each of `--corrections` runs the time from publishing the failing
execution to the branch order appearing on the run's stream is measured. In the same
run each round trip a correction needs is timed alone: the event through the stream,
an RQ job there and back (the diagnosis, whose worker then does the repair), the repair's
hand-over to it (a push and a blocking read), the backend call, `POST /v1/coaching`,
`POST /v1/responses`; their medians are summed.

    .venv/bin/python -m benchmarks.loop [--corrections 30] [--redis-url URL]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import redis
from rq import Queue

from benchmarks.common import FLUSHED_URL_HELP, bench_redis, p50, percentile
from gencoach.constants import ORDER_FIELD, QUEUE_DIAGNOSIS, Keys
from gencoach.reporting.client import Reporter
from gencoach.rq_adapter import ring
from tests.support.agent_server import DEFAULT_DECISION, ScriptedAgent, ThreadedServer
from tests.support.controller import ControllerProcess
from tests.support.graphs import known_run_events


def _settings() -> dict[str, object]:
    backend = {"type": "python", "endpoint": "benchmarks.jobs:instant_diagnosis"}
    return {
        "coaching": {"enabled": True, "routes": {"format": False, "suboptimal": False}},
        "backends": {"instant": backend},
        "workers": {"processes": 2},
        "log": {"format": "json", "level": "warning"},
    }


def _correction(
    client: redis.Redis, redis_url: str, run_id: str, agent_url: str, wait_s: float = 30.0
) -> float:
    events = known_run_events()[:-1]
    failing = next(
        i
        for i, (kind, f) in enumerate(events)
        if f.get("candidate_id") == "c4" and kind == "candidate.executed"
    )
    with Reporter(run_id, redis_url=redis_url) as reporter:
        for kind, fields in events[:failing]:
            reporter.emit(
                kind, **({**fields, "agent_url": agent_url} if kind == "run.started" else fields)
            )
        reporter.flush()
        time.sleep(0.05)  # let the run be registered: not part of the correction
        kind, fields = events[failing]
        started = time.perf_counter()
        reporter.emit(kind, **fields)
        reporter.flush()
    stream = Keys().branches(run_id)
    reply = client.xread({stream: "0"}, block=int(wait_s * 1000))
    if not reply or ORDER_FIELD.encode() not in reply[0][1][0][1]:
        raise SystemExit(f"no branch order for {run_id}")
    return time.perf_counter() - started


def _round_trips(client: redis.Redis, agent_url: str, samples: int) -> dict[str, float]:
    queue = Queue(QUEUE_DIAGNOSIS, connection=client)
    timings: dict[str, list[float]] = {
        "stream": [],
        "rq job": [],
        "hand-over": [],
        "coaching": [],
        "responses": [],
    }
    body = {
        "request_id": "b",
        "inputs": [{"id": 1, "instruction": {"type": "user", "content": "x"}}],
    }
    step = {"id": 1, "input": body["inputs"][0], "output": DEFAULT_DECISION}
    coaching = {
        "run_id": "b",
        "request_id": "b",
        "kind": "failure",
        "stage": {"id": 0, "goal": "g"},
        "target_step_id": 1,
        "reinjection_points": [{"id": "replacement", "input_step_id": 1}],
        "trajectory": [step],
    }
    with httpx.Client() as http:
        for _ in range(samples):
            started = time.perf_counter()
            client.xadd("bench:loop", {"e": "1"})
            client.xread({"bench:loop": "0"}, count=1)
            timings["stream"].append(time.perf_counter() - started)
            started = time.perf_counter()
            job = queue.enqueue("benchmarks.jobs.noop")
            ring(client)  # as gencoach's enqueue does: idle workers wake at once
            while job.get_status(refresh=True) != "finished":
                time.sleep(0.001)
            timings["rq job"].append(time.perf_counter() - started)
            started = time.perf_counter()
            client.rpush("bench:hand-over", "repair")
            client.blmove("bench:hand-over", "bench:hand-over", 1, "LEFT", "LEFT")
            timings["hand-over"].append(time.perf_counter() - started)
            client.delete("bench:hand-over")
            for name, path, payload in (
                ("coaching", "/v1/coaching", coaching),
                ("responses", "/v1/responses", body),
            ):
                started = time.perf_counter()
                http.post(f"{agent_url}{path}", json=payload).raise_for_status()
                timings[name].append(time.perf_counter() - started)
    client.delete("bench:loop")
    return {name: p50(values) for name, values in timings.items()}


@contextmanager
def coaching_loop(client: redis.Redis, redis_url: str) -> Iterator[str]:
    """A controller, its workers and an instant agent (its URL), warmed up by one correction;
    the database is emptied before and after."""
    client.flushdb()
    agent = ScriptedAgent()
    server = ThreadedServer(agent.app())
    server.start()
    with tempfile.TemporaryDirectory() as folder:
        controller = ControllerProcess(Path(folder), redis_url, settings=_settings())
        try:
            controller.start()
            controller.start_workers()
            _correction(client, redis_url, "warm-up", server.url)
            yield server.url
        finally:
            controller.stop()
            server.stop()
            client.flushdb()


def main(redis_url: str, corrections: int) -> None:
    client = redis.Redis.from_url(redis_url)
    with coaching_loop(client, redis_url) as agent_url:
        loop = [_correction(client, redis_url, f"loop-{i}", agent_url) for i in range(corrections)]
        trips = _round_trips(client, agent_url, corrections)
    total = sum(trips.values())
    print(f"corrections: {corrections}, redis {redis_url}")
    for name, value in trips.items():
        print(f"  round trip {name:<10}: {value * 1000:8.2f} ms (median)")
    print(f"  sum of round trips   : {total * 1000:8.2f} ms  (baseline)")
    print(f"  correction p50       : {p50(loop) * 1000:8.2f} ms  ratio {p50(loop) / total:5.2f}")
    p99 = percentile(loop, 0.99)
    print(f"  correction p99       : {p99 * 1000:8.2f} ms  ratio {p99 / total:5.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corrections", type=int, default=30)
    parser.add_argument("--redis-url", default=None, help=FLUSHED_URL_HELP)
    args = parser.parse_args()
    with bench_redis(args.redis_url) as url:
        main(url, args.corrections)
