"""Closing the loop: a failure diagnosed, repaired, reinjected, executed by the generator
and proven, then saved; the limits, the exploration budget and human interventions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from gencoach.reporting.client import Reporter
from tests.support.agent_server import ScriptedAgent, correction
from tests.support.coaching import (
    branch_orders,
    coaching_settings,
    complete_save,
    report_known,
    request_in_state,
    request_reached,
    succeed_after,
)
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import FAILURE, RUN_STARTED
from tests.support.llm_server import ScriptedLLMServer, json_reply
from tests.support.saves import assert_audit_clean

pytestmark = pytest.mark.slow

SUCCESS = {"event": "success", "state": "optimal"}


def test_failure_is_coached_executed_proven_and_saved(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """The failed stage's coached branch is recorded as an alternative, executed by the
    generator with the attempt id on every node, proven by stage success, and saved with
    its markers and coaching logs."""
    llm.script(
        json_reply({"decision_index": 2, "reason": "sw9 is wrong", "expected_decision": None})
    )
    controller = controller_factory(settings=coaching_settings(llm, format=False, suboptimal=False))
    controller.start()
    controller.start_workers()
    report_known(redis_url, "loop", scripted_agent.url)
    wait_for(
        request_reached(controller, "loop", "failure", "reinjected"),
        timeout_s=60,
        what="reinjection",
    )

    with Reporter("loop", redis_url=redis_url, start_seq=500) as generator:
        (order,) = branch_orders(generator, 1)
        assert (order.anchor.kind, order.anchor.situation_id) == ("replacement", "S_b")
        assert order.candidate.output is not None
        assert order.candidate.output.say == "corrected: press sw4"
        assert order.coaching.type_coaching == "failure:diagnosis"
        (proposal,) = correction(scripted_agent.coaching_requests[-1])["proposals"]
        reinjected = scripted_agent.response_requests[-1]["inputs"][0]
        assert reinjected["extra_keys"]["coaching"] == proposal["extra_keys"]
        assert order.input.extra_keys["coaching"] == proposal["extra_keys"]
        assert proposal["extra_keys"]["kind"] == "replace_decision"
        attempt = order.attempt_id
        succeed_after(generator, order)
        proven = wait_for(
            request_in_state(controller, "loop", "failure", "proven"), what="the proof"
        )
        stages = httpx.get(f"{controller.url}/v1/runs/loop/stages").json()["stages"]
        stage0 = next(stage for stage in stages if stage["stage_id"] == 0)
        assert (stage0["completed"], stage0["proven"], stage0["unproven"]) == (1, 1, 0)
        assert [step["state"] for step in proven["history"]][-3:] == [
            "reinjected",
            "executed",
            "proven",
        ]
        generator.emit("run.finished")

    folder = controller.output_dir / "loop"
    save = complete_save(controller, "loop")
    coached = next(c for c in save.candidates.values() if c.origin == "coaching")
    coached_situation = save.situations[save.candidate_situation[coached.id]]
    assert coached_situation.parent_id == 0  # c1, the parent of the anchor S_b
    assert {"situation_id": coached_situation.id, "kind": "alternative"} in [
        link.model_dump() for link in save.candidates[0].links
    ]
    assert coached.coaching.model_dump() == {
        "type_coaching": "failure:diagnosis",
        "coaching_role": "fixed_node",
        "diagnosed_as_faulty": False,
        "diagnostic_types": [],
        "trajectory_diagnostic_applied": True,
    }
    assert coached.coaching_source["source_node"] == "c4"
    assert coached.coaching_source["origin"] == "automatic"
    faulty = save.candidates[3]
    assert faulty.coaching.diagnosed_as_faulty is True
    assert faulty.coaching.diagnostic_types == ["failure:diagnosis"]
    assert faulty.coaching.trajectory_diagnostic_applied is True  # as MAGMA-GEN marks it
    branch = [coached, *(c for c in save.candidates.values() if c.parent_id == coached.id)]
    assert len(branch) == 2
    assert all(c.coaching_attempt_ids == [attempt] for c in branch)
    assert branch[1].score["stage_0"].optimal == 1
    logs = sorted(path.name for path in (folder / "_coaching_logs").iterdir())
    assert any(name.endswith("_diagnosis.md") for name in logs), logs
    assert any(name.endswith("_repair.md") for name in logs), logs


def _failing_run(redis_url: str, run_id: str, agent_url: str, failures: int) -> None:
    stage0 = {"id": 0, "goal": "press sw0"}
    stage1 = {"id": 1, "goal": "press sw1"}
    press = {
        "say": "",
        "tool_calls": [
            {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"}
        ],
    }
    user = {"type": "user", "content": "press sw"}
    with Reporter(run_id, redis_url=redis_url) as reporter:
        emit = reporter.emit
        emit("run.started", **{**RUN_STARTED, "agent_url": agent_url})
        emit("situation.created", situation_id="root", parent_candidate_id=None, stage=stage0,
             input={"id": 0, "instruction": user})  # fmt: skip
        emit("candidate.created", candidate_id="ok", situation_id="root",
             response_status="completed", output=press)  # fmt: skip
        emit("candidate.executed", candidate_id="ok", status="optimal", stage_end=SUCCESS)
        emit("situation.created", situation_id="S", parent_candidate_id="ok", stage=stage1,
             input={"id": 1, "instruction": user})  # fmt: skip
        for index in range(failures):
            emit("candidate.created", candidate_id=f"bad{index}", situation_id="S",
                 response_status="completed", output=press)  # fmt: skip
            emit(
                "candidate.executed", candidate_id=f"bad{index}", status="error", stage_end=FAILURE
            )


def test_unproven_attempts_block_automatic_requests_but_not_people(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """With five unproven attempts the sixth automatic request is refused; a branch that
    fails again leaves its request executed and its attempt unproven; a person's
    intervention still goes through, and one beyond the situation's exploration budget is
    refused with 409 until the budget is raised live."""
    settings = coaching_settings(llm)
    settings["coaching"]["max_alternatives_per_situation"] = 6
    controller = controller_factory(settings=settings)
    controller.start()
    controller.start_workers()
    _failing_run(redis_url, "tight", scripted_agent.url, failures=6)

    def settled() -> Any:
        answer = httpx.get(f"{controller.url}/v1/runs/tight/requests")
        if answer.status_code != 200:
            return None  # the run is not applied yet (404) on a loaded machine
        found = answer.json()["requests"]
        states = sorted(r["state"] for r in found)
        return found if states == ["reinjected"] * 5 + ["skipped"] else None

    found = wait_for(settled, timeout_s=60, what="five reinjected and one skipped")
    skipped = next(r for r in found if r["state"] == "skipped")
    assert skipped["reason"] in (
        "refused by the stage limits: pending 5 of 5",
        "refused by the stage limits: unproven 5 of 5",
    )
    with Reporter("tight", redis_url=redis_url, start_seq=500) as generator:
        order = branch_orders(generator, 5)[0]
        generator.emit(
            "candidate.executed", candidate_id=order.candidate_id, status="error", stage_end=FAILURE
        )
    # The failed trajectory leaves its request executed, saying why: the run goes on, so
    # another trajectory of the branch could still prove it (unproven is for the run's end).
    failed = wait_for(
        lambda: next(
            (
                r
                for r in httpx.get(f"{controller.url}/v1/runs/tight/requests").json()["requests"]
                if r["state"] == "executed"
                and "a trajectory ended in failure" in (r["reason"] or "")
            ),
            None,
        ),
        what="an executed request whose trajectory failed",
    )
    assert failed["reason"].startswith("attempt ")
    stage1 = next(
        s
        for s in httpx.get(f"{controller.url}/v1/runs/tight/stages").json()["stages"]
        if s["stage_id"] == 1
    )
    assert (stage1["completed"], stage1["proven"], stage1["unproven"]) == (5, 0, 5)

    body = {
        "candidate_id": skipped["candidate_id"],
        "diagnosis": {
            "explanation": "pressed too early",
            "expected_decision": 'panda.press_button(id="sw1")',
        },
        "decision": {
            "tool_calls": [
                {"name": "press_button", "arguments": {"id": "sw1"}, "target_robot_name": "panda"}
            ]
        },
    }
    accepted = httpx.post(f"{controller.url}/v1/runs/tight/interventions", json=body)
    assert accepted.status_code == 202, accepted.text
    human_id = accepted.json()["request_id"]
    wait_for(
        lambda: next(
            (
                r
                for r in httpx.get(f"{controller.url}/v1/runs/tight/requests").json()["requests"]
                if r["request_id"] == human_id and r["state"] == "reinjected"
            ),
            None,
        ),
        what="the human branch",
    )
    refused = httpx.post(f"{controller.url}/v1/runs/tight/interventions", json=body)
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith("the exploration budget of candidate")
    assert "6 of 6 alternatives" in refused.json()["detail"]
    raised = httpx.put(f"{controller.url}/v1/budgets", json={"max_alternatives_per_situation": 7})
    assert raised.status_code == 200, raised.text
    again = httpx.post(f"{controller.url}/v1/runs/tight/interventions", json=body)
    assert again.status_code == 202, again.text
    bad = httpx.post(
        f"{controller.url}/v1/runs/tight/interventions",
        json={**body, "decision": {"say": "x", "tool_calls": body["decision"]["tool_calls"]}},
    )
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "decision"


def test_concurrent_interventions_hold_the_exploration_budget(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    redis_url: str,
) -> None:
    """Four interventions posted at once on a root decision, then four on a later one,
    with a budget of 2: two of each are accepted and two refused with 409, and each place
    holds exactly 2 coached alternatives in the save."""
    settings = {"coaching": {"enabled": False, "max_alternatives_per_situation": 2}}
    controller = controller_factory(settings=settings)
    controller.start()
    report_known(redis_url, "crowd", scripted_agent.url)
    url = f"{controller.url}/v1/runs/crowd/interventions"
    press = {"name": "press_button", "arguments": {"id": "sw1"}, "target_robot_name": "panda"}
    for candidate in ("c1", "c5"):  # c1 answers the root S_a, c5 S_c below c3
        body = {
            "candidate_id": candidate,
            "diagnosis": {"explanation": "wrong button", "expected_decision": None},
            "decision": {"tool_calls": [press]},
        }
        with ThreadPoolExecutor(4) as pool:
            posts = [pool.submit(httpx.post, url, json=body, timeout=60) for _ in range(4)]
            answers = [post.result() for post in posts]
        assert sorted(a.status_code for a in answers) == [202, 202, 409, 409], [
            a.text for a in answers
        ]
        refused = next(a for a in answers if a.status_code == 409)
        assert "2 of 2 alternatives" in refused.json()["detail"]

    def reinjected() -> Any:
        found = httpx.get(f"{controller.url}/v1/runs/crowd/requests").json()["requests"]
        done = [r for r in found if r["human"] and r["state"] == "reinjected"]
        return found if len(done) == 4 else None

    wait_for(reinjected, timeout_s=60, what="four reinjected interventions")
    with Reporter("crowd", redis_url=redis_url, start_seq=500) as generator:
        generator.emit("run.finished")
    save = complete_save(controller, "crowd")
    starts: Counter[int | None] = Counter(
        situation.parent_id
        for situation in save.situations.values()
        if any(c.origin == "coaching" for c in situation.candidates)
    )
    # Two new roots, two alternatives below c3 (id 2); S_e, the known run's own coached
    # alternative below c1 (id 0), is the generator's and takes no place of the budget.
    assert starts == {None: 2, 2: 2, 0: 1}


def test_a_correction_nested_in_a_coached_branch_proves_the_one_around_it(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """The agent fails again inside a coached branch; that second failure is coached in
    turn, and the nested correction's success proves both attempts, although the
    generator copies no attempt id onto the nodes it reports below the first branch."""
    llm.default = json_reply({"decision_index": 2, "reason": "wrong", "expected_decision": None})
    controller = controller_factory(settings=coaching_settings(llm, format=False, suboptimal=False))
    controller.start()
    controller.start_workers()
    stage = {"id": 0, "goal": "press sw0 then sw4"}
    feedback = {"id": 1, "instruction": {"type": "env", "content": "{}"}}
    user = {"id": 0, "instruction": {"type": "user", "content": "press sw0, then sw4"}}
    with Reporter("nest", redis_url=redis_url) as reporter:
        emit = reporter.emit
        emit("run.started", **{**RUN_STARTED, "agent_url": scripted_agent.url})
        emit("situation.created", situation_id="S_a", parent_candidate_id=None, stage=stage,
             input=user)  # fmt: skip
        emit("candidate.created", candidate_id="c1", situation_id="S_a",
             response_status="completed", output={"say": "pressing sw0"})  # fmt: skip
        emit("candidate.executed", candidate_id="c1", status="ongoing")
        emit("situation.created", situation_id="S_b", parent_candidate_id="c1", stage=stage,
             input=feedback)  # fmt: skip
        emit("candidate.created", candidate_id="c2", situation_id="S_b",
             response_status="completed", output={"say": "pressing sw9"})  # fmt: skip
        emit("candidate.executed", candidate_id="c2", status="error", stage_end=FAILURE)

    def requests() -> list[dict[str, Any]]:
        found = httpx.get(f"{controller.url}/v1/runs/nest/requests").json()["requests"]
        return [r for r in found if r["route"] == "failure"]

    with Reporter("nest", redis_url=redis_url, start_seq=500) as generator:
        (outer,) = branch_orders(generator, 1, timeout_s=60)
        generator.emit("candidate.executed", candidate_id=outer.candidate_id, status="ongoing")
        generator.emit(
            "situation.created",
            situation_id="S_n",
            parent_candidate_id=outer.candidate_id,
            stage=stage,
            input={"id": 20, "instruction": {"type": "env", "content": "{}"}},
        )
        generator.emit(
            "candidate.created",
            candidate_id="n1",
            situation_id="S_n",
            response_status="completed",
            output={"say": "wrong again"},
        )
        generator.emit("candidate.executed", candidate_id="n1", status="error", stage_end=FAILURE)
        generator.flush()
        (inner,) = branch_orders(generator, 1, timeout_s=60)
        assert inner.anchor.situation_id == "S_n"
        assert inner.attempt_id != outer.attempt_id
        generator.emit(
            "candidate.executed", candidate_id=inner.candidate_id, status="optimal",
            stage_end=SUCCESS,
        )  # fmt: skip
        generator.flush()
        found = wait_for(
            lambda: (r := requests()) and all(x["state"] == "proven" for x in r) and r,
            timeout_s=30,
            what="both failure requests proven",
        )
        assert len(found) == 2
        generator.emit("run.finished")
    save = complete_save(controller, "nest")
    assert_audit_clean(save.folder)
