"""Pending slots survive a queue: requests wait for workers, however long, without losing
their slot, show `queued` while they wait, and a queue nobody consumes is reported."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from gencoach.reporting.client import Reporter
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import SETTLED, coaching_settings
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED
from tests.support.llm_server import ScriptedLLMServer, delayed, json_reply

pytestmark = pytest.mark.slow

PRESS = {
    "say": "",
    "tool_calls": [
        {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"}
    ],
}
DIAGNOSIS = {"decision_index": 2, "reason": "r", "expected_decision": PRESS}


def _failed_stage(reporter: Reporter, stage_id: int) -> None:
    """A stage of two decisions whose second one fails it: a diagnosis needs the LLM."""
    emit, prefix = reporter.emit, f"st{stage_id}"
    stage = {"id": stage_id, "goal": "press sw0"}
    user = {"type": "user", "content": f"{prefix}: press sw0"}
    emit("situation.created", situation_id=f"{prefix}-s0", parent_candidate_id=None,
         stage=stage, input={"id": stage_id * 10, "instruction": user})  # fmt: skip
    emit("candidate.created", candidate_id=f"{prefix}-c0", situation_id=f"{prefix}-s0",
         response_status="completed", output=PRESS)  # fmt: skip
    emit("candidate.executed", candidate_id=f"{prefix}-c0", status="ongoing")
    feedback = {"id": stage_id * 10 + 1, "instruction": {"type": "env", "content": "{}"}}
    emit("situation.created", situation_id=f"{prefix}-s1", parent_candidate_id=f"{prefix}-c0",
         stage=stage, input=feedback)  # fmt: skip
    emit("candidate.created", candidate_id=f"{prefix}-c1", situation_id=f"{prefix}-s1",
         response_status="completed", output=PRESS)  # fmt: skip
    emit("candidate.executed", candidate_id=f"{prefix}-c1", status="error",
         stage_end={"event": "failure", "state": "exceeded"})  # fmt: skip


def _report(redis_url: str, run_id: str, agent_url: str, stages: int) -> None:
    with Reporter(run_id, redis_url=redis_url) as reporter:
        reporter.emit("run.started", **{**RUN_STARTED, "agent_url": agent_url})
        for stage_id in range(stages):
            _failed_stage(reporter, stage_id)


def _settings(llm: ScriptedLLMServer, lease_s: float) -> dict[str, Any]:
    settings = coaching_settings(llm, format=False, suboptimal=False)
    settings["coaching"].update(lease_s=lease_s, max_pending_per_stage=1)
    return settings


def _by_id(controller: ControllerProcess, run_id: str) -> dict[str, Any]:
    response = httpx.get(f"{controller.url}/v1/runs/{run_id}/requests")
    if response.status_code != 200:
        return {}
    return {r["request_id"]: r for r in response.json()["requests"]}


def _abandoned(requests: dict[str, Any]) -> list[Any]:
    return [r for r in requests.values() if r["state"] in ("abandoned", "error")]


@pytest.mark.timeout(120)
def test_requests_wait_for_a_late_worker_holding_their_slots(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """With no worker for three leases, the requests show `queued`, `/stages` counts them
    pending, one warning names the queue nobody consumes; a worker started then serves all."""
    lease_s = 2.0
    llm.script(*[json_reply(DIAGNOSIS) for _ in range(3)])
    controller = controller_factory(settings=_settings(llm, lease_s))
    controller.start()
    _report(redis_url, "late", scripted_agent.url, stages=3)
    started = time.monotonic()

    def all_queued() -> dict[str, Any] | None:
        found = _by_id(controller, "late")
        done = len(found) == 3 and all(r["state"] == "queued" for r in found.values())
        return found if done else None

    wait_for(all_queued, timeout_s=30, what="three requests to show queued")
    warnings = wait_for(
        lambda: [e for e in controller.log_events() if e.get("event") == "queue.backlog"],
        timeout_s=30,
        what="the controller's warning about the unconsumed diagnosis queue",
    )
    remaining = 3 * lease_s - (time.monotonic() - started)
    if remaining > 0:
        time.sleep(remaining)  # the scenario itself: no worker for three leases
    found = _by_id(controller, "late")
    assert {(r["state"], r["job"]) for r in found.values()} == {("queued", "diagnosis")}
    stages = httpx.get(f"{controller.url}/v1/runs/late/stages").json()["stages"]
    assert [(s["stage_id"], s["pending"]) for s in stages] == [(0, 1), (1, 1), (2, 1)]
    assert len(warnings) == 1
    assert warnings[0]["message"].startswith(
        "no worker is consuming gencoach-diagnosis: 3 jobs waiting for "
    )

    controller.start_workers()
    served = wait_for(
        lambda: (
            (f := _by_id(controller, "late"))
            and all(r["state"] in SETTLED for r in f.values())
            and f
        ),
        timeout_s=60,
        what="the three requests served by the late worker",
    )
    for request in served.values():
        assert request["state"] == "reinjected", request["reason"]
        states = [step["state"] for step in request["history"]]
        assert states[:3] == ["opportunity", "admitted", "queued"]
        assert request["attempt"] == 1, "no slot was lost while waiting"
    backlog = [e for e in controller.log_events() if e.get("event") == "queue.backlog"]
    assert len(backlog) == 1, "the backlog is reported once per queue, not once per pass"


REQUESTS = 6


@pytest.mark.timeout(170)
def test_requests_queued_behind_a_slow_llm_keep_their_slots(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """One diagnosis worker and six requests behind an LLM answering in three leases (the
    last waits fifteen leases for its turn): every request is diagnosed, repaired and
    reinjected, none abandoned for its lease."""
    lease_s = 1.0
    llm.script(*[delayed(3 * lease_s, json_reply(DIAGNOSIS)) for _ in range(REQUESTS)])
    settings = _settings(llm, lease_s)
    # one process running one job at a time: the other diagnoses wait in the RQ queue
    settings["workers"].update(processes=1, concurrency=1)
    controller = controller_factory(settings=settings)
    controller.start()
    controller.start_workers()
    _report(redis_url, "slow", scripted_agent.url, stages=REQUESTS)

    def all_settled() -> dict[str, Any] | None:
        found = _by_id(controller, "slow")
        done = len(found) == REQUESTS and all(r["state"] in SETTLED for r in found.values())
        return found if done else None

    found = wait_for(all_settled, timeout_s=150, what="the requests behind the slow LLM")
    assert _abandoned(found) == []
    assert {r["state"] for r in found.values()} == {"reinjected"}
    assert all(r["attempt"] == 1 for r in found.values()), "no request lost its slot"
    assert llm.max_in_flight == 1
