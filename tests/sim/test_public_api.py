"""The curated public surface of gencoach.sim."""

from __future__ import annotations

import gencoach.sim


def test_all_is_pinned() -> None:
    """`__all__` lists exactly the public names, without duplicates, and each one exists."""
    expected = {
        "INJECTION_MESSAGE", "SCENARIOS", "TOOLS", "ActiveError", "Answer", "Button", "Decision",
        "Episode", "EpisodeOverError", "EpisodeState", "Holding", "Injection", "Obj", "ObjectsIn",
        "Outcome", "Place", "Plan", "PressSequence", "Progress", "Robot", "Scenario", "Stage",
        "StageEnd", "StageTracker", "StepResult", "Task", "ToolCall", "ToolResult", "ToolSpec",
        "TrackerState", "Verdict", "World", "env_feedback", "execute", "feedback_text",
        "get_scenario", "parse_decision", "tabletop", "tool_specs",
    }  # fmt: skip
    assert len(gencoach.sim.__all__) == len(set(gencoach.sim.__all__))
    assert set(gencoach.sim.__all__) == expected
    for name in expected:
        assert hasattr(gencoach.sim, name)
