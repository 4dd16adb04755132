"""What the runs page's Task column says of a run."""

from __future__ import annotations

from gencoach.console.runlist import task_text
from gencoach.protocol import TaskDescription


def test_the_task_is_the_stages_goals_when_the_task_lists_them() -> None:
    """A task described stage by stage reads as its goals; the target (often the
    scenario's whole description) is used only when no goal is known."""
    described = TaskDescription.model_validate(
        {
            "task_description": "Press the buttons the instruction names, in order.",
            "stages_description": [
                {"goal_description": "press sw3 twice"},
                {"goal_description": "say done"},
            ],
        }
    )
    target = "Press the buttons the instruction names, in order."
    assert task_text(target, described) == "press sw3 twice · say done"
    assert task_text("sw0-sw4", "press sw0, then sw4") == "sw0-sw4"
    empty = TaskDescription.model_validate({"task_description": None, "stages_description": []})
    assert task_text("sw0", empty) == "sw0"
