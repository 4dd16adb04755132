"""The environment feedback dict the agent reads after each decision."""

from __future__ import annotations

import json

from gencoach.sim import ToolCall, env_feedback, execute, tabletop


def test_feedback_lists_lines_calls_and_failures() -> None:
    """Feedback joins the lines, echoes the executed calls and gathers failure messages."""
    world = tabletop(0)
    results = [
        execute(
            world, ToolCall(name="take_obj", arguments={"obj": "cube"}, target_robot_name="ur5")
        ),
        execute(
            world, ToolCall(name="depose", arguments={"target": "shelf"}, target_robot_name="panda")
        ),
    ]
    feedback = env_feedback(results)
    assert feedback == {
        "infos": "ur5: take_obj succeed\npanda: depose failed with message: nothing is held",
        "previous_tool_call": [
            {"name": "take_obj", "arguments": {"obj": "cube"}, "target_robot_name": "ur5"},
            {"name": "depose", "arguments": {"target": "shelf"}, "target_robot_name": "panda"},
        ],
        "failure_reason": "panda: nothing is held",
    }
    assert json.loads(json.dumps(feedback)) == feedback


def test_feedback_without_failures_has_no_reason() -> None:
    """When every call succeeded, failure_reason is null."""
    world = tabletop(0)
    result = execute(
        world, ToolCall(name="press_button", arguments={"id": "sw1"}, target_robot_name="panda")
    )
    assert env_feedback([result])["failure_reason"] is None
    assert env_feedback([]) == {"infos": "", "previous_tool_call": [], "failure_reason": None}
