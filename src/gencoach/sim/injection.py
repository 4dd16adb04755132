"""The injected execution error: a one-shot tool failure drawn from a seeded generator.

The generator's whole state is a seed and a draw counter, stored in the world, so a
restored world draws exactly what the original would have drawn. Each stage allows
`shots_per_stage` injections (one by default): once it has fired, the retry succeeds.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

INJECTION_CODE = "injection_error"
INJECTION_MESSAGE = "temporary execution error. Please retry."


class ActiveError(BaseModel):
    """An error the simulator caused on purpose in a stage, reported to gencoach only."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    code: str
    description: str
    details: dict[str, Any] = Field(default_factory=dict)


class Injection(BaseModel):
    """Settings and generator state of the injected failure; part of the world state."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    probability: float = Field(default=0.0, ge=0.0, le=1.0)
    seed: int = 0
    draws: int = Field(default=0, ge=0)
    shots_per_stage: int = Field(default=1, ge=0)
    shots_left: int = Field(default=1, ge=0)

    def rearm(self) -> None:
        """Give a new stage its allowance of injections."""
        self.shots_left = self.shots_per_stage

    def fire(self) -> bool:
        """Draw once for a call that would succeed; true means it fails with the injected error."""
        if self.shots_left == 0 or self.probability == 0.0:
            return False
        # A string seed is hashed with SHA-512, so draws do not depend on PYTHONHASHSEED.
        value = random.Random(f"injection:{self.seed}:{self.draws}").random()
        self.draws += 1
        if value < self.probability:
            self.shots_left -= 1
            return True
        return False


def injection_error(robot: str, tool: str, arguments: dict[str, Any]) -> ActiveError:
    """The active-error record of one injected failure."""
    return ActiveError(
        code=INJECTION_CODE,
        description=INJECTION_MESSAGE,
        details={"robot": robot, "tool": tool, "arguments": dict(arguments)},
    )
