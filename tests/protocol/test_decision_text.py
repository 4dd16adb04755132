"""Decisions as one line of text: written and read back, and what does not parse."""

from __future__ import annotations

import pytest

from gencoach.protocol import AgentDecision
from gencoach.protocol.decision_text import format_decision, parse_decision


def _decision(**data: object) -> AgentDecision:
    return AgentDecision.model_validate(data)


def _call(robot: str, name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments, "target_robot_name": robot}


@pytest.mark.parametrize(
    "decision",
    [
        {"say": "", "tool_calls": [_call("panda", "press_button", id="sw4")]},
        {"say": "done; really", "tool_calls": []},
        {
            "say": "moving (two) things",
            "tool_calls": [
                _call("ur5", "take_obj", obj="red_cube"),
                _call("ur5", "depose", target="bin_red", pose=[1, 2]),
                _call("panda", "cancel_current_action"),
            ],
        },
    ],
)
def test_round_trip(decision: dict[str, object]) -> None:
    """Any decision written as text reads back as the same decision."""
    parsed = _decision(**decision)
    assert parse_decision(format_decision(parsed)) == parsed


def test_reads_what_a_teacher_writes() -> None:
    """The documented form, with spaces, parses into robot, tool and JSON arguments."""
    decision = parse_decision('panda.press_button(id = "sw4") ;  say("ok")')
    assert decision == _decision(
        say="ok",
        tool_calls=[
            {"name": "press_button", "arguments": {"id": "sw4"}, "target_robot_name": "panda"}
        ],
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "press the fourth button",
        "panda.press_button(sw4)",
        "say(unquoted)",
        "panda press_button()",
    ],
)
def test_free_text_does_not_parse(text: str) -> None:
    """Text that does not follow the convention gives None, never a wrong decision."""
    assert parse_decision(text) is None
