"""A kill at every state a coaching request can be stored in loses no request and leaks no
slot.

The process that stores the state is killed with SIGKILL right after it (a crash point,
`gencoach.runtime.crashpoints`), so whatever it would have done next (dispatch a job, work on it,
reinject, prove) is lost with it. The controller stores every state but the running ones,
and is started again. `admitted` is stored in the same write as `queued` (admission takes
the slot and queues the first job in one step), so a kill there is a kill at `queued`. A
worker stores its job's running state (`diagnosing`, `repairing`, `rewriting`) as it takes
the job: killed there, or later while its job runs, it is replaced by the pool and the
request's lease lapses. Every time, the request
ends where it would have without the kill, with one branch order, its stage holds no
pending slot, and the run's save passes the audit (`gencoach audit`).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from rq import Worker

from gencoach.constants import Keys
from gencoach.reporting.client import Reporter
from gencoach.runtime.crashpoints import ENV as CRASH_AT
from gencoach.runtime.crashpoints import ONCE_ENV as CRASH_ONCE
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import (
    REINJECTED_IN_KNOWN_RUN,
    branch_orders,
    coaching_settings,
    complete_save,
    report_known,
    request_in_state,
    requests_of,
    succeed_after,
    two_step_run,
)
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED
from tests.support.llm_server import ScriptedLLMServer, held, json_reply
from tests.support.processes import child_pids, log_tail
from tests.support.saves import assert_audit_clean

pytestmark = [pytest.mark.slow, pytest.mark.redis]

KEYS = Keys()
DIAGNOSIS = {"decision_index": 2, "reason": "sw9 is wrong", "expected_decision": None}
# The states the known run's failure request is stored in, in order, once the generator
# executes its branch and the branch ends the stage in success.
FAILURE_PATH = [
    "opportunity",
    "admitted",
    "queued",
    "diagnosing",
    "repairing",
    "corrected",
    "reinjected",
    "executed",
    "proven",
]
# The states the worker stores (as it takes a job); the controller stores the others.
WORKER_STATES = ("diagnosing", "repairing")
CONTROLLER_STATES = [state for state in FAILURE_PATH if state not in WORKER_STATES]
# A recovery waits for a lease to lapse (5 s here) or a reconciliation pass: generous.
RECOVERY_S = 90.0


def _settings(llm: ScriptedLLMServer) -> dict[str, Any]:
    return coaching_settings(llm, format=False, suboptimal=False)


def _pending_slots(controller: ControllerProcess, run_id: str) -> int:
    response = httpx.get(f"{controller.url}/v1/runs/{run_id}/stages", timeout=10)
    assert response.status_code == 200, response.text
    return sum(stage["pending"] for stage in response.json()["stages"])


def _crashed(controller: ControllerProcess, point: str) -> None:
    """Wait for the controller to kill itself at `point`; fail with its output if not."""
    try:
        code = controller.wait(timeout_s=RECOVERY_S)
    except Exception as error:
        raise AssertionError(
            f"the controller did not reach the crash point {point} in {RECOVERY_S} s:\n"
            + log_tail(controller.log_path)
        ) from error
    assert code == -signal.SIGKILL, log_tail(controller.log_path)
    assert f"crash point {point}" in controller.log_text(), log_tail(controller.log_path)


def _settled_request(
    controller: ControllerProcess, run_id: str, route: str, ends: frozenset[str]
) -> dict[str, Any]:
    def check() -> Any:
        found = requests_of(controller, run_id)
        request = found.get(route)
        return found if request is not None and request["state"] in ends else None

    try:
        found = wait_for(check, timeout_s=RECOVERY_S, what=f"the {route} request ended")
    except TimeoutError as error:
        raise AssertionError(
            f"{error}; its requests: {requests_of(controller, run_id)}\n"
            + log_tail(controller.log_path)
        ) from error
    others = {r: other["state"] for r, other in found.items() if r != route}
    assert set(others.values()) <= {"skipped"}, f"the other routes are switched off: {found}"
    request: dict[str, Any] = found[route]
    return request


def _no_slot_held(controller: ControllerProcess, run_id: str) -> None:
    wait_for(
        lambda: _pending_slots(controller, run_id) == 0,
        timeout_s=30,
        what=f"run {run_id}'s stages holding no pending slot",
    )


def _saved_and_audited(controller: ControllerProcess, redis_url: str, run_id: str) -> None:
    """Finish the run; its save holds the coaching invariants (`gencoach audit`)."""
    with Reporter(run_id, redis_url=redis_url, start_seq=900) as generator:
        generator.emit("run.finished")
    assert_audit_clean(complete_save(controller, run_id, timeout_s=RECOVERY_S).folder)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("state", CONTROLLER_STATES)
def test_a_controller_killed_at_each_state_of_a_failure_loses_nothing(
    state: str,
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """Killed just after storing `state`, then restarted: the failure request is still
    diagnosed, repaired and reinjected once, and proven once the generator has executed
    its one branch order; its stage holds no slot."""
    point = f"request:failure:{state}"
    llm.default = json_reply(DIAGNOSIS)
    controller = controller_factory(settings=_settings(llm), env={CRASH_AT: point})
    controller.start()
    controller.env = {}  # the workers never reach a controller's crash point
    controller.start_workers()
    run_id = f"kill-{state}"
    report_known(redis_url, run_id, scripted_agent.url, with_own_coaching=False)
    with Reporter(run_id, redis_url=redis_url, start_seq=500) as generator:
        executed_before = state in ("executed", "proven")
        if executed_before:  # the branch is executed before the kill
            (order,) = branch_orders(generator, 1, RECOVERY_S)
            succeed_after(generator, order)
        _crashed(controller, point)
        controller.start()
        if not executed_before:
            (order,) = branch_orders(generator, 1, RECOVERY_S)
            succeed_after(generator, order)
        request = _settled_request(controller, run_id, "failure", frozenset({"proven"}))
    history = [step["state"] for step in request["history"]]
    assert state in history, history
    assert history[-3:] == ["reinjected", "executed", "proven"], history
    assert redis_client.xlen(KEYS.branches(run_id)) == 1, "one branch order"
    _no_slot_held(controller, run_id)
    _saved_and_audited(controller, redis_url, run_id)


def _worker_crashed(controller: ControllerProcess, point: str, marker: Path) -> None:
    """Wait for a worker to kill itself at `point`; fail with the workers' output if not."""
    try:
        wait_for(marker.exists, timeout_s=RECOVERY_S, what=f"a worker at {point}")
    except TimeoutError as error:
        logs = "\n".join(log_tail(path) for path in controller.folder.glob("workers-*.log"))
        raise AssertionError(f"{error}:\n{logs}") from error


