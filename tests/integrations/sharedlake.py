"""FrozenLake whose envs share module-level scratch state, as many envs do (a global
buffer, a native library): stepping two of them in concurrent threads breaks them."""

from __future__ import annotations

import time
from typing import Any

import gymnasium

from gencoach.integrations.gymnasium import OracleTeacher
from tests.integrations.frozenlake import FrozenLake

_SCRATCH: list[Any] = []  # every env of the module pushes and pops here


class _SharedScratch(gymnasium.Wrapper):
    def step(self, action: Any) -> Any:
        _SCRATCH.append(action)
        time.sleep(0.001)  # another thread steps meanwhile, as native code would let it
        if _SCRATCH.pop() != action or _SCRATCH:
            _SCRATCH.clear()
            raise IndexError("pop from empty list")  # what the integrator's env raised
        return self.env.step(action)


class SharedLake(FrozenLake):
    """The 4x4 lake on envs that are not thread-safe, even as separate instances."""

    def make_env(self, seed: int) -> Any:
        return _SharedScratch(super().make_env(seed))


teacher = OracleTeacher(SharedLake)
"""The oracle teacher over the shared lake (serialized: SharedLake is not thread_safe)."""
