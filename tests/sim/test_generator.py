"""The generator played standalone against a real scripted agent: the tree its log records."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gencoach.sim.generator import run_generation
from gencoach.sim.options import GenerationOptions, GenerationReport
from tests.support.agent_server import ScriptedAgent
from tests.support.generation_log import Tree, read_log
from tests.support.players import buttons_player, text_player, two_stage_player
from tests.support.processes import free_port

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]


async def generate(agent_url: str, tmp_path: Path, **options: Any) -> tuple[GenerationReport, Tree]:
    """Run a standalone generation and read its log back."""
    log = tmp_path / "events.jsonl"
    settings = GenerationOptions(agent_url=agent_url, log_path=log, run_id="t", **options)
    report = await run_generation(settings)
    return report, Tree.of(read_log(log))


async def test_a_buttons_run_reports_every_node_in_order(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """Two candidates per situation: the right press continues, the wrong one ends in failure."""
    scripted_agent.answer = buttons_player("wrong_button")
    report, tree = await generate(scripted_agent.url, tmp_path)
    assert [event["seq"] for event in tree.events] == list(range(len(tree.events)))
    assert tree.events[0]["type"] == "run.started"
    assert tree.events[-1] == {
        "type": "run.finished",
        "run_id": "t",
        "seq": len(tree.events) - 1,
        "reason": "every branch ended",
    }
    assert list(tree.situations) == ["e0-s0", "e0-s1", "e0-s2"]
    assert [tree.statuses(s) for s in tree.situations] == [
        ["ongoing", "finished"],
        ["ongoing", "finished"],
        ["optimal", "finished"],
    ]
    assert tree.children("e0-c0") == ["e0-s1"]
    assert tree.children("e0-c1") == []
    assert sorted(tree.stage_ends()) == [("failure", "optimal")] * 3 + [("success", "optimal")]
    assert report.situations == 3
    assert report.candidates == 6
    assert report.stage_ends == {"failure": 3, "success": 1}
    assert [len(request["inputs"]) for request in scripted_agent.response_requests] == [1, 1, 1]
    assert {r["inputs"][0]["num_outputs"] for r in scripted_agent.response_requests} == {2}


async def test_feedback_memory_and_input_ids_follow_the_candidate(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """The next situation reads the env feedback and carries its parent candidate's memory."""
    scripted_agent.answer = buttons_player("wrong_button")
    _, tree = await generate(scripted_agent.url, tmp_path)
    first, second = tree.situations["e0-s0"], tree.situations["e0-s1"]
    assert first["input"]["instruction"]["type"] == "user"
    assert first["input"]["memory"] == {}
    assert second["input"]["memory"] == tree.candidates["e0-c0"]["memory"]
    feedback = json.loads(second["input"]["instruction"]["content"])
    assert second["input"]["instruction"]["type"] == "env"
    assert set(feedback) == {"infos", "previous_tool_call", "failure_reason"}
    assert feedback["previous_tool_call"] == tree.candidates["e0-c0"]["output"]["tool_calls"]
    assert feedback["failure_reason"] is None
    ids = [event["input"]["id"] for event in tree.situations.values()]
    assert len(set(ids)) == len(ids)
    assert first["stage"]["max_tool_calls"] == 6
    assert first["input"]["attributes"]["known_robots"] == ["panda", "ur5"]


@pytest.mark.parametrize(
    ("mistake", "reason"),
    [
        ("say_and_act", "either says something or calls tools, not both"),
        ("unknown_tool", "tool call 1 (fly): no such tool"),
        ("missing_argument", "missing argument 'id'"),
        ("extra_argument", "unexpected argument 'force'"),
    ],
)
async def test_invalid_answers_become_invalid_leaves(
    scripted_agent: ScriptedAgent, tmp_path: Path, mistake: str, reason: str
) -> None:
    """An answer breaking the tool contract is reported invalid with its reason, never executed."""
    scripted_agent.answer = buttons_player(mistake)
    report, tree = await generate(scripted_agent.url, tmp_path)
    invalid = [c for c, event in tree.candidates.items() if event["invalid_reason"]]
    assert len(invalid) == 3
    for candidate_id in invalid:
        assert reason in tree.candidates[candidate_id]["invalid_reason"]
        assert tree.executed[candidate_id]["status"] == "invalid"
        assert tree.executed[candidate_id]["stage_end"] is None
        assert tree.children(candidate_id) == []
    assert report.invalid == 3
    assert report.stage_ends == {"success": 1}