@pytest.mark.timeout(300)
@pytest.mark.parametrize("state", WORKER_STATES)
def test_a_worker_killed_at_its_running_state_loses_nothing(
    state: str,
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
) -> None:
    """The worker that took the job is killed just after storing `state` (before any
    work): the pool replaces it, the lease lapses, the job is tried again, and the request
    is proven once the generator has executed its one branch order."""
    point = f"request:failure:{state}"
    marker = tmp_path / "crashed"
    llm.default = json_reply(DIAGNOSIS)
    controller = controller_factory(settings=_settings(llm))
    controller.start()
    controller.env = {CRASH_AT: point, CRASH_ONCE: str(marker)}
    controller.start_workers()
    run_id = f"worker-at-{state}"
    report_known(redis_url, run_id, scripted_agent.url, with_own_coaching=False)
    _worker_crashed(controller, point, marker)
    with Reporter(run_id, redis_url=redis_url, start_seq=500) as generator:
        (order,) = branch_orders(generator, 1, RECOVERY_S)
        succeed_after(generator, order)
        request = _settled_request(controller, run_id, "failure", frozenset({"proven"}))
    history = [step["state"] for step in request["history"]]
    assert history.count(state) == 2, history  # stored by the killed worker, then its successor
    assert history[-3:] == ["reinjected", "executed", "proven"], history
    assert request["attempt"] == 2, request["history"]
    assert redis_client.xlen(KEYS.branches(run_id)) == 1, "one branch order"
    _no_slot_held(controller, run_id)
    _saved_and_audited(controller, redis_url, run_id)


