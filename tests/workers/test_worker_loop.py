"""The whole coaching loop with ONE worker process: a real controller, `gencoach worker`, a
scripted LLM and a scripted agent, also through a SIGKILL of the worker mid-flight."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from rq import Worker
from rq.registry import FinishedJobRegistry

from gencoach.constants import QUEUE_DIAGNOSIS, QUEUE_REPAIR
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import (
    PRESS_SW4,
    coaching_settings,
    reinjection_states,
    report_known,
    settled,
)
from tests.support.controller import ControllerProcess, wait_for
from tests.support.llm_server import ScriptedLLMServer, delayed, json_reply, scripted_llm_servers
from tests.support.processes import child_pids

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

DIAGNOSIS = {
    "decision_index": 2,
    "reason": "sw9 is not in the task",
    "expected_decision": PRESS_SW4,
}


@pytest.fixture
def llm() -> Iterator[ScriptedLLMServer]:
    """A scripted LLM that diagnoses every failure the same way unless scripted otherwise."""
    with scripted_llm_servers() as start:
        yield start(json_reply(DIAGNOSIS))


@pytest.fixture
def controller(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> Iterator[Callable[..., ControllerProcess]]:
    """Make controller processes (and their workers) on the test Redis; killed after the test."""
    made: list[ControllerProcess] = []

    def make(settings: dict[str, Any]) -> ControllerProcess:
        process = ControllerProcess(tmp_path, redis_url, settings=settings)
        made.append(process)
        return process

    yield make
    for process in made:
        process.stop()


def one_process(llm: ScriptedLLMServer, **routes: bool) -> dict[str, Any]:
    """Coaching settings with `workers.processes: 1`."""
    settings = coaching_settings(llm, **routes)
    settings["workers"] = {**settings["workers"], "processes": 1}
    return settings


def test_one_worker_process_carries_every_route_to_reinjection(
    controller: Callable[..., ControllerProcess],
    llm: ScriptedLLMServer,
    scripted_agent: ScriptedAgent,
    redis_url: str,
) -> None:
    """With `workers.processes: 1`, an invalid answer, a failed stage and a suboptimal finish
    are each diagnosed, repaired and reinjected (the one process serves both queues). A
    diagnosed correction is one RQ job: its repair ran in the job that diagnosed it."""
    process = controller(one_process(llm))
    process.start()
    process.start_workers()
    report_known(redis_url, "single", scripted_agent.url)
    found = wait_for(settled(process, "single", 3), timeout_s=90, what="three settled requests")
    assert reinjection_states(found) == {
        "format": "reinjected",
        "failure": "reinjected",
        "suboptimal": "reinjected",
    }, {route: request["history"] for route, request in found.items()}
    for route in ("failure", "suboptimal"):
        states = [step["state"] for step in found[route]["history"]]
        assert states[states.index("diagnosing") :][:3] == ["diagnosing", "queued", "repairing"]
    connection = redis.Redis.from_url(redis_url)
    # The format route's repair (its only job) went through RQ; the diagnosed ones did not.
    (repaired,) = FinishedJobRegistry(QUEUE_REPAIR, connection=connection).get_job_ids()
    assert repaired.endswith("-repair-1")
    assert "format" in repaired
    assert FinishedJobRegistry(QUEUE_DIAGNOSIS, connection=connection).count == 2
    assert process.log_text().count("job.handed_over") == 2


def test_jobs_in_flight_in_a_sigkilled_worker_are_retried_and_corrected(
    controller: Callable[..., ControllerProcess],
    llm: ScriptedLLMServer,
    scripted_agent: ScriptedAgent,
    redis_url: str,
) -> None:
    """Three failures' diagnoses are in flight in the one worker process when it is SIGKILLed:
    the pool replaces it, each request's lease lapses, and each is retried and reinjected."""
    llm.script(*[delayed(120.0, json_reply(DIAGNOSIS))] * 3)
    process = controller(one_process(llm, format=False, suboptimal=False))
    process.start()
    pool = process.start_workers()
    runs = [f"killed-{index}" for index in range(3)]
    for run_id in runs:
        report_known(redis_url, run_id, scripted_agent.url)
    wait_for(lambda: len(llm.requests) >= 3, timeout_s=60, what="three diagnoses in flight")
    (registered,) = Worker.all(connection=redis.Redis.from_url(redis_url))
    worker = registered.pid
    assert worker in child_pids(pool.pid)
    os.kill(worker, signal.SIGKILL)
    for run_id in runs:
        found = wait_for(settled(process, run_id, 3), timeout_s=60, what=f"{run_id} settled")
        failure = found["failure"]
        assert (failure["state"], failure["attempt"]) == ("reinjected", 2), failure
        reasons = [step.get("reason") or "" for step in failure["history"]]
        assert any("lease lapsed" in reason for reason in reasons), failure["history"]
    assert worker not in child_pids(pool.pid)
