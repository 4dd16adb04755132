"""Validated examples: kept only on proof, at most five per key, offered to the next diagnosis."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gencoach.protocol.jobs import ExampleCase
from gencoach.reporting.client import Reporter
from gencoach.service.branching.examples import ExampleKey, ExampleStore
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import (
    branch_orders,
    coaching_settings,
    report_known,
    request_in_state,
    request_reached,
    requests_of,
)
from tests.support.controller import ControllerProcess, wait_for
from tests.support.llm_server import ScriptedLLMServer, json_reply

KEY = ExampleKey(
    agent_id="a", scenario="buttons", kind="failure", stage_id=0, terminal_event="failure"
)


def _case(number: int) -> ExampleCase:
    return ExampleCase(
        stage_goal="goal",
        trajectory=f"DECISION 1: {number}",
        decision_index=1,
        reason="r",
        expected_decision="x",
    )


def test_at_most_five_cases_per_key(tmp_path: Path) -> None:
    """A key keeps its first five distinct cases and refuses more, across store instances."""
    results = [ExampleStore(tmp_path).register(KEY, _case(number)) for number in range(7)]
    assert results == [True] * 5 + [False, False]
    assert not ExampleStore(tmp_path).register(KEY, _case(0))  # a repeat is not kept twice
    assert [case.trajectory for case in ExampleStore(tmp_path).load(KEY).cases] == [
        f"DECISION 1: {number}" for number in range(5)
    ]


def test_a_cache_holding_either_form_of_expected_decision_loads(tmp_path: Path) -> None:
    """Cases written with MAGMA's text or with a decision object load; an object reads as
    its line of text."""
    call = {"name": "press_button", "arguments": {"id": "sw1"}, "target_robot_name": "panda"}
    cases = [
        {**_case(1).model_dump(), "expected_decision": "press sw1 with panda"},
        {**_case(2).model_dump(), "expected_decision": {"say": "", "tool_calls": [call]}},
    ]
    (tmp_path / KEY.file_name()).write_text(json.dumps({"key": KEY.model_dump(), "cases": cases}))
    loaded = ExampleStore(tmp_path).load(KEY).cases
    assert [case.expected_decision for case in loaded] == [
        "press sw1 with panda",
        'panda.press_button(id="sw1")',
    ]


def test_first_optimal_trajectory_is_kept(tmp_path: Path) -> None:
    """The first optimal trajectory of a key stays; later ones do not replace it."""
    store = ExampleStore(tmp_path)
    assert store.keep_optimal(KEY, "first")
    assert not store.keep_optimal(KEY, "second")
    assert ExampleStore(tmp_path).load(KEY).optimal_trajectory == "first"


@pytest.mark.slow
def test_registered_on_proof_and_offered_to_the_next_diagnosis(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
    tmp_path: Path,
) -> None:
    """A diagnosis is stored only once its branch is proven, and the next run's diagnosis
    prompt for the same key shows it."""
    cache = tmp_path / "cases"
    settings = coaching_settings(llm, format=False, suboptimal=False)
    settings["coaching"]["examples"] = {
        "register_successful": True,
        "use_for_automatic": True,
        "cache_dir": str(cache),
    }
    answer = {
        "decision_index": 2,
        "reason": "sw9 is not part of the task",
        "expected_decision": {
            "say": "",
            "tool_calls": [
                {"name": "press_button", "arguments": {"id": "sw4"}, "target_robot_name": "panda"}
            ],
        },
    }
    llm.script(json_reply(answer), json_reply(answer))
    controller = controller_factory(settings=settings)
    controller.start()
    controller.start_workers()
    report_known(redis_url, "first", scripted_agent.url)
    wait_for(
        request_reached(controller, "first", "failure", "reinjected"),
        timeout_s=60,
        what="reinjection",
    )
    # Nothing is kept before the proof. The known run's own coached branch (attempt 1) may
    # prove the request as soon as it is reinjected: a case found here must come after that.
    kept = list(cache.glob("buttons-failure-*.json"))
    states = [step["state"] for step in requests_of(controller, "first")["failure"]["history"]]
    assert not kept or "proven" in states, "a case was kept before the proof"
    with Reporter("first", redis_url=redis_url, start_seq=500) as generator:
        (order,) = branch_orders(generator, 1)
        generator.emit(
            "candidate.executed",
            candidate_id=order.candidate_id,
            status="optimal",
            stage_end={"event": "success", "state": "optimal"},
        )
    wait_for(request_in_state(controller, "first", "failure", "proven"), what="the proof")
    (stored,) = wait_for(lambda: list(cache.glob("buttons-failure-*.json")), what="the stored case")
    case = json.loads(stored.read_text())["cases"][0]
    assert case["reason"] == "sw9 is not part of the task"

    report_known(redis_url, "second", scripted_agent.url)
    wait_for(lambda: len(llm.requests) == 2, timeout_s=60, what="the second diagnosis")
    prompt = json.dumps(llm.requests[1].body["messages"])
    assert "VALIDATED SIMILAR CASES" in prompt
    assert "sw9 is not part of the task" in prompt
    assert "VALIDATED SIMILAR CASES" not in json.dumps(llm.requests[0].body["messages"])