@pytest.mark.timeout(300)
def test_a_worker_killed_at_rewriting_loses_nothing(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
) -> None:
    """The text-rewrite route's running state: the worker killed just after storing
    `rewriting`, the request is still rewritten and reinjected once."""
    point = "request:text_rewrite:rewriting"
    marker = tmp_path / "crashed"
    llm.default = json_reply({"say": "the answer is 42"})
    controller = controller_factory(settings=coaching_settings(llm))
    controller.start()
    controller.env = {CRASH_AT: point, CRASH_ONCE: str(marker)}
    controller.start_workers()
    with Reporter("kill-text", redis_url=redis_url) as reporter:
        reporter.emit("run.started", **{**RUN_STARTED, "agent_url": scripted_agent.url})
        stage = {"id": 0, "goal": "answer", "text_only": True}
        two_step_run(reporter, "text", stage, {"event": "failure", "state": "exceeded"})
    _worker_crashed(controller, point, marker)
    request = _settled_request(controller, "kill-text", "text_rewrite", frozenset({"reinjected"}))
    history = [step["state"] for step in request["history"]]
    assert history.count("rewriting") == 2, history
    assert redis_client.xlen(KEYS.branches("kill-text")) == 1, "one branch order"
    _no_slot_held(controller, "kill-text")
    _saved_and_audited(controller, redis_url, "kill-text")


def _worker_of(redis_url: str, pool: int) -> int:
    client = redis.Redis.from_url(redis_url)
    try:
        (worker,) = [w.pid for w in Worker.all(connection=client) if w.pid in child_pids(pool)]
    finally:
        client.close()
    return worker


@pytest.mark.timeout(300)
@pytest.mark.parametrize("state", ["diagnosing", "repairing"])
def test_a_worker_killed_while_its_job_runs_loses_nothing(
    state: str,
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_client: redis.Redis,
    redis_url: str,
) -> None:
    """The one worker process is SIGKILLed while the request's job runs (the LLM or the
    agent holds its answer): the pool replaces it, the lease lapses, the job is tried
    again, and the request is reinjected with its second attempt."""
    gate = threading.Event()
    if state == "diagnosing":
        llm.script(held(gate, json_reply(DIAGNOSIS)))
    else:
        scripted_agent.coaching_gate = gate
    llm.default = json_reply(DIAGNOSIS)
    settings = _settings(llm)
    settings["workers"] = {**settings["workers"], "processes": 1}
    controller = controller_factory(settings=settings)
    controller.start()
    pool = controller.start_workers()
    run_id = f"worker-{state}"
    report_known(redis_url, run_id, scripted_agent.url, with_own_coaching=False)
    wait_for(request_in_state(controller, run_id, "failure", state), timeout_s=60, what=state)
    os.kill(_worker_of(redis_url, pool.pid), signal.SIGKILL)
    gate.set()  # the killed job's connection is gone; the retried job is answered at once
    request = _settled_request(controller, run_id, "failure", REINJECTED_IN_KNOWN_RUN)
    assert request["attempt"] == 2, request["history"]
    reasons = [step.get("reason") or "" for step in request["history"]]
    assert any("lease lapsed" in reason for reason in reasons), request["history"]
    assert redis_client.xlen(KEYS.branches(run_id)) == 1, "one branch order"
    _no_slot_held(controller, run_id)
    _saved_and_audited(controller, redis_url, run_id)
