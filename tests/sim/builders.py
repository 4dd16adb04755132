"""Builders of agent decisions for the simulator tests."""

from __future__ import annotations

from typing import Any

from gencoach.sim import Episode, PressSequence


def press(button: str, robot: str = "panda") -> dict[str, Any]:
    """A press_button call as an agent would send it."""
    return {"name": "press_button", "arguments": {"id": button}, "target_robot_name": robot}


def act(*calls: dict[str, Any], say: str = "") -> dict[str, Any]:
    """A decision made of these calls."""
    return {"say": say, "tool_calls": list(calls)}


def sequence_of(episode: Episode) -> tuple[str, ...]:
    """The button sequence the current stage of a `buttons` episode expects."""
    goal = episode.stage.goals[0]
    assert isinstance(goal, PressSequence)
    return goal.buttons
