"""Assertions about ConfigError, and the fixtures' types, shared by the config tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gencoach.config import Settings
from gencoach.errors import ConfigError, ConfigProblem

Write = Callable[..., Path]
Load = Callable[..., Settings]
Refuse = Callable[..., ConfigError]


def problem_at(error: ConfigError, path: str) -> ConfigProblem:
    """The one problem of `error` at `path`; fails listing the paths there are otherwise."""
    found = [problem for problem in error.problems if problem.path == path]
    assert len(found) == 1, f"no single problem at {path!r} in {[p.path for p in error.problems]}"
    return found[0]


def assert_names(error: ConfigError, path: str, value: object) -> ConfigProblem:
    """Check that `error` reports `path` with `value`, both visible in its message."""
    problem = problem_at(error, path)
    assert problem.has_value
    assert problem.value == value
    assert f"{path}: " in str(error)
    assert repr(value) in str(error)
    return problem
