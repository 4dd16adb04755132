"""The reinjection points a repair request offers, the inputs they carry, and the
trajectories of the branches restarted there."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from gencoach.protocol import (
    AgentDecision,
    AgentInput,
    AgentInstruction,
    AnyEvent,
    StageEnd,
    parse_event,
)
from gencoach.service.dispatching.job_building import reinjection_points
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.trajectory import (
    RECOVERY_INPUT_BASE,
    built_after,
    recovery_situation,
    trajectory,
)
from tests.support.graphs import RUN_STARTED


def _step(flag: str) -> Any:
    decision = AgentDecision.parse(
        {"tool_calls": [{"name": "press_button", "arguments": {"id": "sw9"},
                         "target_robot_name": "panda"}]}
    )  # fmt: skip
    execution = {"per_robot_status": [{"robot_name": "panda", "mess": "unknown button",
                                       "result": False, "error_flag": flag}]}  # fmt: skip
    return SimpleNamespace(
        candidate=SimpleNamespace(id=2, output=decision),
        execution=SimpleNamespace(execution=execution),
    )


def test_a_recovery_point_carries_no_correction_inherited_from_its_parent() -> None:
    """After a single bad call, `recovery` is offered at the feedback situation's input,
    without the `coaching` key a coached parent left there (MAGMA-GEN strips it)."""
    feedback = AgentInput.parse(
        {"id": 5, "instruction": {"type": "env", "content": "panda: press_button failed"},
         "extra_keys": {"episode": 1, "coaching": {"kind": "replace_say", "text": "x"}}}
    )  # fmt: skip
    graph = SimpleNamespace(
        links={2: [(5, "next")]}, situations={5: SimpleNamespace(input=feedback)}
    )
    request = SimpleNamespace(kind="failure")
    replacement, recovery = reinjection_points(request, graph, _step("bad_call"))  # type: ignore[arg-type]
    assert (replacement.id, replacement.input_step_id) == ("replacement", 2)
    assert recovery.id == "recovery"
    assert recovery.input is not None
    assert recovery.input.extra_keys == {"episode": 1}
    assert feedback.extra_keys["coaching"] == {"kind": "replace_say", "text": "x"}


def test_no_recovery_point_without_a_bad_call() -> None:
    """A failed call that is not a bad call offers `replacement` only."""
    graph = SimpleNamespace(links={2: [(5, "next")]}, situations={})
    points = reinjection_points(SimpleNamespace(kind="failure"), graph, _step("none"))  # type: ignore[arg-type]
    assert [point.id for point in points] == ["replacement"]


def _bad_call_run(recovery_stage: int) -> list[AnyEvent]:
    """c1, a single bad call, spends stage 0; a coached recovery r1 follows it in stage
    `recovery_stage`, and its next decision n1 fails."""
    stage = {"id": 0, "goal": "press sw0"}
    bad = _step("bad_call")
    env = {"type": "env", "content": "{}"}
    raw: list[tuple[str, dict[str, Any]]] = [
        ("run.started", RUN_STARTED),
        ("situation.created", {"situation_id": "S_a", "parent_candidate_id": None,
                               "stage": stage, "input": {"id": 0, "instruction": {
                                   "type": "user", "content": "press sw0"},
                                   "extra_keys": {"episode": 1}}}),
        ("candidate.created", {"candidate_id": "c1", "situation_id": "S_a",
                               "response_status": "completed", "memory": {"turns": 1},
                               "output": bad.candidate.output.model_dump()}),
        ("candidate.executed", {"candidate_id": "c1", "status": "finished",
                                "execution": bad.execution.execution,
                                "stage_end": {"event": "exceeded", "state": "exceeded"}}),
        ("situation.created", {"situation_id": "S_r", "parent_candidate_id": "c1",
                               "link": "alternative", "stage": {**stage, "id": recovery_stage},
                               "input": {"id": 9, "instruction": env}}),
        ("candidate.created", {"candidate_id": "r1", "situation_id": "S_r",
                               "response_status": "completed", "output": {"say": "ok"}}),
        ("candidate.executed", {"candidate_id": "r1", "status": "ongoing"}),
        ("situation.created", {"situation_id": "S_n", "parent_candidate_id": "r1",
                               "stage": {**stage, "id": recovery_stage},
                               "input": {"id": 10, "instruction": env}}),
        ("candidate.created", {"candidate_id": "n1", "situation_id": "S_n",
                               "response_status": "completed", "output": {"say": "no"}}),
        ("candidate.executed", {"candidate_id": "n1", "status": "finished",
                                "stage_end": {"event": "failure", "state": "optimal"}}),
    ]  # fmt: skip
    return [parse_event({"type": kind, "run_id": "b", "seq": seq, **fields})
            for seq, (kind, fields) in enumerate(raw)]  # fmt: skip


@pytest.mark.asyncio
async def test_a_call_that_ended_its_stage_is_recovered_after_its_terminal_status(
    store: GraphStore,
) -> None:
    """No situation follows a single bad call that ended its stage (a coached alternative
    below it is none): as MAGMA-GEN, `recovery`
    is offered at one built from the terminal status (the call's input, the agent's memory
    after it, the execution as feedback, no inherited correction), never stored, under an
    input id no generator gives; a success offers none."""
    await store.apply(_bad_call_run(0))
    graph = await store.load("b")
    assert graph is not None
    c1 = next(c.id for c in graph.candidates.values() if c.candidate_id == "c1")
    built = recovery_situation(graph, c1)
    assert built is not None
    assert (built.situation_id, built.parent_id, built_after(built)) == ("after:c1", c1, "c1")
    assert built.id not in graph.situations
    assert built.input.id >= RECOVERY_INPUT_BASE
    assert built.input.instruction.type == "env"
    assert json.loads(built.input.instruction.content) == _step("bad_call").execution.execution
    assert (built.input.memory, built.input.extra_keys) == ({"turns": 1}, {"episode": 1})
    request = SimpleNamespace(kind="failure")
    step = trajectory(graph, c1)[-1]
    _, recovery = reinjection_points(request, graph, step)  # type: ignore[arg-type]
    assert recovery.input == built.input
    succeeded = graph.executions[c1].model_copy(
        update={"stage_end": StageEnd(event="success", state="acceptable")}
    )
    graph.executions[c1] = succeeded
    assert recovery_situation(graph, c1) is None


@pytest.mark.asyncio
async def test_a_recovery_starts_from_the_feedback_the_generator_reported_with_the_call(
    store: GraphStore,
) -> None:
    """A generator that reports what the agent would have read after a stage-ending call
    (`feedback`: MAGMA-GEN's status return, the instruction its recovery starts from) has
    the built situation carry exactly that; an execution without one stores none."""
    feedback = {"type": "env", "content": '{"infos": "panda: wrong button", "failure_reason": "x"}'}
    events = _bad_call_run(0)
    events[3] = events[3].model_copy(update={"feedback": AgentInstruction.model_validate(feedback)})
    await store.apply(events)
    graph = await store.load("b")
    assert graph is not None
    c1 = next(c.id for c in graph.candidates.values() if c.candidate_id == "c1")
    built = recovery_situation(graph, c1)
    assert built is not None
    assert built.input.instruction.model_dump() == feedback
    r1 = next(c.id for c in graph.candidates.values() if c.candidate_id == "r1")
    assert graph.executions[r1].feedback is None


@pytest.mark.asyncio
@pytest.mark.parametrize(("stage", "path"), [(0, ["c1", "r1", "n1"]), (1, ["r1", "n1"])])
async def test_a_recovery_after_a_stage_end_goes_on_in_that_stage(
    store: GraphStore, stage: int, path: list[str]
) -> None:
    """A decision below a recovery from a stage-ending call has that call in its trajectory,
    in the same stage; below a situation of another stage, the trajectory starts there."""
    await store.apply(_bad_call_run(stage))
    graph = await store.load("b")
    assert graph is not None
    n1 = next(c.id for c in graph.candidates.values() if c.candidate_id == "n1")
    steps = trajectory(graph, n1)
    assert [s.candidate.candidate_id for s in steps] == path
    assert all(s.in_current_stage for s in steps)
