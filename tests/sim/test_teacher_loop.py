"""The whole loop on the reference world, without a model: the generator's failures are
diagnosed by the privileged teacher in a real worker, repaired by the agent, reinjected,
executed by the generator from the saved situation, and proven by stage success."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from gencoach.protocol import REPLACEMENT_POINT
from gencoach.protocol.decision_text import parse_decision
from gencoach.sim.generator import run_generation
from gencoach.sim.options import GenerationOptions
from tests.sim.events import Tree, read_log
from tests.sim.players import buttons_player
from tests.sim.trajectories import sequence
from tests.support.agent_server import ScriptedAgent
from tests.support.controller import ControllerProcess

pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(150)]

RUN = "sim-loop"
TEACHER_SETTINGS: dict[str, Any] = {
    "coaching": {
        "enabled": True,
        "lease_s": 5,
        "routes": {"format": False, "suboptimal": False, "text_rewrite": False},
    },
    "backends": {"teacher": {"type": "python", "endpoint": "gencoach.sim.teacher:diagnose"}},
    "workers": {"processes": 2, "job_timeout_s": 60},
}


def follow_the_diagnosis(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The agent's repair: replace the faulty decision by the expected one, when it parses."""
    diagnosis = request.get("diagnosis") or {}
    decision = parse_decision(diagnosis.get("expected_decision") or "")
    answer: dict[str, Any] = {"request_id": request["request_id"], "logs": [], "proposals": []}
    if decision is None:
        return 200, {**answer, "status": "abandoned", "reason": "no decision to follow"}
    payload = {"kind": "replace_decision", "decision": decision.model_dump(mode="json")}
    proposal = {"reinjection_point_id": REPLACEMENT_POINT, "extra_keys": payload}
    return 200, {**answer, "status": "corrected", "proposals": [proposal], "reason": None}


@pytest.fixture
def coaching_controller(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """A controller with the teacher as its one backend, and its workers; killed after the test."""
    process = ControllerProcess(tmp_path, redis_url, settings=TEACHER_SETTINGS)
    process.start()
    process.start_workers()
    yield process
    process.stop()


async def test_the_teacher_coaches_failures_into_proven_branches(
    coaching_controller: ControllerProcess,
    scripted_agent: ScriptedAgent,
    redis_url: str,
    tmp_path: Path,
) -> None:
    """Each multi-step failure gets the right press as its expected decision; the generator
    executes every branch order, and the coached branches reach stage success."""
    scripted_agent.answer = buttons_player("wrong_button")
    scripted_agent.coaching_replies.extend([follow_the_diagnosis] * 20)
    log = tmp_path / "run.jsonl"
    options = GenerationOptions(
        agent_url=scripted_agent.url,
        redis_url=redis_url,
        run_id=RUN,
        log_path=log,
        branch_grace_s=15.0,
        max_wall_s=100.0,
    )
    report = await run_generation(options)

    expected = {
        diagnosis["expected_decision"]
        for request in scripted_agent.coaching_requests
        if (diagnosis := request.get("diagnosis")) and diagnosis.get("expected_decision")
    }
    first, _, last = sequence()
    assert {f'panda.press_button(id="{first}")', f'panda.press_button(id="{last}")'} <= expected
    assert report.orders_executed == 3
    assert report.orders_skipped == 0
    tree = Tree.of(read_log(log))
    coached = [c for c in tree.executed if c.startswith("coach:")]
    assert len(coached) == 3
    for candidate_id in coached:
        assert tree.executed[candidate_id]["status"] in ("ongoing", "optimal")
        for situation_id in tree.children(candidate_id):
            assert tree.situations[situation_id]["coaching_attempt_ids"]
    async with httpx.AsyncClient(base_url=coaching_controller.url) as http:
        requests = (await http.get(f"/v1/runs/{RUN}/requests")).json()["requests"]
        stages = (await http.get(f"/v1/runs/{RUN}/stages")).json()["stages"]
    # The root's wrong press is its trajectory's only decision: diagnosed by rule, whose
    # fix is prose the agent cannot follow; the three others come from the teacher.
    assert sorted(r["state"] for r in requests) == ["abandoned", "proven", "proven", "proven"]
    (stage,) = stages
    assert (stage["completed"], stage["proven"], stage["unproven"]) == (3, 3, 0)
