"""The whole loop on the reference world, without a model: the generator's failures are
diagnosed by the privileged teacher in a real worker, repaired by the agent, reinjected,
executed by the generator from the saved situation, and proven by stage success."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from gencoach.sim.generator import run_generation
from gencoach.sim.options import GenerationOptions
from tests.sim.trajectories import sequence
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import complete_save
from tests.support.controller import ControllerProcess
from tests.support.generation_log import Tree, read_log
from tests.support.players import buttons_player
from tests.support.saves import assert_audit_clean
from tests.support.teacher import follow_the_diagnosis, teacher_controller

pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(150)]

RUN = "sim-loop"


@pytest.fixture
def coaching_controller(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """A controller with the teacher as its one backend, and its workers; killed after the test."""
    with teacher_controller(tmp_path, redis_url) as process:
        yield process


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
        branch_grace_s=120.0,  # a bound: the run ends on gencoach's settled answer
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
    assert report.settle_timeouts == 0
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
    # The campaign's save holds the coaching invariants.
    assert assert_audit_clean(complete_save(coaching_controller, RUN).folder).proven_attempts == 3
