"""The reinjection points a repair request offers, and the inputs they carry."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gencoach.protocol import AgentDecision, AgentInput
from gencoach.service.dispatching.job_building import reinjection_points


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
