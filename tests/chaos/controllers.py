"""Several controllers on one Redis, one SIGKILLed while it holds entries of a stream.

Each wave posts many runs' two-step failures at once through `POST /v1/events`, kills a
controller the moment it holds entries of the chosen stream (intake batches in flight,
terminals being routed, results being applied), measures how long until its entries are
taken over and until every run has its branch order, then starts a replacement under a
new consumer name (as a supervisor would).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import redis

from gencoach.constants import CONTROLLER_GROUP, Keys
from tests.support.controller import ControllerProcess
from tests.support.graphs import RUN_STARTED
from tests.support.streams import entries

KEYS = Keys()
STREAMS = {"intake": KEYS.events, "terminals": KEYS.terminals, "results": KEYS.results}
FAILURE = {"event": "failure", "state": "exceeded"}
_PRESS = {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"}


def failing_run(run_id: str, agent_url: str) -> list[dict[str, Any]]:
    """A run whose second decision fails its stage: seven events, numbered from 0."""
    stage = {"id": 0, "goal": "press sw0 then sw4", "target_tool_calls": 2}
    user = {"type": "user", "content": "press sw0, then sw4"}
    events: list[dict[str, Any]] = [
        {"type": "run.started", **RUN_STARTED, "agent_url": agent_url},
        {"type": "situation.created", "situation_id": "s0", "parent_candidate_id": None,
         "stage": stage, "input": {"id": 0, "instruction": user}},
        {"type": "candidate.created", "candidate_id": "c0", "situation_id": "s0",
         "response_status": "completed", "output": {"say": "", "tool_calls": [_PRESS]}},
        {"type": "candidate.executed", "candidate_id": "c0", "status": "ongoing"},
        {"type": "situation.created", "situation_id": "s1", "parent_candidate_id": "c0",
         "stage": stage, "input": {"id": 1, "instruction": {"type": "env", "content": "ok"}}},
        {"type": "candidate.created", "candidate_id": "c1", "situation_id": "s1",
         "response_status": "completed", "output": {"say": "", "tool_calls": [_PRESS]}},
        {"type": "candidate.executed", "candidate_id": "c1", "status": "error",
         "stage_end": FAILURE},
    ]  # fmt: skip
    return [{**event, "run_id": run_id, "seq": seq} for seq, event in enumerate(events)]


@dataclass
class Kill:
    """One SIGKILL: whom, at which moment, what it held, and how long recovery took."""

    moment: str
    consumer: str
    held: dict[str, int]
    taken_over_s: float | None = None
    recovered_s: float | None = None


@dataclass
class Cluster:
    """Controllers sharing one Redis (each in its own folder), and one worker pool."""

    folder: Path
    redis_url: str
    settings: dict[str, Any]
    lease_s: float
    live: list[ControllerProcess] = field(default_factory=list)
    dead: list[ControllerProcess] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    started: int = 0

    def start(self, count: int) -> None:
        """Start `count` controllers and the workers."""
        (self.folder / "workers").mkdir(parents=True)
        workers = ControllerProcess(self.folder / "workers", self.redis_url, settings=self.settings)
        workers.start_workers()
        self.dead.append(workers)  # never started as a controller: only its workers run
        for _ in range(count):
            self.add()

    def add(self) -> ControllerProcess:
        """Start one more controller, under a consumer name never used before."""
        self.started += 1
        name = f"controller-{self.started}"
        (self.folder / name).mkdir(parents=True)
        controller = ControllerProcess(
            self.folder / name,
            self.redis_url,
            settings=self.settings,
            consumer=name,
            lease_s=self.lease_s,
            batch_size=25,
            housekeeping_s=2,
        )
        controller.start()
        self.live.append(controller)
        return controller

    def consumer(self, controller: ControllerProcess) -> str:
        """The consumer name a controller reads under."""
        return controller.folder.name

    def held(self, client: redis.Redis, consumer: str) -> dict[str, int]:
        """Entries of each stream the consumer holds (read, not acknowledged)."""
        held = {}
        for moment, stream in STREAMS.items():
            summary = client.xpending(stream, CONTROLLER_GROUP) if client.exists(stream) else {}
            counts = {c["name"].decode(): c["pending"] for c in summary.get("consumers", [])}
            held[moment] = int(counts.get(consumer, 0))
        return held

    def kill_when_holding(
        self, client: redis.Redis, moment: str, victim: ControllerProcess, timeout_s: float
    ) -> Kill:
        """SIGKILL `victim` as soon as it holds entries of `moment`'s stream."""
        consumer = self.consumer(victim)
        deadline = time.monotonic() + timeout_s
        held = self.held(client, consumer)
        while held[moment] == 0:
            assert time.monotonic() < deadline, (
                f"{consumer} never held {moment} entries within {timeout_s} s; its log:\n"
                + victim.log_text()[-3000:]
            )
            held = self.held(client, consumer)
        assert victim.process is not None
        victim.process.kill()
        victim.process.wait(10)
        self.live.remove(victim)
        self.dead.append(victim)
        kill = Kill(moment, consumer, held)
        self.kills.append(kill)
        return kill

    def stop(self) -> None:
        """Kill every process left."""
        for controller in [*self.live, *self.dead]:
            controller.stop()


def post_runs(url: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    """Post every run's events at once, one request per run, 16 at a time."""

    def post(events: list[dict[str, Any]]) -> None:
        for _ in range(20):
            try:
                response = httpx.post(f"{url}/v1/events", json=events, timeout=30)
            except httpx.HTTPError:
                time.sleep(0.5)
                continue
            if response.status_code == 202:
                return
            time.sleep(0.5)
        raise AssertionError(f"could not post {events[0]['run_id']}")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(post, runs.values()))


def orders_by_request(client: redis.Redis, run_id: str) -> Counter[str]:
    """How many branch orders each request of the run has on the run's stream."""
    found: Counter[str] = Counter()
    for _, fields in entries(client, KEYS.branches(run_id)):
        found[json.loads(fields[b"order"])["branch_id"].split("|")[0]] += 1
    return found


def admitted(url: str, run_id: str) -> list[dict[str, Any]] | None:
    """The run's admitted requests, or None while the controller cannot say."""
    try:
        response = httpx.get(f"{url}/v1/runs/{run_id}/requests", timeout=10)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    return [
        request
        for request in response.json()["requests"]
        if "admitted" in [step["state"] for step in request["history"]]
    ]


def why_unordered(client: redis.Redis, url: str, run_ids: list[str]) -> str:
    """What Redis and the controller say about runs still without a branch order."""
    lines = []
    for run_id in [r for r in run_ids if not orders_by_request(client, r)][:8]:
        meta = cast(dict[bytes, bytes], client.hgetall(KEYS.run(run_id, "meta")))
        parked = client.hkeys(KEYS.run(run_id, "parked"))
        try:
            requests = httpx.get(f"{url}/v1/runs/{run_id}/requests", timeout=10).json()
        except (httpx.HTTPError, ValueError) as error:
            requests = repr(error)
        state = {k.decode(): v.decode()[:60] for k, v in meta.items() if k != b"started"}
        lines.append(f"{run_id}: meta {state} parked {parked} requests {requests}")
    return "\n".join(lines)