async def test_a_call_the_world_refuses_is_executed_as_a_bad_call(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """An unknown robot is no contract breach: the world executes it as a failed bad_call."""
    scripted_agent.answer = buttons_player("unknown_robot", at=0)
    _, tree = await generate(scripted_agent.url, tmp_path, branches=1, max_decisions=2)
    executed = tree.executed["e0-c0"]
    assert executed["status"] == "ongoing"
    (status,) = executed["execution"]["per_robot_status"]
    assert (status["robot_name"], status["error_flag"]) == ("r2d2", "bad_call")
    assert "unknown robot 'r2d2'" in status["mess"]
    feedback = json.loads(tree.situations["e0-s1"]["input"]["instruction"]["content"])
    assert feedback["failure_reason"].startswith("r2d2: unknown robot 'r2d2'")


async def test_continuing_candidates_per_situation_widen_the_tree(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """With two continuing candidates per situation, each level doubles: 1 + 2 + 4 situations."""
    scripted_agent.answer = buttons_player(None)
    report, tree = await generate(scripted_agent.url, tmp_path, continue_per_situation=2)
    assert report.situations == 7
    assert report.candidates == 14
    assert report.stage_ends == {"success": 8}
    assert all(
        len(tree.children(c)) == 1 for s in list(tree.situations)[:3] for c in tree.members(s)
    )


async def test_a_stage_success_opens_the_next_stage_with_its_instruction(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """After stage 0 succeeds, the next situation is a user instruction of the linked stage 1."""
    scripted_agent.answer = two_stage_player()
    report, tree = await generate(scripted_agent.url, tmp_path, scenario="two_stage", branches=1)
    first, second = tree.situations.values()
    assert (first["stage"]["id"], second["stage"]["id"]) == (0, 1)
    assert second["stage"]["linked_to_prev"] is True
    assert second["input"]["instruction"]["type"] == "user"
    assert second["input"]["instruction"]["content"].startswith("Now put it in the ")
    assert report.stage_ends == {"success": 2}


async def test_a_text_stage_is_judged_on_what_the_agent_says(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """The right colour succeeds, a wrong one fails; a text stage reports no tool budget."""
    scripted_agent.answer = text_player(wrong_at=1)
    _, tree = await generate(scripted_agent.url, tmp_path, scenario="text_question")
    assert tree.statuses("e0-s0") == ["optimal", "finished"]
    assert tree.situations["e0-s0"]["stage"]["text_only"] is True
    assert tree.situations["e0-s0"]["stage"]["max_tool_calls"] is None


async def test_environments_run_in_parallel_with_their_own_seeds(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """Three environments give three roots, seeded seed, seed+1 and seed+2."""
    scripted_agent.answer = buttons_player(None)
    report, tree = await generate(scripted_agent.url, tmp_path, envs=3, seed=7, branches=1)
    roots = [s for s, event in tree.situations.items() if event["parent_candidate_id"] is None]
    assert sorted(root.split("-")[0] for root in roots) == ["e0", "e1", "e2"]
    assert report.stage_ends == {"success": 3}
    assert tree.events[0]["env_options"]["seed"] == 7


async def test_the_decision_budget_stops_new_situations(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """Once max_decisions candidates exist no situation is asked, and run.finished says why."""
    scripted_agent.answer = buttons_player(None)
    report, tree = await generate(scripted_agent.url, tmp_path, max_decisions=3)
    assert report.situations == 2
    assert report.candidates == 4
    assert tree.events[-1]["reason"] == "decision budget of 3 reached"


async def test_the_wall_clock_budget_stops_new_situations(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """An agent that answers only once the wall-clock budget is spent ends the run after
    that situation (of the three it would play), saying why."""
    budget_s = 1.0
    asked: list[float] = []

    def after_the_budget(item: dict[str, Any], index: int) -> dict[str, Any]:
        # The budget's clock (anyio's, time.monotonic) started before the first request:
        # holding the answer until a budget after that request makes it late however slow
        # the machine is; a new situation would be a second request.
        asked.append(time.monotonic())
        time.sleep(max(0.0, asked[0] + budget_s - time.monotonic()))
        return buttons_player(None)(item, index)

    scripted_agent.answer = after_the_budget
    report, tree = await generate(scripted_agent.url, tmp_path, branches=1, max_wall_s=budget_s)
    assert len(scripted_agent.response_requests) == 1
    assert report.situations == 1
    assert tree.events[-1]["reason"] == "wall-clock budget of 1.0 s reached"


async def test_agent_errors_become_error_leaves(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """An output with status error is reported as the agent gave it, executed as `error`."""
    error = {"code": "overloaded", "message": "try later", "component": None}
    scripted_agent.answer = lambda item, index: {"status": "error", "output": None, "error": error}
    report, tree = await generate(scripted_agent.url, tmp_path)
    assert [tree.candidates[c]["error"] for c in tree.members("e0-s0")] == [error, error]
    assert tree.statuses("e0-s0") == ["error", "error"]
    assert report.errors == 2


async def test_an_unreachable_or_slow_agent_gives_one_error_candidate(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """No answer within timeout_s, or no agent at all, is one error candidate with the reason."""

    def late(item: dict[str, Any], index: int) -> dict[str, Any]:
        time.sleep(0.5)
        return {}

    scripted_agent.answer = late
    _, slow = await generate(scripted_agent.url, tmp_path, timeout_s=0.2)
    (candidate,) = slow.candidates.values()
    assert candidate["error"]["code"] == "agent_call_failed"
    assert candidate["error"]["message"] == "no answer within 0.2 s"
    _, gone = await generate(f"http://127.0.0.1:{free_port()}", tmp_path)
    (candidate,) = gone.candidates.values()
    assert "/v1/responses failed" in candidate["error"]["message"]
    assert gone.executed[candidate["candidate_id"]]["status"] == "error"


async def test_a_stage_end_names_the_first_seeded_mistake_of_its_stage(
    scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """A failed stage end names, as `faulty_candidate_id`, the first candidate of its
    branch's stage whose internal step reports a seeded mistake: the failing press itself
    at the root, the root's first (marked) press further down; an optimal success none."""
    wrong = buttons_player("wrong_button")

    def marked(item: dict[str, Any], index: int) -> dict[str, Any]:
        answer = wrong(item, index)
        root = item["instruction"]["type"] == "user"
        mistake = "wrong_argument" if index == 1 else "detour" if root else None
        step = {"id": f"s{index}", "component": "scripted", "full_prompt": "",
                "input_elements": {"mistake": mistake}, "output_raw": ""}  # fmt: skip
        return {**answer, "internal_steps": [step]}

    scripted_agent.answer = marked
    _, tree = await generate(scripted_agent.url, tmp_path)
    ends = {
        candidate: event["stage_end"]
        for candidate, event in tree.executed.items()
        if event["stage_end"] is not None
    }
    named = {
        c: end.get("faulty_candidate_id") for c, end in ends.items() if end["event"] == "failure"
    }
    assert named == {"e0-c1": "e0-c1", "e0-c3": "e0-c0", "e0-c5": "e0-c0"}
    optimal = [end for end in ends.values() if end["event"] == "success"]
    assert [end.get("faulty_candidate_id") for end in optimal] == [None], "a harmless mistake"
