"""Train/validation partition by task, so no scenario and target is seen on both sides."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

from gencoach.protocol import RunConfig


@dataclass(frozen=True, order=True)
class Task:
    """What a run was asked to do: every branch and run of it belongs to one split."""

    scenario: str
    target: str

    @classmethod
    def of(cls, config: RunConfig) -> Task:
        """The task of a save."""
        return cls(config.scenario, config.target)

    def to_json(self) -> dict[str, str]:
        """The task as the manifest lists it."""
        return {"scenario": self.scenario, "target": self.target}


@dataclass(frozen=True)
class Partition:
    """Which tasks train and which validate, each side sorted."""

    train: tuple[Task, ...]
    validation: tuple[Task, ...]

    def to_json(self) -> dict[str, list[dict[str, str]]]:
        """The partition as the manifest records it."""
        return {
            "train": [task.to_json() for task in self.train],
            "validation": [task.to_json() for task in self.validation],
        }


def validation_size(tasks: int, ratio: float) -> int:
    """round(tasks * ratio), half up; at least 1 once there are 2 tasks, never all of them.

    A ratio of 0 asks for no validation split at all.
    """
    if tasks < 2 or ratio <= 0:
        return 0
    return min(tasks - 1, max(1, math.floor(tasks * ratio + 0.5)))


def partition(tasks: Iterable[Task], ratio: float, seed: int) -> Partition:
    """Shuffle the distinct tasks with `seed` and give the first ones to validation."""
    ordered = sorted(set(tasks))
    random.Random(seed).shuffle(ordered)
    count = validation_size(len(ordered), ratio)
    return Partition(
        train=tuple(sorted(ordered[count:])), validation=tuple(sorted(ordered[:count]))
    )
