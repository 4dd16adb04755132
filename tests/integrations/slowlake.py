"""FrozenLake whose every env step takes a while, so a generator holds orders it has not
executed yet for long enough to be killed then (steps block the generator's loop)."""

from __future__ import annotations

import time
from typing import Any

import gymnasium

from tests.integrations.frozenlake import FrozenLake

STEP_S = 0.15


class _SlowSteps(gymnasium.Wrapper):
    def step(self, action: Any) -> Any:
        time.sleep(STEP_S)
        return self.env.step(action)


class SlowLake(FrozenLake):
    """The 4x4 lake, each step `STEP_S` seconds long."""

    def make_env(self, seed: int) -> Any:
        return _SlowSteps(super().make_env(seed))
