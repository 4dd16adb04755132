"""Callables that export options name as `module:function` in tests."""

from __future__ import annotations

NOT_A_FUNCTION = "a string"


def shout(reasoning: str) -> str:
    """A reasoning transform: the child thinks in capitals."""
    return reasoning.upper()


def number(reasoning: str) -> int:
    """A broken reasoning transform: not a string."""
    return len(reasoning)


def rejected(result: str) -> bool:
    """A tool's failure predicate: the simulator rejected the input."""
    return result.startswith("rejected")
