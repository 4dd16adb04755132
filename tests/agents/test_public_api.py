"""The public surface of gencoach.agents and gencoach.agents.reference."""

from __future__ import annotations

from types import ModuleType

import pytest

import gencoach.agents
import gencoach.agents.reference


def _isort_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then CamelCase, then the rest, each alphabetical."""
    if name.isupper():
        return (0, name)
    return (1, name) if name[0].isupper() else (2, name)


@pytest.mark.parametrize("module", [gencoach.agents, gencoach.agents.reference])
def test_all_is_sorted_unique_and_importable(module: ModuleType) -> None:
    """`__all__` lists each name once, in ruff's order, and each is an attribute."""
    names = module.__all__
    assert len(set(names)) == len(names)
    assert names == sorted(names, key=_isort_key)
    assert [name for name in names if not hasattr(module, name)] == []


def test_public_surface_is_pinned() -> None:
    """The exported names change only on purpose."""
    assert set(gencoach.agents.__all__) == {
        "COACHING_KEY", "SUPPORTED_BACKEND_TYPE", "Author", "CheckResult", "Coach",
        "CoachingOutcome", "CoachingSession", "Decided", "HistoryEntry", "Memory", "Policy",
        "PolicyError", "SessionRefusedError", "SessionStore", "check_agent", "coached_decision",
        "create_agent_app", "decision_entry", "entry_decision", "instruction_entry",
        "point_input", "replace_decision", "replace_say", "run_check_agent",
    }  # fmt: skip
    assert set(gencoach.agents.reference.__all__) == {
        "MISTAKES", "LLMPolicy", "Mistake", "MistakeRates", "ReferenceCoach",
        "ReferenceOptions", "ScriptedPolicy", "reference_app", "reference_info",
        "reference_policy", "serve_agent",
    }  # fmt: skip
