"""Chaos: Redis refusing work without going away. At its maxmemory with coaching jobs in
flight, then restarted and loading a long append-only file while generators start: the
controller, the worker pool and every generator ride it out, and coaching resumes (runs
started afterwards, or during the loading, reach proven corrections)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import PRESS_SW4, coaching_settings
from tests.support.controller import ControllerProcess, wait_for
from tests.support.llm_server import ScriptedLLMServer, delayed, json_reply, scripted_llm_servers
from tests.support.load import LoadReport, start_generators
from tests.support.processes import STARTUP_S
from tests.support.slow_loading import SlowLoadingRedis

pytestmark = [pytest.mark.slow, pytest.mark.chaos, pytest.mark.timeout(300)]

DIAGNOSIS = {
    "decision_index": 2,
    "reason": "sw9 is not in the task",
    "expected_decision": PRESS_SW4,
}
# How long Redis refuses writes: an RQ heartbeat (every 15 s) and several job leases (10 s).
FULL_S = 20.0
# How long runs have, after the fault, to reach proven corrections.
RECOVERY_S = 90.0
# Padding keys each loaded 1 ms late: a restart answers LOADING for about 6 s.
PADDING_KEYS = 6000


@pytest.fixture
def llm() -> Iterator[ScriptedLLMServer]:
    """An LLM answering every diagnosis after two seconds (jobs stay in flight)."""
    with scripted_llm_servers() as start:
        server = start(delayed(2.0, json_reply(DIAGNOSIS)))
        server.script(*[delayed(2.0, json_reply(DIAGNOSIS))] * 200)
        yield server


def _controller(folder: Path, url: str, llm: ScriptedLLMServer) -> ControllerProcess:
    settings = coaching_settings(llm, format=False, suboptimal=False)
    settings["coaching"]["lease_s"] = 10
    controller = ControllerProcess(folder, url, settings=settings, housekeeping_s=2)
    controller.start()
    controller.start_workers()
    return controller


def _alive(controller: ControllerProcess) -> None:
    """The controller and its worker pool still run (neither gave up on its own)."""
    assert controller.process is not None
    code = controller.process.poll()
    assert code is None, f"the controller exited ({code}):\n{controller.log_text()[-4000:]}"
    for index, pool in enumerate(controller.workers):
        log = (controller.folder / f"workers-{index}.log").read_text(errors="replace")
        assert pool.poll() is None, f"the worker pool exited ({pool.poll()}):\n{log[-4000:]}"
        assert '"pool.gave_up"' not in log, log[-4000:]


def _requests(controller: ControllerProcess, run_id: str) -> list[dict[str, Any]] | None:
    """The run's requests; None for a 503 (a pooled connection Redis's restart closed is
    found dead at its first use); any other answer but 200 fails."""
    response = httpx.get(f"{controller.url}/v1/runs/{run_id}/requests", timeout=10)
    if response.status_code == 503:
        return None
    assert response.status_code == 200, (run_id, response.status_code, response.text[:300])
    return list(response.json()["requests"])


def _proven(controller: ControllerProcess, run_ids: list[str]) -> set[str]:
    proven = set()
    for run_id in run_ids:
        requests = wait_for(lambda r=run_id: _requests(controller, r), 30, f"{run_id}'s requests")
        if any(request["state"] == "proven" for request in requests):
            proven.add(run_id)
    return proven


def _join(threads: list[threading.Thread], controller: ControllerProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        while thread.is_alive() and time.monotonic() < deadline:
            _alive(controller)
            thread.join(0.2)
    assert not any(thread.is_alive() for thread in threads), "generators still running"


def _coaching_resumes(
    controller: ControllerProcess, report: LoadReport, threads: list[threading.Thread]
) -> str:
    """Every generator ends without error and at least half its runs reach a proven
    correction; the counts, for the output."""
    started = time.monotonic()
    _join(threads, controller, RECOVERY_S)
    assert report.errors == [], "a generator failed"
    proven = _proven(controller, report.started)
    assert len(proven) >= len(report.started) // 2, (
        f"coaching stalled after the fault: {len(proven)} of {len(report.started)} runs "
        f"reached a proven correction in {time.monotonic() - started:.0f} s"
    )
    return f"proven_runs={len(proven)}/{len(report.started)}"


def _oom_errors(client: redis.Redis) -> int:
    stats: dict[str, Any] = client.info("errorstats")
    return int(stats.get("errorstat_OOM", {}).get("count", 0))


def test_maxmemory_with_jobs_in_flight_then_coaching_resumes(
    tmp_path: Path, scripted_agent: ScriptedAgent, llm: ScriptedLLMServer
) -> None:
    """Redis at its maxmemory for 20 s while diagnoses are in flight and generators
    report: nothing exits, the generators wait, and once memory is freed runs are coached
    to proven corrections again."""
    from tests.support.restartable_redis import RestartableRedis

    server = RestartableRedis(tmp_path / "redis")
    server.start()
    client = redis.Redis.from_url(server.url)
    controller = _controller(tmp_path, server.url, llm)
    try:
        during = LoadReport()
        wave = start_generators(
            [f"m{i}" for i in range(6)], server.url, scripted_agent.url, during, 5.0
        )
        wait_for(lambda: llm.requests, STARTUP_S, "a diagnosis in flight")
        # Full at once (a maxmemory below what Redis holds): every write is refused, the
        # workers' RQ heartbeats and takes, the jobs' results, the generators' batches.
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1")
        deadline = time.monotonic() + FULL_S
        while time.monotonic() < deadline:
            _alive(controller)
            time.sleep(0.2)
        refused = _oom_errors(client)
        assert refused > 0, "Redis never refused a write: the phase tested nothing"
        client.config_set("maxmemory", "0")
        after = LoadReport()
        next_wave = start_generators(
            [f"n{i}" for i in range(6)], server.url, scripted_agent.url, after, 20.0
        )
        _join(wave, controller, RECOVERY_S)
        assert during.errors == [], "a generator failed"
        counts = _coaching_resumes(controller, after, next_wave)
        _alive(controller)
        print(f"\nmaxmemory: {FULL_S:.0f} s full, writes refused={refused}, after: {counts}")
    finally:
        controller.stop()
        client.close()
        server.kill()


def test_generators_starting_while_redis_loads_its_aof_are_coached(
    tmp_path: Path, scripted_agent: ScriptedAgent, llm: ScriptedLLMServer
) -> None:
    """Redis SIGKILLed and restarted from a long AOF; generators (on AsyncReporters, as
    the reference simulator) start while it answers LOADING: each waits, reports its run,
    and the runs are coached to proven corrections; controller and workers live on."""
    server = SlowLoadingRedis(tmp_path / "redis")
    server.start()
    server.pad(PADDING_KEYS)
    controller = _controller(tmp_path, server.url, llm)
    try:
        server.restart()
        assert server.loading(), "Redis loaded at once: the phase tested nothing"
        report = LoadReport()
        wave = start_generators(
            [f"l{i}" for i in range(6)], server.url, scripted_agent.url, report, 25.0,
            run_async=True,
        )  # fmt: skip
        loading_when_started = server.loading()
        counts = _coaching_resumes(controller, report, wave)
        _alive(controller)
        print(
            "\naof loading:",
            json.dumps({"loading_when_generators_started": loading_when_started}),
            counts,
        )
    finally:
        controller.stop()
        server.kill()
