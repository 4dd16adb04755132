"""Fixtures shared by the simulator tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gencoach.sim import Episode


@pytest.fixture
def make_episode() -> Callable[..., Episode]:
    """Start episodes of any scenario; each test gets fresh ones."""

    def make(scenario: str = "buttons", seed: int = 0, probability: float = 0.0) -> Episode:
        return Episode.start(scenario, seed, injection_probability=probability)

    return make
